"""The typed records of an evidence bundle: what ``rb audit`` writes, what every reader reads.

One class per record, each with its schema version (``FORMAT``):

* :class:`Plan` (``plan.json``) and :class:`PlannedRun`, one per run of the plan;
* :class:`RunStatus` (a run's ``status.json``, :data:`STATUS_FORMAT`) holding the
  :class:`RunRecord` and the listing of the run's files;
* :class:`AuditSummary` (``audit.json``) holding each experiment's verdicts
  (:class:`ExperimentSummary`, :class:`LevelVerdict`, :class:`MetricSummary` with its
  :class:`~reprobridge.stats.Stats`) and the claims (:class:`ClaimResult`).

Contract:

* ``to_json()`` gives the document as it is stored (canonical JSON is the bundle's job);
  ``from_json(raw)`` reads one back. A file holds its own format (``format``); a record
  nested in another (a run record, a metric's stats) is versioned by its container.
* Bundles written before ``format`` existed in ``plan.json``/``audit.json`` read as
  version 1. A format this rb does not know (a newer rb wrote it) and a value of the wrong
  type are a :class:`RecordError` naming the field: bundles are untrusted input, and a
  reader either gets a typed record or that error, never a ``KeyError``.
* Records are frozen; the writer builds a new one for each step (``dataclasses.replace``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from reprobridge.evidence.errors import EvidenceError
from reprobridge.stats import Stats

__all__ = [
    "AUDIT_FORMAT",
    "PLAN_FORMAT",
    "STATUS_FORMAT",
    "AuditSummary",
    "ClaimResult",
    "ExperimentSummary",
    "FileEntry",
    "LevelVerdict",
    "MetricSummary",
    "NotStarted",
    "Plan",
    "PlannedRun",
    "RecordError",
    "RunRecord",
    "RunStatus",
    "Stats",
    "StreamSummary",
    "TerminationRecord",
    "failed_level",
    "jsonable",
]

PLAN_FORMAT = "rb-plan/1"
AUDIT_FORMAT = "rb-audit/1"
STATUS_FORMAT = "rb-run-status/1"
LEVELS = ("environment", "procedure", "metric")


_T = TypeVar("_T")


class RecordError(EvidenceError):
    """A bundle record is malformed or of a format this rb cannot read (names the field)."""


# -- typed reads of untrusted JSON ----------------------------------------------------------


class _Fields:
    """Typed access to one JSON object; every miss is a RecordError naming the field."""

    def __init__(self, raw: object, where: str) -> None:
        if not isinstance(raw, dict):
            raise RecordError(f"{where}: not a JSON object")
        self.raw: dict[str, object] = raw
        self.where = where

    def _bad(self, key: str, what: str) -> RecordError:
        return RecordError(f"{self.where}.{key}: {what}, got {_shown(self.raw.get(key))}")

    def has(self, key: str) -> bool:
        return key in self.raw

    def _get(self, key: str, kind: type[_T], what: str, default: _T | None = None) -> _T:
        """The value at ``key`` (``default`` when absent), of type ``kind`` (a boolean is
        no number here), else a RecordError saying it is ``what``."""
        value = self.raw.get(key, default)
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
        raise self._bad(key, what)

    def _opt(self, key: str, kind: type[_T], what: str) -> _T | None:
        """As :meth:`_get`, but None when the key is absent or null."""
        return None if self.raw.get(key) is None else self._get(key, kind, what)

    def str_(self, key: str, default: str | None = None) -> str:
        return self._get(key, str, "not a string", default)

    def opt_str(self, key: str) -> str | None:
        return self._opt(key, str, "not a string")

    def int_(self, key: str, default: int | None = None) -> int:
        return self._get(key, int, "not an integer", default)

    def opt_int(self, key: str) -> int | None:
        return self._opt(key, int, "not an integer")

    def opt_float(self, key: str) -> float | None:
        value = self.raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # an integral JSON number is a number too
        return self._opt(key, float, "not a number")

    def bool_(self, key: str, default: bool | None = None) -> bool:
        return self._get(key, bool, "not a boolean", default)

    def opt_bool(self, key: str) -> bool | None:
        return self._opt(key, bool, "not a boolean")

    def dict_(self, key: str, default: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._get(key, dict, "not an object", default)

    def opt_dict(self, key: str) -> dict[str, Any] | None:
        return self._opt(key, dict, "not an object")

    def opt_record(self, key: str, read: Callable[[object, str], _T]) -> _T | None:
        """The record nested at ``key``, read by ``read(raw, where)`` (a ``from_json``);
        None when the key is absent or null."""
        if self.opt_dict(key) is None:
            return None
        return read(self.raw[key], f"{self.where}.{key}")

    def list_(self, key: str, default: list[object] | None = None) -> list[object]:
        return self._get(key, list, "not a list", default)

    def str_list(self, key: str) -> tuple[str, ...]:
        items = self.list_(key, [])
        strings = tuple(s for s in items if isinstance(s, str))
        if len(strings) != len(items):
            raise self._bad(key, "not a list of strings")
        return strings

    def format(self, expected: str) -> str:
        """The record's ``format``: absent (written before it existed) reads as version 1."""
        value = self.raw.get("format", expected)
        if value != expected:
            raise RecordError(
                f"{self.where}.format: {_shown(value)} is not {expected!r} "
                "(written by another version of rb?)"
            )
        return expected

    def fields_of(self, cls: type, **given: object) -> dict[str, Any]:
        """The keyword arguments for dataclass ``cls``: ``given``, and every other field
        read by its annotation (:data:`_READ_BY_TYPE`), so a field added to a record is
        read back without another line. A KeyError names an annotation with no reader."""
        out: dict[str, Any] = dict(given)
        for fld in dataclasses.fields(cls):
            if fld.name not in out:
                out[fld.name] = _READ_BY_TYPE[str(fld.type)](self, fld.name)
        return out


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bool_or_none(value: object) -> bool | None:
    """A boolean, else None (a summary's flags are optional: older bundles lack some)."""
    return value if isinstance(value, bool) else None


