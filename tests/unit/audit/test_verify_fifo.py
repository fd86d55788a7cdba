"""`rb verify` never blocks on a file of the bundle: a FIFO in place of a run's log, its
``status.json`` or ``audit.json`` is one finding naming the file (opening a FIFO for reading
waits for a writer, and a bundle has none). Each case runs the real `rb verify` under a
timeout, so a hang fails the test instead of blocking the suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.constants import COMBINED_LOG

#: Seconds `rb verify` of a two-file bundle may take; far above its real time (< 5 s).
_LIMIT = 30


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sealed, verifiable audit of one run (made once; each case edits a copy)."""
    return Path(tmp_path_factory.mktemp("fifo") / "bundle")


@pytest.mark.parametrize(
    "target", [f"runs/main/0/{COMBINED_LOG}", "runs/main/0/status.json", "audit.json"]
)
def test_a_fifo_in_the_bundle_is_a_one_line_finding_never_a_hang(
    tiny_repo: Callable[..., Path], sealed: Path, tmp_path: Path, target: str
) -> None:
    if not sealed.exists():
        made = run_audit(tiny_repo("echo acc=0.9\n"), AuditOptions(runs=1, backend="host")).path
        shutil.copytree(made, sealed, symlinks=True)
    bundle = tmp_path / sealed.name
    shutil.copytree(sealed, bundle, symlinks=True)
    for d in (bundle / target).parents:
        if d == bundle.parent:
            break
        os.chmod(d, 0o755)  # sealed runs are read-only
    (bundle / target).unlink()
    os.mkfifo(bundle / target)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "reprobridge", "verify", str(bundle)],
            capture_output=True,
            text=True,
            timeout=_LIMIT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"rb verify blocked on a FIFO at {target}")
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    named = [line for line in (done.stdout + done.stderr).splitlines() if target in line]
    assert named, (done.stdout, done.stderr)
    assert any("not a regular file" in line for line in named), named
