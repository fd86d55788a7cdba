"""Single writer (case 20) and crash safety at every fault point (case 18), with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from evidence_helpers import AUDIT_ID, build_bundle

from reprobridge.evidence import Bundle, BundleLockedError
from reprobridge.evidence.faults import POINTS

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from reprobridge.evidence import Bundle
    b = Bundle.open(Path(sys.argv[1]))
    with b.lock():
        print("locked", flush=True)
        sys.stdin.read()  # hold until the test closes our stdin
    """
)


def test_second_auditor_fails_fast_while_the_first_is_unaffected(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(bundle.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        second = Bundle.open(bundle.path)
        started = time.monotonic()
        with pytest.raises(BundleLockedError) as info, second.lock():
            pass
        assert time.monotonic() - started < 1.0
        assert info.value.path == str(bundle.path / ".lock")
        assert f"pid {holder.pid}" in str(info.value)
        assert info.value.exit_code == 9
        assert not second.locked
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
        holder.stdout.close()
    with Bundle.open(bundle.path).lock() as b:  # released: a new auditor can take it
        b.journal_append({"event": "resumed"})


def test_lock_dies_with_a_killed_holder(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(bundle.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    with Bundle.open(bundle.path).lock():
        pass


def test_two_bundle_objects_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock(), pytest.raises(BundleLockedError), Bundle.open(bundle.path).lock():
        pass


# A writer that goes through every kind of write; faults pick where it dies. Hits, in order:
#   before_write/after_fsync_before_rename/after_rename: 1 plan.json, 2 e/1 stdout.log,
#   3 e/1 status.json, 4 e/2 stdout.log, 5 e/2 status.json, 6 audit.json
#   mid_journal_append: 1 after e/1, 2 after e/2
WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from reprobridge.evidence import Bundle
    root = Path(sys.argv[1])
    b = Bundle.create(root / "repro" / "evidence", "crash")
    with b.lock():
        b.write_json("plan.json", {"experiments": ["e"], "repeats": 2})
        for k in (1, 2):
            b.run_dir("e", k)
            b.write_bytes(f"runs/e/{k}/stdout.log", f"loss=0.{k}\\n".encode())
            b.seal_run("e", k, {"exit": 0})
            b.journal_append({"event": "run-sealed", "run": f"e/{k}"})
        b.write_json("audit.json", {"verdict": "PASS"})
        b.write_sha256sums()
    print("done")
    """
)


def _write(tmp_path: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RB_TESTING": "1"}
    env.pop("RB_FAULT", None)
    if fault:
        env["RB_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _resume_and_finish(bundle: Bundle) -> None:
    """What `rb audit --resume` does with the store: reuse sealed runs, redo the rest."""
    with bundle.lock():
        bundle.journal_records()
        if not (bundle.path / "plan.json").exists():
            bundle.write_json("plan.json", {"experiments": ["e"], "repeats": 2})
        for k in (1, 2):
            state = bundle.run_state("e", k)
            assert state != "corrupt"
            if state == "sealed":
                continue
            if state == "partial":
                bundle.set_aside_partial("e", k)
            bundle.run_dir("e", k)
            bundle.write_bytes(f"runs/e/{k}/stdout.log", f"loss=0.{k}\n".encode())
            bundle.seal_run("e", k, {"exit": 0})
            bundle.journal_append({"event": "run-sealed", "run": f"e/{k}"})
        bundle.write_json("audit.json", {"verdict": "PASS"})
        bundle.write_sha256sums()


def test_fault_env_is_ignored_without_rb_testing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RB_TESTING"}
    env["RB_FAULT"] = "before_write:1"
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr


def test_killed_before_rename_of_second_write(tmp_path: Path) -> None:
    """The brief's case: RB_FAULT=after_fsync_before_rename:2 (dies writing e/1/stdout.log)."""
    proc = _write(tmp_path, "after_fsync_before_rename:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    bundle = Bundle.open(tmp_path / "repro/evidence/crash")
    assert bundle.read_json("plan.json") == {
        "experiments": ["e"],
        "repeats": 2,
    }  # committed, intact
    run = bundle.path / "runs/e/1"
    assert not (run / "stdout.log").exists()
    temps = [p.name for p in run.iterdir()]
    assert len(temps) == 1 and temps[0].startswith(".stdout.log.") and temps[0].endswith(".tmp")
    assert bundle.run_state("e", 1) == "partial"
    _resume_and_finish(bundle)
    assert bundle.verify_files() == []
    assert any(".partial-" in p.name for p in (bundle.path / "runs/e").iterdir())


@pytest.mark.parametrize("point", sorted(POINTS))
def test_every_fault_point_is_resumable(tmp_path: Path, point: str) -> None:
    n = 2 if point == "mid_journal_append" else 4
    proc = _write(tmp_path, f"{point}:{n}")
    assert proc.returncode == -signal.SIGKILL, (proc.stdout, proc.stderr)
    bundle = Bundle.open(tmp_path / "repro/evidence/crash")
    # Committed state is intact: e/1 was sealed before the crash, whatever the point.
    assert bundle.run_state("e", 1) == "sealed"
    assert bundle.check_run("e", 1) == []
    expected_e2 = {
        "before_write": "partial",  # dir exists, nothing written
        "after_fsync_before_rename": "partial",  # temp file only
        "after_rename": "partial",  # stdout.log written, no status.json
        "mid_journal_append": "sealed",  # died after sealing e/2, mid journal line
    }[point]
    assert bundle.run_state("e", 2) == expected_e2
    journal = (bundle.path / "journal.jsonl").read_bytes()
    if point == "mid_journal_append":
        assert not journal.endswith(b"\n")  # the torn half line is on disk
    _resume_and_finish(bundle)
    records = bundle.journal_records()
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert bundle.verify_files() == []
    # Apart from set-aside dirs, the result equals an uninterrupted run's.
    clean = tmp_path / "clean"
    assert _write(clean, None).returncode == 0
    clean_bundle = Bundle.open(clean / "repro/evidence/crash")
    for rel in (
        "plan.json",
        "audit.json",
        "runs/e/1/status.json",
        "runs/e/2/status.json",
        "runs/e/2/stdout.log",
    ):
        assert (bundle.path / rel).read_bytes() == (clean_bundle.path / rel).read_bytes(), rel