def _number(value: object) -> float | None:
    """A finite number, else None (values in a verdict may be null)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: dataclasses as objects of their fields, tuples as lists,
    paths as strings, keys as strings (how the auditor stores its own dataclasses)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


# -- plan.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedRun:
    """One run: repeat ``k`` (0-based) of ``experiment`` with ``seed``."""

    experiment: str
    k: int
    seed: int
    timeout_s: float

    @property
    def key(self) -> str:
        return f"{self.experiment}/{self.k}"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, raw: object, where: str = "plan.json: runs[]") -> PlannedRun:
        f = _Fields(raw, where)
        timeout = f.opt_float("timeout_s")
        if timeout is None:
            raise f._bad("timeout_s", "not a number")
        return cls(f.str_("experiment"), f.int_("k"), f.int_("seed"), timeout)


@dataclass(frozen=True)
class Plan:
    """``plan.json``: what the audit runs, written before the first run and never again
    (a resume reads it back)."""

    FORMAT: ClassVar[str] = PLAN_FORMAT

    audit_id: str
    rb_version: str
    tier: str
    backend_requested: str
    commit: str
    manifest_sha256: str
    runs: tuple[PlannedRun, ...]

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, **jsonable(self)}

    @classmethod
    def from_json(cls, raw: object) -> Plan:
        f = _Fields(raw, "plan.json")
        f.format(cls.FORMAT)
        runs = tuple(
            PlannedRun.from_json(r, f"plan.json: runs[{i}]") for i, r in enumerate(f.list_("runs"))
        )
        return cls(
            audit_id=f.str_("audit_id", ""),
            rb_version=f.str_("rb_version", ""),
            tier=f.str_("tier"),
            backend_requested=f.str_("backend_requested", ""),
            commit=f.str_("commit", ""),
            manifest_sha256=f.str_("manifest_sha256", ""),
            runs=runs,
        )


# -- a run's status.json ----------------------------------------------------------------------


@dataclass(frozen=True)
class NotStarted:
    """Why a run did not start, and the level that fails for it; ``machine`` when the
    reason is this machine (no GPU, Nix too old or offline for the pin): that level is then
    not judged, never failed."""

    level: str
    reason: str
    machine: bool = False

    def to_json(self) -> dict[str, Any]:
        """As status.json holds it: ``machine`` only when true (older records lack it)."""
        out: dict[str, Any] = {"level": self.level, "reason": self.reason}
        if self.machine:
            out["machine"] = True
        return out

    @classmethod
    def from_json(cls, raw: object, where: str) -> NotStarted:
        f = _Fields(raw, where)
        return cls(f.str_("level", ""), f.str_("reason"), f.opt_bool("machine") is True)


@dataclass(frozen=True)
class TerminationRecord:
    """How a run ended (:class:`reprobridge._proc.monitored.Termination`, as stored)."""

    kind: str
    returncode: int | None
    signal: int | None
    description: str

    @property
    def ok(self) -> bool:
        """Exit 0: the only normal end of a run."""
        return self.kind == "exit" and self.returncode == 0

    @classmethod
    def from_json(cls, raw: object, where: str) -> TerminationRecord:
        f = _Fields(raw, where)
        return cls(
            f.str_("kind", ""),
            f.opt_int("returncode"),
            f.opt_int("signal"),
            f.str_("description", "unknown"),
        )


@dataclass(frozen=True)
class StreamSummary:
    """One captured stream as a whole: its size and sha256, and whether the stored log
    holds only its head and tail."""

    total_bytes: int
    sha256: str
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, raw: object, where: str) -> StreamSummary:
        f = _Fields(raw, where)
        return cls(f.int_("total_bytes"), f.str_("sha256", ""), f.bool_("truncated", False))


#: How :meth:`_Fields.fields_of` reads a field of each annotation: an absent string or
#: integer reads as "" or 0 (identity fields every writer stored), an absent optional
#: part as None.
_READ_BY_TYPE: dict[str, Callable[[_Fields, str], object]] = {
    "str": lambda f, key: f.str_(key, ""),
    "int": lambda f, key: f.int_(key, 0),
    "str | None": _Fields.opt_str,
    "int | None": _Fields.opt_int,
    "float | None": _Fields.opt_float,
    "bool | None": _Fields.opt_bool,
    "tuple[str, ...]": _Fields.str_list,
    "dict[str, Any] | None": _Fields.opt_dict,
    "dict[str, list[str]] | None": _Fields.opt_dict,
    "StreamSummary | None": lambda f, key: f.opt_record(key, StreamSummary.from_json),
}


#: What a run's record holds once the run ended (stored with its ``termination``).
_ENDED = (
    "wall_s",
    "cpu_user_s",
    "cpu_sys_s",
    "cpu_source",
    "started_at",
    "finished_at",
    "survivors_killed",
    "peaks",
)


@dataclass(frozen=True)
class RunRecord:
    """The ``record`` of a run's ``status.json``: what ran, where, and how it ended.

    Built in steps by the auditor: the identity first; ``workspace`` (with
    ``max_processes``, ``process_limit_by`` and ``threads``) once the workspace exists;
    ``built_from_source`` (``without_wheel``, ``built``: package names) once the setup
    steps ran; ``executor`` and the rest once the run ran. A run that could not start has ``not_started``.
    Optional parts absent from the record are None (older bundles lack some, e.g.
    ``cpu_source``, ``output``).
    """

    experiment: str
    k: int
    seed: int | None
    tier: str
    backend: str
    hermetic: bool | None
    sandbox: str
    extra_ro_binds: tuple[str, ...] = ()
    workspace: dict[str, Any] | None = None
    max_processes: int | None = None
    process_limit_by: tuple[str, ...] = ()
    #: The operator's CPU thread setting for the run (``--threads``); None: not set.
    threads: int | None = None
    built_from_source: dict[str, list[str]] | None = None
    not_started: NotStarted | None = None
    executor: str | None = None
    placement: dict[str, Any] | None = None
    files_refused: dict[str, str] | None = None
    termination: TerminationRecord | None = None
    wall_s: float | None = None
    cpu_user_s: float | None = None
    cpu_sys_s: float | None = None
    cpu_source: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    survivors_killed: int | None = None
    stdout: StreamSummary | None = None
    stderr: StreamSummary | None = None
    output: StreamSummary | None = None
    peaks: dict[str, Any] | None = None

    @classmethod
    def for_run(
        cls,
        run: PlannedRun,
        *,
        tier: str,
        backend: str,
        hermetic: bool | None,
        sandbox: str,
        extra_ro_binds: tuple[str, ...] = (),
    ) -> RunRecord:
        """The record's first step: the planned ``run``'s identity and where it runs."""
        return cls(
            run.experiment, run.k, run.seed, tier, backend, hermetic, sandbox, extra_ro_binds
        )

    def with_(self, **changes: Any) -> RunRecord:
        """A copy with ``changes`` (the writer's next step)."""
        return replace(self, **changes)

    @property
    def cpu_s(self) -> float | None:
        """User + system CPU seconds; None when neither is recorded."""
        if self.cpu_user_s is None and self.cpu_sys_s is None:
            return None
        return (self.cpu_user_s or 0.0) + (self.cpu_sys_s or 0.0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "experiment": self.experiment,
            "k": self.k,
            "seed": self.seed,
            "tier": self.tier,
            "backend": self.backend,
            "hermetic": self.hermetic,
            "sandbox": self.sandbox,
            "extra_ro_binds": list(self.extra_ro_binds),
        }
        if self.workspace is not None:
            # The process limit and thread setting are recorded with the workspace they
            # applied to (None: no limit, no setting).
            out["workspace"] = self.workspace
            out["max_processes"] = self.max_processes
            out["process_limit_by"] = list(self.process_limit_by)
            out["threads"] = self.threads
        if self.built_from_source is not None:
            out["built_from_source"] = self.built_from_source
        if self.not_started is not None:
            out["not_started"] = self.not_started.to_json()
        if self.executor is not None:
            out["executor"] = self.executor
        if self.placement is not None:
            out["placement"] = self.placement
        if self.files_refused is not None:
            out["files_refused"] = self.files_refused
        if self.termination is not None:
            out["termination"] = dataclasses.asdict(self.termination)
            out.update({name: getattr(self, name) for name in _ENDED})
        for name in ("stdout", "stderr", "output"):
            stream: StreamSummary | None = getattr(self, name)
            if stream is not None:
                out[name] = stream.to_json()
        return out

    @classmethod
    def from_json(cls, raw: object, where: str = "status.json: record") -> RunRecord:
        f = _Fields(raw, where)
        not_started = f.opt_record("not_started", NotStarted.from_json)
        termination = f.opt_record("termination", TerminationRecord.from_json)
        if termination is None and f.has("termination"):
            # The writer omits it until the run ended: null is no record of an end.
            raise f._bad("termination", "not an object")
        refused = f.opt_dict("files_refused")
        if refused is not None and not all(isinstance(v, str) for v in refused.values()):
            raise f._bad("files_refused", "not an object of strings")
        # Every other field is read by its annotation (_READ_BY_TYPE).
        return cls(
            **f.fields_of(
                cls, not_started=not_started, termination=termination, files_refused=refused
            )
        )


@dataclass(frozen=True)
class FileEntry:
    """One file of a sealed run, as ``status.json`` lists it."""

    sha256: str
    size: int

    @classmethod
    def listed(cls, entry: object) -> FileEntry | None:
        """The entry as ``status.json`` lists it; None for a malformed one (which
        :meth:`reprobridge.evidence.bundle.Bundle.check_run` reports)."""
        if not isinstance(entry, dict):
            return None
        sha256, size = entry.get("sha256"), entry.get("size")
        return cls(sha256, size) if isinstance(sha256, str) and isinstance(size, int) else None


@dataclass(frozen=True)
class RunStatus:
    """A run's ``status.json``, written last: the run record and every other file's
    sha256 and size (what makes the run *sealed*)."""

    FORMAT: ClassVar[str] = STATUS_FORMAT

    record: RunRecord
    files: dict[str, FileEntry] = field(default_factory=dict)
    sealed: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.FORMAT,
            "sealed": self.sealed,
            "record": self.record.to_json(),
            "files": {
                name: {"sha256": e.sha256, "size": e.size} for name, e in sorted(self.files.items())
            },
        }

    @classmethod
    def from_json(cls, raw: object, where: str = "status.json") -> RunStatus:
        """The status with its record typed; the file listing is checked by
        :meth:`reprobridge.evidence.bundle.Bundle.check_run`, which reads it entry by entry
        (a malformed entry is a finding about that file there)."""
        f = _Fields(raw, where)
        f.format(cls.FORMAT)
        files: dict[str, FileEntry] = {}
        for name, entry in f.dict_("files", {}).items():
            listed = FileEntry.listed(entry)
            if listed is not None:
                files[str(name)] = listed
        record = RunRecord.from_json(f.raw.get("record"), f"{where}: record")
        return cls(record, files, f.raw.get("sealed") is True)


