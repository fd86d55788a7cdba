"""Read an evidence bundle into typed data for the report.

Contract:

* Nothing is re-judged: verdicts, reasons, statistics and claim results are the bundle's
  own (``audit.json``, each run's ``status.json`` and ``metrics.json``). The only numbers
  derived here are for drawing: the target band of a metric (from the manifest the audit
  used, ``inputs/reprobridge.toml``) and the spread of values between runs.
* A bundle is untrusted input: any file may be missing, malformed or hold hostile strings.
  Loading never fails for a malformed *part*; it leaves that part empty. Only a bundle
  without a readable ``audit.json`` (not a finished audit) is refused, with
  :class:`~reprobridge.errors.AuditError`. Strings are kept as they are: escaping is the
  renderers' job.
* Large parts are bounded: timelines are thinned to :data:`MAX_TIMELINE_POINTS` samples
  and log tails to :data:`LOG_TAIL_LINES` lines / :data:`LOG_TAIL_BYTES` bytes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge._fs import open_regular, read_regular
from reprobridge.artifacts.check import tier_metrics
from reprobridge.artifacts.flake import parse_flake_lock
from reprobridge.constants import EVIDENCE_DIR
from reprobridge.errors import AuditError
from reprobridge.evidence.layout import (
    AUDIT_FILE,
    ENVIRONMENT_FILE,
    PLAN_FILE,
    RUNS_DIR,
    STATUS_FILE,
)
from reprobridge.evidence.provenance import provenance
from reprobridge.evidence.records import (
    LEVELS,
    AuditSummary,
    ClaimResult,
    LevelVerdict,
    MetricSummary,
    Plan,
    RecordError,
    RunRecord,
    RunStatus,
    failed_level,
)
from reprobridge.evidence.store import EvidenceStore
from reprobridge.report.curves import Curve, run_curves, thin
from reprobridge.report.images import ImageBudget, ImageFile, run_images

__all__ = ["Curve", "ImageFile", "thin"]

#: Timeline samples kept per run (evenly thinned beyond this; peaks come from status.json).
MAX_TIMELINE_POINTS = 400
#: Log tail shown per stream.
LOG_TAIL_LINES = 40
LOG_TAIL_BYTES = 8192
#: Run variables that differ between runs by design (a run's own id and its scratch home).
VARYING_BY_DESIGN = frozenset({"RB_RUN_ID", "RB_RUN_MARKER", "HOME"})


# -- small readers (untrusted JSON: never raise, never trust a type) -----------------------


def _json(path: Path) -> Any:
    try:
        return json.loads(read_regular(path))
    except (OSError, ValueError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _str(value: Any, default: str = "") -> str:
    if value is None:
        return default
    return value if isinstance(value, str) else str(value)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _int(value: Any) -> int | None:
    number = _float(value)
    return int(number) if number is not None else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


# -- the data -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    """What a metric must meet, for drawing: ``target`` ± ``half`` (a two-sided band), or a
    one-sided target (``direction`` ``ge``/``le``; ``eq`` for an exact target), plus
    ``low``/``high`` (the manifest's min/max). ``applied`` is False where the tier does not
    apply thresholds (smoke without its own metrics)."""

    target: float | None
    half: float | None
    direction: str | None
    low: float | None
    high: float | None
    applied: bool = True

    def edges(self) -> list[float]:
        """Every number the band mentions (for choosing an axis range)."""
        out = [v for v in (self.target, self.low, self.high) if v is not None]
        if self.target is not None and self.half is not None:
            out += [self.target - self.half, self.target + self.half]
        return out


@dataclass(frozen=True)
class MetricData(MetricSummary):
    """One metric of one experiment over its runs, as ``audit.json`` states it (the
    :class:`MetricSummary` fields, in run order), with what the report draws it with: the
    manifest's band, direction and provenance."""

    name: str
    band: Band | None
    higher_is_better: bool | None
    provenance: str


@dataclass(frozen=True)
class Sample:
    """One timeline sample: seconds since start, CPU% (summed over the tree), RSS bytes,
    and per GPU ``(index, util %, memory used bytes)``."""

    t: float
    cpu_percent: float
    rss_bytes: int
    gpus: tuple[tuple[int, float, int], ...] = ()


@dataclass(frozen=True)
class RunData:
    """One run of one experiment, from its sealed files."""

    experiment: str
    k: int
    seed: int | None
    sealed: bool
    not_started: str | None
    termination: str
    procedure_ok: bool | None
    procedure_reason: str
    wall_s: float | None
    cpu_s: float | None
    started_at: str
    finished_at: str
    peaks: dict[str, Any]
    timeline: list[Sample]
    env: dict[str, str]
    packages: dict[str, str]
    python: str
    stdout_tail: str
    stderr_tail: str
    stdout_bytes: int | None
    stderr_bytes: int | None
    sandbox: str
    #: Image outputs the experiment declares, from the run's copies (:mod:`.images`).
    images: list[ImageFile] = field(default_factory=list)
    #: Each regex metric's values in log order (:mod:`.curves`).
    curves: dict[str, Curve] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``run 1`` for k = 0: runs are numbered from 1 in reasons and in the report."""
        return f"run {self.k + 1}"


@dataclass(frozen=True)
class ExperimentData:
    """An experiment's levels, metrics and runs."""

    id: str
    description: str
    levels: dict[str, LevelVerdict]
    metrics: list[MetricData]
    runs: list[RunData]
    policy: str

    @property
    def failed_level(self) -> str | None:
        """The lowest failing level, as ``ExperimentVerdict.failed_level`` names it."""
        return failed_level(self.levels)


@dataclass(frozen=True)
class AuditData:
    """A finished audit, as its bundle records it: ``summary`` is its ``audit.json``; the
    other fields are the rest of the bundle, and the identity with fallbacks where an older
    bundle lacks it (``audit_id``: the directory's name; ``tier``, ``rb_version``: the
    plan's; ``backend``: ``unknown``)."""

    path: Path
    summary: AuditSummary
    audit_id: str
    tier: str
    backend: str
    rb_version: str
    commit: str
    manifest_sha256: str
    project: str
    paper_title: str
    experiments: list[ExperimentData]
    claims: list[ClaimResult]
    environment: dict[str, Any]
    host: dict[str, Any]
    gpu: dict[str, Any]
    git: dict[str, Any]
    nix: dict[str, Any]
    flake_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Why this bundle is not the operator's own (committed, or not started here); None
    #: when it is (:mod:`reprobridge.evidence.provenance`).
    foreign: str | None = None

    @property
    def verdict(self) -> str:
        """PASS, FAIL, INCOMPLETE or UNKNOWN (a bundle from before INCOMPLETE: from ``passed``)."""
        return self.summary.verdict

    @property
    def verdict_word(self) -> str:
        """The verdict word ``audit.json`` states, as it stands ("" when none)."""
        return _str(self.summary.judged.get("verdict"))

    @property
    def run_count(self) -> int:
        """All runs of the audit."""
        return sum(len(e.runs) for e in self.experiments)


# -- finding a bundle ---------------------------------------------------------------------


def resolve_bundle(spec: str | Path | None, root: Path) -> Path:
    """The bundle ``spec`` names: a path to a bundle directory, or an audit id under
    ``<root>/repro/evidence``; None means the newest finished one there. Raises AuditError
    when there is none or it is not finished (sealed): see
    :class:`~reprobridge.evidence.store.EvidenceStore`, the one definition of finished."""
    store = EvidenceStore(root / EVIDENCE_DIR)
    if spec is None and store.latest() is None:
        raise AuditError(
            "no finished audit to report on",
            path=str(store.root),
            hint="run `rb audit` first, or name a bundle: rb report PATH",
        )
    return store.resolve(spec)


# -- loading ------------------------------------------------------------------------------


def load_audit(path: Path) -> AuditData:
    """Read the bundle at ``path`` (see the module docstring for what is trusted)."""
    try:
        summary = AuditSummary.from_json(_json(path / AUDIT_FILE))
    except RecordError as exc:
        raise AuditError(
            f"not a finished audit: audit.json is missing or unusable ({exc.message})",
            path=str(path),
        ) from None
    try:
        plan: Plan | None = Plan.from_json(_json(path / PLAN_FILE))
    except RecordError:
        plan = None
    manifest = _manifest(path / "inputs" / "reprobridge.toml")
    tier = summary.tier or (plan.tier if plan else "") or "full"
    manifest_exps = _dict(manifest.get("experiments"))
    runs_by_exp: dict[str, list[RunData]] = {}
    runs_root = path / RUNS_DIR
    budget = ImageBudget()
    for exp_dir in sorted(runs_root.iterdir() if runs_root.is_dir() else []):
        if not exp_dir.is_dir():
            continue
        spec = _dict(manifest_exps.get(exp_dir.name))
        products = _Products(_regexes(spec, tier), _outputs(spec), budget)
        ks = sorted((int(p.name), p) for p in exp_dir.iterdir() if p.is_dir() and p.name.isdigit())
        runs_by_exp[exp_dir.name] = [_load_run(exp_dir.name, k, p, products) for k, p in ks]
    experiments = []
    for exp_id, verdict in sorted(_dict(summary.judged.get("experiments")).items()):
        experiments.append(
            _experiment(exp_id, _dict(verdict), _dict(manifest_exps.get(exp_id)), tier, runs_by_exp)
        )
    project = _dict(manifest.get("project"))
    git = _dict(_json(path / "fingerprint" / "git.json"))
    return AuditData(
        path=path,
        summary=summary,
        audit_id=summary.audit_id or path.name,
        tier=tier,
        backend=summary.backend or "unknown",
        rb_version=summary.rb_version or (plan.rb_version if plan else ""),
        commit=(plan.commit if plan else "") or _str(git.get("commit")),
        manifest_sha256=plan.manifest_sha256 if plan else "",
        project=_str(project.get("name")),
        paper_title=_str(_dict(project.get("paper")).get("title")),
        experiments=experiments,
        claims=[_claim(c, i) for i, c in enumerate(_list(summary.judged.get("claims")))],
        environment=_dict(_json(path / ENVIRONMENT_FILE)),
        host=_dict(_json(path / "fingerprint" / "host.json")),
        gpu=_dict(_json(path / "fingerprint" / "gpu.json")),
        git=git,
        nix=_dict(_json(path / "fingerprint" / "nix.json")),
        flake_inputs=_flake_inputs(path / "inputs" / "flake.lock"),
        foreign=provenance(path).foreign,
    )


def _manifest(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_regular(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _flake_inputs(path: Path) -> dict[str, dict[str, Any]]:
    """Each locked flake input's pins (type, rev, narHash, ...), by node name."""
    data = _json(path)
    if data is None:
        return {}
    parsed = parse_flake_lock(data)
    return {name: _dict(pins) for name, pins in sorted(_dict(parsed.get("inputs")).items())}


def _claim(raw: Any, i: int) -> ClaimResult:
    try:
        return ClaimResult.from_json(raw, f"audit.json.claims[{i}]")
    except RecordError:  # a malformed claim is shown empty, the report still renders
        return ClaimResult("", "", None, "", "", False)


def _experiment(
    exp_id: str,
    verdict: dict[str, Any],
    spec: dict[str, Any],
    tier: str,
    runs_by_exp: Mapping[str, list[RunData]],
) -> ExperimentData:
    levels = {}
    for name in LEVELS:
        raw = _dict(verdict.get(name))
        levels[name] = LevelVerdict(_str(raw.get("status"), "unknown"), _str(raw.get("reason")))
    try:
        specs, judged = tier_metrics(spec, tier)
    except (AttributeError, TypeError):  # a malformed manifest table: no bands, still a report
        specs, judged = {}, False
    metrics = []
    for name, raw in sorted(_dict(verdict.get("per_metric")).items()):
        mspec = _dict(specs.get(name))
        metrics.append(_metric(name, _dict(raw), mspec, judged))
    return ExperimentData(
        id=exp_id,
        description=_str(spec.get("description")),
        levels=levels,
        metrics=metrics,
        runs=runs_by_exp.get(exp_id, []),
        policy=_str(_dict(spec.get("stability")).get("policy"), "all"),
    )


def _metric(name: str, raw: dict[str, Any], spec: dict[str, Any], judged: bool) -> MetricData:
    try:
        m = MetricSummary.from_json(raw, f"audit.json: per_metric.{name}")
    except RecordError:  # a malformed metric is shown empty, the report still renders
        m = MetricSummary.from_json({}, name)
    return MetricData(
        **{f.name: getattr(m, f.name) for f in dataclasses.fields(m)},
        name=name,
        band=band_of(spec, judged) if spec else None,
        higher_is_better=_bool(spec.get("higher_is_better")),
        provenance=_str(spec.get("provenance")),
    )


def band_of(spec: Mapping[str, Any], applied: bool = True) -> Band | None:
    """The band of a manifest metric table, as check.py's rules state it: ``target ±
    max(tolerance, relative_tolerance·|target|)``; a target without tolerance is one-sided
    by ``higher_is_better`` (exact when unset); ``min``/``max`` bound it. None without any
    threshold."""
    target = _float(spec.get("target"))
    tol = _float(spec.get("tolerance"))
    rel = _float(spec.get("relative_tolerance"))
    low = _float(spec.get("min"))
    high = _float(spec.get("max"))
    half = direction = None
    if target is not None:
        if tol is not None or rel is not None:
            half = max(tol or 0.0, (rel or 0.0) * abs(target))
        else:
            better = spec.get("higher_is_better")
            direction = "ge" if better is True else "le" if better is False else "eq"
    if target is None and low is None and high is None:
        return None
    return Band(target, half, direction, low, high, applied)


@dataclass(frozen=True)
class _Products:
    """What a run produced that the report shows: the regex of each metric (for curves),
    the declared output paths (for images) and the page's image budget."""

    regexes: dict[str, str]
    outputs: list[str]
    budget: ImageBudget


def _regexes(spec: dict[str, Any], tier: str) -> dict[str, str]:
    """The regex of each metric of ``tier`` read from the log (the manifest's)."""
    try:
        specs, _ = tier_metrics(spec, tier)
    except (AttributeError, TypeError):  # a malformed manifest table: no curves
        return {}
    out = {}
    for name, mspec in _dict(specs).items():
        regex = _dict(_dict(mspec).get("source")).get("regex")
        if isinstance(regex, str):
            out[name] = regex
    return out


def _outputs(spec: dict[str, Any]) -> list[str]:
    """The paths an experiment declares in ``outputs``."""
    return [_str(_dict(o).get("path")) for o in _list(spec.get("outputs"))]


def _load_run(experiment: str, k: int, run_dir: Path, products: _Products) -> RunData:
    sealed = False
    try:
        status = RunStatus.from_json(_json(run_dir / STATUS_FILE))
        record, sealed = status.record, status.sealed
    except RecordError:  # unsealed or malformed: the run is shown without its record
        record = RunRecord(experiment, k, None, "", "", None, "")
    judgement = _dict(_json(run_dir / "metrics.json"))
    packages_raw = _dict(_json(run_dir / "packages.json"))
    packages = {}
    for item in _list(packages_raw.get("packages")):
        item = _dict(item)
        if item.get("name") is not None:
            packages[_str(item["name"])] = _str(item.get("version"))
    not_started = record.not_started
    term = record.termination
    procedure_ok = _bool(judgement.get("procedure_ok"))
    return RunData(
        experiment=experiment,
        k=k,
        seed=record.seed,
        sealed=sealed,
        not_started=not_started.reason if not_started else None,
        termination=(term.description if term else "")
        or (f"not started: {not_started.reason}" if not_started else "unknown"),
        procedure_ok=procedure_ok,
        procedure_reason=_str(judgement.get("procedure_reason")),
        wall_s=_finite(record.wall_s),
        cpu_s=_finite(record.cpu_s),
        started_at=record.started_at or "",
        finished_at=record.finished_at or "",
        peaks=_dict(record.peaks),
        timeline=_timeline(run_dir / "timeline.jsonl"),
        env={k: _str(v) for k, v in sorted(_dict(_json(run_dir / "env.json")).items())},
        packages=dict(sorted(packages.items())),
        python=_str(packages_raw.get("executable")),
        stdout_tail=_tail(run_dir / "stdout.log"),
        stderr_tail=_tail(run_dir / "stderr.log"),
        stdout_bytes=record.stdout.total_bytes if record.stdout else None,
        stderr_bytes=record.stderr.total_bytes if record.stderr else None,
        sandbox=record.sandbox,
        images=run_images(run_dir / "files", products.outputs, products.budget),
        curves=run_curves(products.regexes, run_dir),
    )


def _timeline(path: Path) -> list[Sample]:
    samples: list[Sample] = []
    try:
        lines = read_regular(path).splitlines()
    except OSError:
        return samples
    for line in lines:
        try:
            raw = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed run
        if not isinstance(raw, dict):
            continue
        t, cpu, rss = (
            _float(raw.get("t")),
            _float(raw.get("cpu_percent")),
            _int(raw.get("rss_bytes")),
        )
        if t is None or cpu is None or rss is None:
            continue
        gpus = []
        for g in _list(raw.get("gpus")):
            g = _dict(g)
            index, util, mem = _int(g.get("index")), _float(g.get("util")), _int(g.get("mem_used"))
            if index is not None and util is not None and mem is not None:
                gpus.append((index, util, mem))
        samples.append(Sample(t, cpu, rss, tuple(gpus)))
    return thin(samples, MAX_TIMELINE_POINTS)


def _tail(path: Path) -> str:
    """The end of a log: its last lines, decoded leniently (logs are bytes, not UTF-8)."""
    try:
        # Never through a link, never waiting on a FIFO planted in the bundle.
        with os.fdopen(open_regular(path), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            data = handle.read(LOG_TAIL_BYTES)
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    if size > LOG_TAIL_BYTES and lines:
        lines = lines[1:]  # the first line was cut by the byte window
    return "\n".join(lines[-LOG_TAIL_LINES:])


#: Lines of stderr shown under a failed run (terminal, Markdown, HTML).
FAILURE_TAIL_LINES = 12
#: Control characters a workload may print (terminal escapes, bells, carriage returns that
#: overwrite a line): never passed through to a terminal or a page as they are.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def failure_excerpt(run: RunData, lines: int = FAILURE_TAIL_LINES) -> list[str]:
    """The last ``lines`` non-blank lines of a failed run's stderr (already redacted when
    it was captured), control characters shown as ``\\xNN``; [] for a run that did not
    fail or printed nothing there. Where a crash explains itself (``python: not found``,
    a traceback's last line), this is the line that says why."""
    if run.procedure_ok is not False:
        return []
    kept = [line.rstrip() for line in run.stderr_tail.splitlines() if line.strip()]
    return [_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line) for line in kept[-lines:]]


# -- differences --------------------------------------------------------------------------


def differing(
    maps: Sequence[Mapping[str, str]], ignore: frozenset[str] = frozenset()
) -> dict[str, list[str | None]]:
    """Keys whose value is not the same in every map (None where a map lacks the key), in
    key order; ``ignore`` keys are left out."""
    keys = sorted({k for m in maps for k in m} - ignore)
    out: dict[str, list[str | None]] = {}
    for key in keys:
        values = [m.get(key) for m in maps]
        if len(set(values)) > 1:
            out[key] = values
    return out


def flatten(value: Any, prefix: str = "", *, max_items: int = 12) -> dict[str, str]:
    """A fingerprint as ``dotted.key -> text`` rows (for tables and diffs). Lists of scalars
    become one comma-joined value (at most ``max_items`` shown, then ``… (N in all)``);
    lists of tables are numbered (``gpus.0.name``)."""
    out: dict[str, str] = {}
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            out.update(
                flatten(value[key], f"{prefix}.{key}" if prefix else str(key), max_items=max_items)
            )
    elif isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            shown = ", ".join(_scalar(v) for v in value[:max_items])
            if len(value) > max_items:
                shown += f", … ({len(value)} in all)"
            out[prefix] = shown if value else "(none)"
        else:
            for i, item in enumerate(value):
                out.update(flatten(item, f"{prefix}.{i}", max_items=max_items))
    else:
        out[prefix] = _scalar(value)
    return out


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def package_sets(audit: AuditData) -> dict[str, str]:
    """The Python packages of an audit's runs: ``name -> version`` (versions joined with
    `` / `` where runs disagree)."""
    seen: dict[str, set[str]] = {}
    for exp in audit.experiments:
        for run in exp.runs:
            for name, version in run.packages.items():
                seen.setdefault(name, set()).add(version)
    return {name: " / ".join(sorted(v)) for name, v in sorted(seen.items())}
