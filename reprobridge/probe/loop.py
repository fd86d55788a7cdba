"""`rb init`'s probe: run the draft, read the failure, repair, run again, within a budget.

Contract of :func:`probe_repository`:

* It runs only in the auditor's sandbox (bubblewrap); where none is usable it runs nothing
  and says so. Each round is a smoke-tier trial audit (one run per chosen experiment, host
  backend by default) whose bundle lives under ``.reprobridge/probe/`` (rb's local records,
  never ``repro/evidence``: a probe is not an audit of the repository).
* After each round, every run's failure is classified (:mod:`reprobridge.probe.observe`)
  and the repairs of :data:`~reprobridge.probe.repairs.REPAIRS` that answer propose
  decisions (an earlier repair's standing where two set the same key); a lock uv could not make is repaired from uv's message first
  (:func:`~reprobridge.probe.repairs.lock_repairs`). New decisions are written to
  ``repro/probe.toml`` and `rb init` runs again (``reinit``), which applies them.
* It stops when a round proposes nothing new, when the time budget (``budget_s``, over
  every round) or the environment builds (``max_builds``: rounds after a change to the
  Python requirements) are spent, or after ``max_rounds``. Each round's runs are capped
  at what is left of the budget.
* A decision is never proposed twice: one the file already holds for the same target and
  operation is replaced, not repeated, so the loop cannot cycle.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reprobridge._fs import write_atomic
from reprobridge._log import emit
from reprobridge.constants import MANIFEST_FILE
from reprobridge.errors import ReproBridgeError
from reprobridge.manifest.io import read_manifest
from reprobridge.manifest.schema import Manifest
from reprobridge.probe.observe import Failure, Observation, classify, observe
from reprobridge.probe.record import PROBE_FILE, Decision, load_decisions, render_decisions
from reprobridge.probe.repairs import Context, lock_repairs, repairs_for

#: The share of the budget left that one round's runs may take.
ROUND_SHARE = 0.6

#: Where the probe's trial bundles go (rb's local records, next to the agent's).
PROBE_DIR = ".reprobridge/probe"

#: `rb init` again, after the decisions changed: the new manifest and the lock's warning.
Reinit = Callable[[], tuple[Manifest, str | None]]


@dataclass(frozen=True)
class ProbeOptions:
    """The probe's budget and where it runs (the CLI's flags and the user's config)."""

    budget_s: float = 600.0
    max_builds: int = 3
    max_rounds: int = 5
    backend: str = "host"
    threads: int | None = None


@dataclass(frozen=True)
class Round:
    """One round: what each run showed, and what was decided because of it."""

    failures: dict[str, Failure]
    decided: tuple[Decision, ...]
    wall_s: float
    bundle: str | None = None


@dataclass
class ProbeReport:
    """What the probe did: its rounds, the decisions now in force, why it stopped."""

    rounds: list[Round] = field(default_factory=list)
    decisions: tuple[Decision, ...] = ()
    stopped: str = ""
    wall_s: float = 0.0
    run_wall_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "stopped": self.stopped,
            "wall_s": round(self.wall_s, 3),
            "run_wall_s": round(self.run_wall_s, 3),
            "rounds": [
                {
                    "failures": {
                        k: {"kind": f.kind, "subject": f.subject, "line": f.line}
                        for k, f in r.failures.items()
                    },
                    "decided": [d.model_dump(mode="json") for d in r.decided],
                    "wall_s": round(r.wall_s, 3),
                }
                for r in self.rounds
            ],
            "decisions": [d.model_dump(mode="json") for d in self.decisions],
        }


def _same(a: Decision, b: Decision) -> bool:
    """Two decisions about the same thing (their values may differ)."""
    if a.target != b.target or a.op != b.op:
        return False
    if a.op == "set":
        return True
    if a.op == "replace-requirement":
        return (
            isinstance(a.value, dict)
            and isinstance(b.value, dict)
            and a.value.get("name") == b.value.get("name")
        )
    return a.value == b.value


def merge_decisions(
    old: tuple[Decision, ...], new: list[Decision]
) -> tuple[tuple[Decision, ...], list[Decision]]:
    """``old`` with ``new`` in force, and which of ``new`` changed anything."""
    out = list(old)
    changed: list[Decision] = []
    for d in new:
        hit = next((i for i, o in enumerate(out) if _same(o, d)), None)
        if hit is None:
            out.append(d)
            changed.append(d)
        elif out[hit].value != d.value:
            out[hit] = d
            changed.append(d)
    return tuple(out), changed


def _repository(root: Path) -> tuple[frozenset[str], dict[str, str]]:
    """The files git lists under ``root`` and the text of its READMEs (at most one folder
    down), from one index of the repository."""
    from reprobridge.detect.index import RepoIndex

    index = RepoIndex.from_git(root)
    files = frozenset(e.path for e in index)
    readmes: dict[str, str] = {}
    for path in sorted(files):
        if path.rsplit("/", 1)[-1].lower().startswith("readme") and path.count("/") <= 1:
            text = index.try_read_text(path)
            if text is not None:
                readmes[path] = text
    return files, readmes


