"""Smaller trust breaks of issue 8 around a run: operator inputs checked before any bundle
exists, the timeout of a TERM-ignoring run named as such, a full disk while a log streams,
and temporary directories a killed auditor left behind."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from reprobridge.audit import auditor
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.errors import AuditError


def _bundles(root: Path) -> list[Path]:
    evidence = root / "repro/evidence"
    return (
        [p for p in evidence.iterdir() if not p.name.startswith(".")] if evidence.is_dir() else []
    )


def test_a_bad_signing_key_is_refused_before_any_run(tiny_repo, tmp_path: Path) -> None:
    root = tiny_repo()
    key = tmp_path / "key.pem"
    key.write_text("not a key\n")
    key.chmod(0o600)
    with pytest.raises(AuditError, match="not a PEM private key"):
        run_audit(root, AuditOptions(runs=1, backend="host", sign_key=key))
    assert _bundles(root) == []  # no sealed, unsigned bundle that --resume would refuse


def test_a_refused_ro_bind_leaves_no_bundle(tiny_repo) -> None:
    root = tiny_repo()
    with pytest.raises(AuditError, match="home directory"):
        run_audit(root, AuditOptions(runs=1, backend="host", extra_ro_binds=(Path.home(),)))
    assert _bundles(root) == []  # nothing unsealed to block rb archive


def test_a_term_ignoring_run_killed_at_its_timeout_is_a_timeout(
    tiny_repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's ``timeout`` KILLs a run that ignores TERM and exits 137; that is the
    timeout, not a "possible OOM"."""
    from reprobridge.artifacts import launchers

    monkeypatch.setattr(launchers, "KILL_AFTER", "1s")
    root = tiny_repo("trap '' TERM; echo acc=0.9; sleep 1000\n", timeout="1s")
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    record = json.loads((result.path / "runs/main/0/status.json").read_text())["record"]
    term = record["termination"]
    assert term["kind"] == "timeout", term
    assert "OOM" not in term["description"]
    assert "OOM" not in result.summary["experiments"]["main"]["procedure"]["reason"]


def test_a_full_disk_while_a_log_streams_is_one_error_and_resumable(
    tiny_repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobridge._proc import monitored
    from reprobridge.evidence.errors import EvidenceError

    root = tiny_repo()
    real = monitored._CappedStream._store

    def full(self: monitored._CappedStream, data: bytes) -> None:
        if data and self.path.name == "stdout.log":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, data)

    monkeypatch.setattr(monitored._CappedStream, "_store", full)
    with pytest.raises(EvidenceError, match="No space left on device") as caught:
        run_audit(root, AuditOptions(runs=1, backend="host"))
    assert "--resume" in (caught.value.hint or "")
    monkeypatch.setattr(monitored._CappedStream, "_store", real)
    result = run_audit(root, AuditOptions(runs=1, backend="host", resume="latest"))
    assert result.passed, json.dumps(result.summary, indent=1)


def test_resume_removes_the_workspaces_a_killed_auditor_left(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9; sleep 30\n", timeout="3s")
    proc = subprocess.Popen(
        [sys.executable, "-m", "reprobridge", "audit", "--runs", "1", "--backend", "host"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        left: list[Path] = []
        while not left and time.monotonic() < deadline:
            time.sleep(0.1)
            for bundle in _bundles(root):
                tag = auditor._tmp_tag(bundle)
                left = list(Path(tempfile.gettempdir()).glob(f"rb-run-{tag}-*/repo"))
        assert left, "the audit never made its workspace"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    workspace = left[0].parent
    assert workspace.is_dir()
    run_audit(root, AuditOptions(runs=1, backend="host", resume="latest"))
    assert not workspace.exists()


FORK_BOMB = """python3 - <<'PY'
import os, time
n = 0
for i in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print("forked=%d" % n)
print("acc=0.9")
PY
"""


def test_a_run_cannot_start_more_processes_than_the_limit(tiny_repo) -> None:
    """The sandbox had no process-count limit: a fork bomb could exhaust the machine."""
    root = tiny_repo(FORK_BOMB)
    result = run_audit(root, AuditOptions(runs=1, backend="host", max_processes=40))
    run = result.path / "runs/main/0"
    forked = int((run / "stdout.log").read_text().split("forked=")[1].split()[0])
    assert forked < 40
    record = json.loads((run / "status.json").read_text())["record"]
    assert record["max_processes"] == 40 and record["process_limit_by"]