# -- audit.json -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelVerdict:
    """One level's verdict (``pass``, ``fail``, ``incomplete``, ``skipped``, ...)."""

    status: str
    reason: str


def failed_level(levels: Mapping[str, LevelVerdict]) -> str | None:
    """The lowest of :data:`LEVELS` whose status is ``fail``, or None."""
    return next((n for n in LEVELS if levels[n].status == "fail"), None)


@dataclass(frozen=True)
class MetricSummary:
    """One metric of one experiment over its runs, as ``audit.json`` states it
    (:class:`reprobridge.audit.judge.ExperimentVerdict` documents each key)."""

    values: tuple[float | None, ...]
    statuses: tuple[str, ...]
    reasons: tuple[str, ...]
    counted: tuple[bool, ...]
    stats: Stats | None
    threshold: str
    source: str
    outcome: str
    reason: str
    policy: str
    claimed: float | None
    claimed_vs_measured: dict[str, Any] | None
    #: Where the tolerance comes from, in words ("" when none or not recorded).
    tolerance_source: str

    @classmethod
    def from_json(cls, raw: object, where: str) -> MetricSummary:
        f = _Fields(raw, where)
        cvm = f.raw.get("claimed_vs_measured")
        return cls(
            values=tuple(_number(v) for v in f.list_("values", [])),
            statuses=tuple(str(s) for s in f.list_("statuses", [])),
            reasons=tuple(str(s) for s in f.list_("reasons", [])),
            counted=tuple(bool(c) for c in f.list_("counted", [])),
            stats=Stats.from_json(f.raw.get("stats")),
            threshold=str(f.raw.get("threshold") or ""),
            source=str(f.raw.get("source") or ""),
            outcome=str(f.raw.get("outcome") or "unknown"),
            reason=str(f.raw.get("reason") or ""),
            policy=str(f.raw.get("policy") or ""),
            claimed=_number(f.raw.get("claimed")),
            claimed_vs_measured=cvm if isinstance(cvm, dict) else None,
            tolerance_source=str(f.raw.get("tolerance_source") or ""),
        )


