"""The typed records `rb bench` writes: one per repository, and the whole bench.

A :class:`RepoRecord` is written atomically to ``<out>/records/<name>.json`` when its
repository is done (whatever the outcome), so an interrupted bench resumes by skipping the
names that have one. Levels are cumulative: a repository reaches ``procedure`` only through
an experiment whose environment was built, ``metric`` only through a run whose procedure
passed (or ran to the end with notebook cells raising unmarked: ``ExperimentRow.cells_raised``,
counted and listed apart). ``None`` means not applicable (``target`` without expected values, and every level
of a repository that was not run).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The levels of the table, in order; a repository's cause is the first one it missed.
LEVELS: tuple[str, ...] = ("init", "environment", "procedure", "metric", "target")
LEVEL_TITLES: dict[str, str] = {
    "init": "rb init",
    "environment": "environment built",
    "procedure": "procedure ran",
    "metric": "metric extracted",
    "target": "target met",
}

PassKind = Literal["raw", "reuse"]


class ExperimentRow(BaseModel):
    """One experiment of one repository's smoke audit."""

    model_config = ConfigDict(extra="forbid")

    id: str
    environment: str  # the audit's verdict words: pass, fail, skipped, not-applicable
    procedure: str
    metric_extracted: bool
    reason: str  # the first failing level's reason ("" when none failed)
    metrics: dict[str, float] = Field(default_factory=dict)
    #: The procedure ran to the end, but notebook cells raised that nothing marks as meant
    #: to raise (the audit's procedure verdict is ``incomplete`` and names them; ``reason``
    #: says which): the row counts as "procedure ran", its metrics (read from the cells
    #: that did not raise) as extracted, and the totals list the repository apart.
    cells_raised: bool = False


class Dependencies(BaseModel):
    """What `rb init` declared against what a person verified the experiment needs."""

    model_config = ConfigDict(extra="forbid")

    declared: list[str] = Field(default_factory=list)  # normalized names rb declared
    needed: list[str] = Field(default_factory=list)  # from the suite ("a|b": either)
    found: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    local: list[str] = Field(default_factory=list)  # declared names that are local modules


class RepoRecord(BaseModel):
    """Everything the bench learned about one repository."""

    model_config = ConfigDict(extra="forbid")

    name: str
    shape: str = ""
    cpu_runnable: bool = True
    #: The suite entry's ``notes``: what limits the repository as benched (a snapshot
    #: without its large files, why it is not CPU-runnable), shown under the table.
    notes: str = ""
    source: str  # "path <dir>" or "<url>@<commit>"
    commit: str = ""  # the copy's HEAD
    pass_kind: PassKind = "raw"
    levels: dict[str, bool | None]
    failed_level: str | None = None
    cause: str = ""
    #: The experiments `rb init` wrote, and those of them with a smoke tier (what a smoke
    #: audit can run at all).
    declared_experiments: list[str] = Field(default_factory=list)
    smoke_experiments: list[str] = Field(default_factory=list)
    experiments: list[ExperimentRow] = Field(default_factory=list)
    claims_total: int = 0
    claims_holding: int = 0
    dependencies: Dependencies = Field(default_factory=Dependencies)
    init_exit: int | None = None
    audit_exit: int | None = None
    audit_id: str | None = None
    init_s: float = 0.0
    audit_s: float = 0.0
    wall_s: float = 0.0
    agent_cost_usd: float | None = None
    warnings: list[str] = Field(default_factory=list)
    #: `rb init`'s probe: its time in all, the time its trial runs took, why it stopped and
    #: what it decided (``repair: target``); None when `rb init` did not probe.
    probe_s: float | None = None
    probe_run_s: float | None = None
    probe_stopped: str = ""
    probe_decisions: list[str] = Field(default_factory=list)


class BenchReport(BaseModel):
    """A finished bench: its settings, every record in suite order, and where it ran."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    suite_name: str = ""
    rb_version: str
    rb_commit: str = ""
    tier: str
    runs: int
    backend: str
    agent: str
    time_limit_s: float
    jobs: int
    #: CPU threads each audited run was given (``rb audit --threads``), and why that many
    #: (None in a report from before the setting).
    threads: int | None = None
    threads_from: str = ""
    reuse: str | None = None
    records: list[RepoRecord]
    #: The first pass's records (``--reuse``), for the raw-vs-refined comparison.
    baseline: list[RepoRecord] | None = None
