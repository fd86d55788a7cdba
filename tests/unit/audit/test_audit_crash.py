"""Crash safety of `rb audit` with real processes (reliability.md cases 18 and 21).

Case 18: the auditor runs as a subprocess with ``RB_TESTING=1 RB_FAULT=<point>:<n>`` and
SIGKILLs itself at the n-th hit of an evidence fault point (evidence/faults.py); then
``rb audit --resume`` must complete, runs sealed before the crash must be verified and
reused (the journal says ``run-reused``), runs caught half-way must be set aside as
``<k>.partial-*`` and run again, and ``rb verify`` must pass.

Case 21: a full disk (ENOSPC) during an evidence write stops the audit with one clear
line, the previous files intact and no temp file left, and ``--resume`` completes it.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.evidence.errors import EvidenceError


@pytest.fixture
def tiny(tiny_repo: Callable[..., Path]) -> Path:
    """A committed repository after `rb init` whose one experiment prints ``acc=0.9``."""
    return tiny_repo()


def _rb(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"RB_TESTING", "RB_FAULT"}}
    return subprocess.run(
        [sys.executable, "-m", "reprobridge", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        check=False,
        timeout=300,
    )


def _journal(bundle: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (bundle / "journal.jsonl").read_text().splitlines()]


def _temps(bundle: Path) -> list[str]:
    """Temp files outside set-aside runs (those travel with the partial run, by design)."""
    return [
        p.relative_to(bundle).as_posix()
        for p in bundle.rglob(".*.tmp")
        if not any(".partial-" in part for part in p.relative_to(bundle).parts)
    ]


# Evidence writes of this audit (1 experiment, 2 runs, host backend), in order:
#   1 inputs/reprobridge.toml  2 inputs/flake.lock  3 plan.json  4 environment.json
#   5-7 fingerprint/{host,gpu,git}.json
#   8-12 run 0: datasets, env, packages, metrics, status.json (the seal)
#   13-17 run 1: the same          18 audit.json          19 SHA256SUMS
# Journal appends: 1 started, 2 run 0 started, 3 run 0 sealed, 4-5 run 1, 6 finished.
# Each case: (fault, runs sealed before the crash, run dirs left unsealed by it).
CRASHES = {
    "before_write:1": (0, 0),  # nothing on disk but the bundle dir: restarted
    "before_write:12": (0, 1),  # run 0 complete but for its seal: set aside
    "after_rename:12": (1, 0),  # run 0 sealed, journal not told: reused
    "after_fsync_before_rename:17": (1, 1),  # run 1's seal only as a temp file
    "after_rename:18": (2, 0),  # audit.json written, bundle not sealed
    "mid_journal_append:3": (1, 0),  # torn "run-sealed" after run 0's seal
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(CRASHES))
def test_auditor_killed_at_a_fault_point_resumes(fault: str, tiny: Path) -> None:
    sealed_before, partial_before = CRASHES[fault]
    crashed = _rb(
        tiny,
        "audit",
        "--runs",
        "2",
        "--backend",
        "host",
        "-q",
        env={"RB_TESTING": "1", "RB_FAULT": fault},
    )
    assert crashed.returncode == -9, (fault, crashed.returncode, crashed.stderr)
    (bundle,) = (tiny / "repro/evidence").iterdir()
    runs = sorted((bundle / "runs/main").iterdir()) if (bundle / "runs/main").is_dir() else []
    sealed = {d.name for d in runs if (d / "status.json").is_file()}
    partial = {d.name for d in runs if not (d / "status.json").is_file()}
    assert (len(sealed), len(partial)) == (sealed_before, partial_before), (sealed, partial)

    # --runs 2 matters only when the crash came before plan.json (the plan is then unknown).
    out = _rb(tiny, "audit", "--resume", "--backend", "host", "--json", "--runs", "2")
    assert out.returncode == 0, out.stdout + out.stderr  # the verdict's reasons are in stdout
    doc = json.loads(out.stdout)
    assert doc["passed"] is True and Path(doc["path"]) == bundle
    assert doc["experiments"]["main"]["per_metric"]["acc"]["stats"]["n"] == 2

    events = _journal(bundle)
    reused = {e["run"] for e in events if e["event"] == "run-reused"}
    assert reused == {f"main/{k}" for k in sealed}
    set_aside = {e["run"] for e in events if e["event"] == "set-aside-partial"}
    assert set_aside == {f"main/{k}" for k in partial}
    for k in partial:
        assert list((bundle / "runs/main").glob(f"{k}.partial-*")), k
    assert events[-1]["event"] == "finished" and events[-1]["passed"] is True
    assert (bundle / "SHA256SUMS").is_file()
    assert _temps(bundle) == []
    report = verify_audit(bundle)
    assert report.ok, report.problems
    assert report.passed is True


def test_resume_of_a_sealed_audit_says_there_is_nothing_to_resume(tiny: Path) -> None:
    result = run_audit(tiny, AuditOptions(runs=1, backend="host"))
    out = _rb(tiny, "audit", "--resume", result.audit_id, "--backend", "host")
    assert out.returncode == 9, out.stderr
    assert "is finished (sealed); there is nothing to resume" in out.stderr
    latest = _rb(tiny, "audit", "--resume", "--backend", "host")
    assert latest.returncode == 9
    assert "no unfinished audit to resume" in latest.stderr


@pytest.mark.parametrize("nth", [1, 12])
def test_disk_full_during_an_evidence_write(
    nth: int, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC from the n-th low-level write of an evidence file (the ``write`` of the temp
    file inside ``_fs.write_atomic``; 1 = inputs/reprobridge.toml, 12 = run 0's
    status.json): the audit stops with an EvidenceError naming the file, files
    written before are intact, no temp file is left, and ``--resume`` completes."""
    real_fdopen = os.fdopen
    writes = {"n": 0}

    class FullDisk:
        """The file object write_atomic writes through, failing at the nth write."""

        def __init__(self, fh: Any) -> None:
            self._fh = fh

        def write(self, data: bytes) -> int:
            writes["n"] += 1
            if writes["n"] == nth:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return int(self._fh.write(data))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._fh, name)

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self._fh.close()

    def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        fh = real_fdopen(fd, *args, **kwargs)
        # The lock's owner note is best effort (its failure is ignored): not evidence.
        # Nor is the operator's record that it started the bundle (in XDG_STATE_HOME).
        opened = Path(f"/proc/self/fd/{fd}").readlink()
        if ".lock.owner." in opened.name or opened.is_relative_to(os.environ["XDG_STATE_HOME"]):
            return fh
        return FullDisk(fh)

    # _fs.write_atomic calls os.fdopen through the os module: patch it there (restored by
    # monkeypatch.undo before the resume).
    monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(EvidenceError) as caught:
        run_audit(tiny, AuditOptions(runs=2, backend="host"))
    monkeypatch.undo()
    err = caught.value
    assert "could not write evidence (No space left on device)" in str(err)
    assert "the previous file is intact" in str(err)
    assert "\n" not in str(err) and err.hint and "--resume" in err.hint
    assert err.exit_status() == 9
    (bundle,) = (tiny / "repro/evidence").iterdir()
    assert list(bundle.rglob(".*.tmp")) == []
    before = {
        p.relative_to(bundle).as_posix(): p.read_bytes()
        for p in bundle.rglob("*")
        if p.is_file() and not p.name.startswith(".lock")
    }
    for rel, data in before.items():
        if rel.endswith(".json"):
            json.loads(data)  # whole, not torn
    sealed = {p.parent.name for p in bundle.glob("runs/main/*/status.json")}
    assert len(sealed) == (1 if nth > 12 else 0)

    result = run_audit(tiny, AuditOptions(resume="latest", backend="host", runs=2))
    assert result.passed and result.path == bundle
    for rel, data in before.items():
        # What was committed before the failure is kept as it was: inputs, the plan and the
        # journal's earlier lines (the journal only grows).
        if rel.startswith("inputs/") or rel == "plan.json":
            assert (bundle / rel).read_bytes() == data, rel
        if rel == "journal.jsonl":
            assert (bundle / rel).read_bytes().startswith(data)
    assert _temps(bundle) == []
    assert verify_audit(bundle).ok