@dataclass(frozen=True)
class ExperimentSummary:
    """One experiment's three levels and its metrics over the runs."""

    levels: dict[str, LevelVerdict]
    per_metric: dict[str, MetricSummary]
    runs: int

    @property
    def failed_level(self) -> str | None:
        """The lowest failing level, or None."""
        return failed_level(self.levels)

    @classmethod
    def from_json(cls, raw: object, where: str) -> ExperimentSummary:
        f = _Fields(raw, where)
        levels = {}
        for name in LEVELS:
            level = _Fields(f.dict_(name, {}), f"{where}.{name}")
            levels[name] = LevelVerdict(level.str_("status", "unknown"), level.str_("reason", ""))
        per_metric = {
            str(name): MetricSummary.from_json(m, f"{where}.per_metric.{name}")
            for name, m in f.dict_("per_metric", {}).items()
        }
        runs = f.raw.get("runs")
        return cls(levels, per_metric, runs if isinstance(runs, int) else 0)


@dataclass(frozen=True)
class ClaimResult:
    """A claim and its result: ``holds`` True/False, or None (undecided or skipped).
    ``provenance`` is the manifest claim's (None: it has none; read back as "")."""

    expr: str
    provenance: str | None
    holds: bool | None
    substituted: str
    reason: str
    skipped: bool
    #: The conclusion (``holds``, ``holds-not-significant``, ``does-not-hold``,
    #: ``undecided``; "" when skipped or in a bundle from before it was stored); ``holds`` is
    #: True for ``holds`` only.
    outcome: str = ""
    #: How it was judged: the significance test and its numbers, or why there was none.
    test: str = ""

    def to_json(self) -> dict[str, Any]:
        """As ``audit.json`` holds it: ``skipped`` is stored on a skipped claim only (an
        evaluated claim's object has always been without it); ``outcome`` and ``test`` only
        when set."""
        out = dataclasses.asdict(self)
        if not self.skipped:
            del out["skipped"]
        for key in ("outcome", "test"):
            if not out[key]:
                del out[key]
        return out

    @classmethod
    def from_json(cls, raw: object, where: str) -> ClaimResult:
        f = _Fields(raw, where)
        return cls(
            expr=f.str_("expr", ""),
            provenance=str(f.raw.get("provenance") or ""),
            holds=f.opt_bool("holds"),
            substituted=str(f.raw.get("substituted") or ""),
            reason=str(f.raw.get("reason") or ""),
            skipped=bool(f.raw.get("skipped")),
            outcome=str(f.raw.get("outcome") or ""),
            test=str(f.raw.get("test") or ""),
        )