def _targets(manifest: Manifest) -> list[str]:
    main = [k for k, e in manifest.experiments.items() if e.main]
    return main or list(manifest.experiments)[:1]


def _gpu_visible() -> bool:
    from reprobridge.audit.fingerprint import gpu_fingerprint

    gpus = gpu_fingerprint().get("gpus") or []
    return bool(gpus)


def _run_round(
    root: Path, opts: ProbeOptions, targets: list[str], cap: float, n: int
) -> tuple[list[Observation], str]:
    from reprobridge.audit.auditor import AuditOptions, run_audit

    where = root / PROBE_DIR
    result = run_audit(
        root,
        AuditOptions(
            experiments=targets,
            runs=1,
            tier="smoke",
            backend=opts.backend,  # type: ignore[arg-type]
            sandbox="on",
            evidence_root=where,
            trial=True,
            max_timeout_s=cap,
            # A repository under development has changes no run includes: a trial records
            # them (the runs use the commit plus rb's artifacts, as an audit's).
            allow_dirty=True,
            # No package's build code runs during `rb init` (a build backend reaches the
            # network it builds with): a package without a wheel fails the trial's
            # environment, named; `rb audit` may build it in its sandbox.
            no_build=True,
            grace=5.0,
            threads=opts.threads,
        ),
    )
    return observe(result.path), str(result.path)


def probe_repository(
    root: Path, opts: ProbeOptions, reinit: Reinit, lock_warning: str | None
) -> ProbeReport:
    """Probe ``root`` (see the module docstring); ``reinit`` is `rb init` again."""
    from reprobridge.sandbox import sandbox_unusable

    report = ProbeReport()
    start = time.monotonic()
    why_not = sandbox_unusable()
    if why_not is not None:
        report.stopped = (
            f"not probed: no sandbox ({why_not}); nothing of the repository runs outside one"
        )
        return report
    manifest = read_manifest(root / MANIFEST_FILE)
    if not manifest.experiments:
        report.stopped = "not probed: no experiment was recovered"
        return report
    decisions = load_decisions(root)
    _fresh_trials(root)
    files, readmes = _repository(root)
    gpu = _gpu_visible()
    builds = 0
    for n in range(1, opts.max_rounds + 1):
        left = opts.budget_s - (time.monotonic() - start)
        t0 = time.monotonic()
        new: list[Decision] = []
        failures: dict[str, Failure] = {}
        bundle = None
        if lock_warning and builds < opts.max_builds:
            new = lock_repairs(lock_warning, manifest)
            if new:
                failures["(lock)"] = Failure(
                    "environment", line=" ".join(lock_warning.split())[:300]
                )
        if not new:
            if left < 30:
                report.stopped = f"time budget spent ({opts.budget_s:g}s)"
                break
            emit(
                "probe-round",
                round=n,
                experiments=",".join(_targets(manifest)),
                budget_left=round(left),
            )
            try:
                # Never the whole budget on one round: a run that times out must leave
                # time for the round its repair needs.
                cap = max(30.0, left * ROUND_SHARE)
                observations, bundle = _run_round(root, opts, _targets(manifest), cap, n)
            except ReproBridgeError as exc:
                report.stopped = f"the trial audit could not run: {exc.message}"
                break
            report.run_wall_s += time.monotonic() - t0
            ctx = Context(manifest, files, readmes, gpu)
            for obs in observations:
                failure = classify(obs)
                failures[obs.experiment] = failure
                emit("probe-run", experiment=obs.experiment, kind=failure.kind, line=failure.line)
                new += repairs_for(failure, obs, ctx)
        env_change = [d for d in new if d.target.startswith("environment.python_requirements")]
        if env_change and builds >= opts.max_builds:
            new = [d for d in new if d not in env_change]
        decisions, changed = merge_decisions(decisions, new)
        report.rounds.append(Round(failures, tuple(changed), time.monotonic() - t0, bundle))
        if not changed:
            done = all(f.kind == "ok" for f in failures.values()) if failures else False
            report.stopped = (
                "every chosen experiment reached a metric"
                if done
                else "no repair applies to what the runs showed"
            )
            break
        if any(d.target.startswith("environment.python_requirements") for d in changed):
            builds += 1
        for why in dict.fromkeys(d.why for d in changed):
            repair = next(d.repair for d in changed if d.why == why)
            emit("probe-decision", repair=repair, why=why)
        write_atomic(root / PROBE_FILE, render_decisions(decisions).encode())
        manifest, lock_warning = reinit()
    else:
        report.stopped = f"round limit reached ({opts.max_rounds})"
    report.decisions = decisions
    report.wall_s = time.monotonic() - start
    return report


def _fresh_trials(root: Path) -> None:
    """An empty trial directory for this probe (the last probe's bundles go: they describe
    a draft that no longer exists), which git ignores: ``.reprobridge/`` holds rb's local
    records, never artifacts to commit."""
    records = root / PROBE_DIR
    shutil.rmtree(records, ignore_errors=True)
    records.mkdir(parents=True)
    ignore = records.parent / ".gitignore"
    if not ignore.exists() and not ignore.is_symlink():
        ignore.write_text("# rb's local records (probe trials, agent ledger): not artifacts.\n*\n")
