"""What one probe run showed, read from its evidence, and what kind of failure it was.

Contract: :func:`observe` reads a sealed bundle the probe's audit wrote (rb's own, in a
directory rb owns) and returns one :class:`Observation` per run; logs are read from their
tail only (``TAIL_BYTES``), never whole. :func:`classify` is pure: the same observation,
the same :class:`Failure`. Its rules are ordered, most specific first; each names the log
line that decided it, which the repair records as its evidence.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reprobridge._fs import open_regular, read_regular
from reprobridge.constants import COMBINED_LOG
from reprobridge.evidence.records import RunStatus

TAIL_BYTES = 256 * 1024

FailureKind = Literal[
    "ok",
    "no-metric",
    "environment",
    "hardware-missing",
    "dataset-missing",
    "gpu-needed",
    "entry-missing",
    "module-missing",
    "file-missing",
    "flag-rejected",
    "timeout",
    "crashed",
]


@dataclass(frozen=True)
class Observation:
    """One run of the probe: how it ended and what it printed."""

    experiment: str
    #: "ok" (exit 0), "failed" (ran, did not exit 0), "timeout", "not-started".
    outcome: str
    #: Why it did not start (the audit's reason), or the termination's description.
    reason: str
    log: str
    #: Metric name -> value, for the metrics the audit extracted.
    metrics: dict[str, float]
    #: The environment setup's log tail, when the environment failed.
    setup_log: str = ""
    #: Datasets whose check failed before the run (a trial runs anyway): id -> declared path.
    missing_datasets: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Failure:
    """What went wrong (``kind``), the detail a repair needs (``subject``: a path, a
    module, a flag) and the log line that shows it (``line``)."""

    kind: FailureKind
    subject: str = ""
    line: str = ""


def _tail(path: Path) -> str:
    """The last TAIL_BYTES of a regular file; "" for anything else (a FIFO, a link, a
    missing file: :func:`reprobridge._fs.open_regular` never blocks on one)."""
    try:
        fd = open_regular(path)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        fh.seek(max(0, os.fstat(fd).st_size - TAIL_BYTES))
        return fh.read().decode("utf-8", "replace")


def _json(path: Path, empty: object) -> Any:
    """The JSON of a small regular file of the bundle, whole; ``empty`` when it is absent,
    not a regular file or not JSON (a run that could not write it says so elsewhere)."""
    try:
        return json.loads(read_regular(path))
    except (OSError, ValueError):
        return empty


def observe(bundle: Path) -> list[Observation]:
    """Every sealed run of ``bundle`` as an :class:`Observation` (by experiment, then run)."""
    out: list[Observation] = []
    runs = bundle / "runs"
    for exp_dir in sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []:
        for run_dir in sorted(p for p in exp_dir.iterdir() if p.is_dir() and p.name.isdigit()):
            status_file = run_dir / "status.json"
            if not status_file.is_file():
                continue
            record = RunStatus.from_json(_json(status_file, {})).record
            metrics: dict[str, float] = {}
            judged = _json(run_dir / "metrics.json", {})
            judged = judged if isinstance(judged, dict) else {}
            for name, m in (judged.get("metrics") or {}).items():
                if isinstance(m, dict) and isinstance(m.get("value"), int | float):
                    metrics[str(name)] = float(m["value"])
            setup = "\n".join(_tail(p) for p in sorted(run_dir.glob("setup-*.log")))
            checks = _json(run_dir / "datasets.json", [])
            missing = {
                str(c["id"]): str(c.get("path") or "")
                for c in (checks if isinstance(checks, list) else [])
                if isinstance(c, dict) and c.get("ok") is False and "id" in c
            }
            if record.not_started is not None:
                outcome, reason = "not-started", record.not_started.reason
            elif record.termination is None:
                outcome, reason = "failed", "no termination recorded"
            elif record.termination.ok:
                outcome, reason = "ok", record.termination.description
            elif record.termination.kind == "timeout":
                outcome, reason = "timeout", record.termination.description
            else:
                outcome, reason = "failed", record.termination.description
            log = _tail(run_dir / COMBINED_LOG) or (
                _tail(run_dir / "stdout.log") + _tail(run_dir / "stderr.log")
            )
            out.append(
                Observation(
                    record.experiment,
                    outcome,
                    reason,
                    log,
                    metrics,
                    setup_log=setup,
                    missing_datasets=missing,
                )
            )
    return out


# -- classification ------------------------------------------------------------------------

#: What CUDA-only code prints on a machine without a GPU (torch, jax, cupy, TF).
_GPU_SIGNS = re.compile(
    r"Found no NVIDIA driver|Torch not compiled with CUDA enabled|"
    r"No CUDA GPUs are available|no CUDA-capable device is detected|"
    r"CUDA driver version is insufficient|CUDA_ERROR_NO_DEVICE|"
    r"Attempting to deserialize object on a CUDA device|"
    r"libcuda\.so[.0-9]*: cannot open shared object file|"
    r"The NVIDIA driver on your system is too old|cudaGetDeviceCount|"
    r"Unknown backend: 'gpu' requested|RuntimeError: CUDA error",
)
_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'")
_NO_FILE = re.compile(
    r"(?:FileNotFoundError|OSError|IOError): \[Errno 2\] (?:No such file or directory|"
    r"Unable to open file)[^'\"]*['\"]([^'\"]+)['\"]"
)
_OS_NOT_FOUND = re.compile(r"OSError: ([^\s:]+) not found\.")
_CANT_OPEN = re.compile(r"can't open file '([^']+)': \[Errno 2\]")
#: Lines in which uv says why an environment cannot be had.
_UV_VERDICT = re.compile(
    r"no version of|only .+ is available|has no (?:usable )?wheels|not found in the package "
    r"registry|requirements are unsatisfiable|Failed to build|did not finish within"
)
_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: (.+)$", re.MULTILINE)


def _line_of(log: str, match: re.Match[str]) -> str:
    start = log.rfind("\n", 0, match.start()) + 1
    end = log.find("\n", match.end())
    return log[start : end if end >= 0 else len(log)].strip()[:300]


def _last(pattern: re.Pattern[str], log: str) -> re.Match[str] | None:
    matches = list(pattern.finditer(log))
    return matches[-1] if matches else None


def classify(obs: Observation) -> Failure:
    """The failure ``obs`` shows (see the module docstring)."""
    if obs.outcome == "not-started":
        if obs.reason.startswith("hw-unavailable"):
            return Failure("hardware-missing", line=obs.reason[:300])
        if obs.reason.startswith("dataset "):
            return Failure("dataset-missing", line=obs.reason[:300])
        # uv's own verdict, not rb's notes about retrying (gae-pytorch's trial named the
        # retry note and hid `there is no version of torch==0.4.1`).
        lines = [
            ln.strip()
            for ln in f"{obs.setup_log}\n{obs.reason}".splitlines()
            if ln.strip() and not ln.strip().startswith("rb:")
        ]
        told = [ln for ln in lines if _UV_VERDICT.search(ln)]
        return Failure("environment", line=((told or lines) or [obs.reason])[-1][:300])
    if obs.outcome == "ok":
        return Failure("ok" if obs.metrics else "no-metric")
    log = obs.log
    for kind, pattern in (
        ("gpu-needed", _GPU_SIGNS),
        ("entry-missing", _CANT_OPEN),
        ("module-missing", _MODULE),
        ("flag-rejected", _UNRECOGNIZED),
        ("file-missing", _NO_FILE),
        ("file-missing", _OS_NOT_FOUND),
    ):
        m = _last(pattern, log)
        if m is not None:
            subject = m.group(1).strip() if m.groups() else ""
            return Failure(kind, subject, _line_of(log, m))  # type: ignore[arg-type]
    if obs.outcome == "timeout":
        return Failure("timeout", line=obs.reason[:300])
    lines = [ln for ln in log.strip().splitlines() if ln.strip()]
    return Failure("crashed", line=(lines[-1] if lines else obs.reason)[:300])