@dataclass(frozen=True)
class AuditSummary:
    """``audit.json``: the verdicts of a finished audit and how it ran.

    ``judged`` is the part ``rb verify`` re-derives (what
    :func:`reprobridge.audit.verdicts.summarize` returns: ``tier``, ``experiments``,
    ``claims``, ``verdict``, ``incomplete``, ``passed``), kept as the JSON it is, so a
    comparison sees every stored leaf; the typed views below read from it.
    """

    FORMAT: ClassVar[str] = AUDIT_FORMAT

    judged: Mapping[str, Any]
    audit_id: str
    rb_version: str
    backend: str
    hermetic: bool | None
    sandboxed: bool | None
    sandbox: str
    started: str
    finished: str
    warnings: tuple[str, ...] = ()
    #: The operator's CPU thread setting for every run (``--threads``); None: not set.
    threads: int | None = None
    #: The hash of the uncommitted changes an ``--allow-dirty`` audit recorded (which no
    #: run included: ``inputs/dirty.json``); None: the tree was clean.
    dirty_tree: str | None = None

    @property
    def tier(self) -> str:
        return str(self.judged.get("tier") or "")

    @property
    def passed(self) -> bool | None:
        value = self.judged.get("passed")
        return value if isinstance(value, bool) else None

    @property
    def verdict(self) -> str:
        """PASS, FAIL, INCOMPLETE, NOT JUDGED; from ``passed`` for a bundle from before
        INCOMPLETE, UNKNOWN when neither says."""
        word = self.judged.get("verdict")
        if word in {"PASS", "FAIL", "INCOMPLETE", "NOT JUDGED"}:
            return str(word)
        return {True: "PASS", False: "FAIL", None: "UNKNOWN"}[self.passed]

    @property
    def incomplete(self) -> tuple[str, ...]:
        value = self.judged.get("incomplete")
        return tuple(str(s) for s in value) if isinstance(value, list) else ()

    @property
    def experiments(self) -> dict[str, ExperimentSummary]:
        """Each experiment's verdicts (RecordError for a malformed one)."""
        raw = self.judged.get("experiments")
        if not isinstance(raw, dict):
            raise RecordError("audit.json.experiments: not an object")
        return {
            str(k): ExperimentSummary.from_json(v, f"audit.json.experiments.{k}")
            for k, v in raw.items()
        }

    @property
    def claims(self) -> list[ClaimResult]:
        """Each claim's result (RecordError for a malformed one)."""
        raw = self.judged.get("claims", [])
        if not isinstance(raw, list):
            raise RecordError("audit.json.claims: not a list")
        return [ClaimResult.from_json(c, f"audit.json.claims[{i}]") for i, c in enumerate(raw)]

    def to_json(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del own["judged"]
        return {**self.judged, "format": self.FORMAT, **jsonable(own)}

    @classmethod
    def from_json(cls, raw: object) -> AuditSummary:
        f = _Fields(raw, "audit.json")
        f.format(cls.FORMAT)
        own = {"format", *(f.name for f in dataclasses.fields(cls))} - {"judged"}
        warnings = f.raw.get("warnings")
        return cls(
            judged={k: v for k, v in f.raw.items() if k not in own},
            audit_id=str(f.raw.get("audit_id") or ""),
            rb_version=str(f.raw.get("rb_version") or ""),
            backend=str(f.raw.get("backend") or ""),
            hermetic=_bool_or_none(f.raw.get("hermetic")),
            sandboxed=_bool_or_none(f.raw.get("sandboxed")),
            sandbox=str(f.raw.get("sandbox") or ""),
            started=str(f.raw.get("started") or ""),
            finished=str(f.raw.get("finished") or ""),
            warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
            threads=f.opt_int("threads"),
            dirty_tree=str(f.raw["dirty_tree"]) if f.raw.get("dirty_tree") else None,
        )
