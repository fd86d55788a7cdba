"""One real evidence bundle per test session (the bundled example, 2 runs, host backend),
and a second audit after a threshold change (for `--compare`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from example_outcome import assert_example_judged
from report_helpers import Audits

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository

_GIT = ["-c", "user.name=Test", "-c", "user.email=test@example.org", "-c", "commit.gpgsign=false"]


def _commit(root: Path, message: str) -> None:
    # The evidence stays the operator's own: a committed bundle is foreign (provenance).
    subprocess.run(
        ["git", *_GIT, "-C", str(root), "add", "-A", "--", ".", ":!repro/evidence"], check=True
    )
    subprocess.run(["git", *_GIT, "-C", str(root), "commit", "-q", "-m", message], check=True)


@pytest.fixture(scope="session")
def audits(tmp_path_factory: pytest.TempPathFactory) -> Audits:
    repo = copy_example(tmp_path_factory.mktemp("report") / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    _commit(repo, "rb init")
    first = run_audit(repo, AuditOptions(runs=2, backend="host"))
    # Every level passes; the claim holds on two seeds' means, not significantly.
    assert_example_judged(first.summary)
    manifest = repo / "reprobridge.toml"
    text = manifest.read_text()
    # baseline's test_accuracy band shrinks to nothing: its metric level fails in audit B.
    assert "target = 0.79\ntolerance = 0.171\n" in text
    manifest.write_text(
        text.replace("target = 0.79\ntolerance = 0.171\n", "target = 0.79\ntolerance = 0.0001\n")
    )
    _commit(repo, "tighter threshold")
    second = run_audit(repo, AuditOptions(runs=2, backend="host"))
    assert not second.passed
    return Audits(repo, first.path, second.path)


@pytest.fixture
def bundle_copy(audits: Audits, tmp_path: Path) -> Path:
    """A writable copy of audit A's bundle (for hostile edits)."""
    dest = tmp_path / audits.first.name
    shutil.copytree(audits.first, dest)
    return dest
