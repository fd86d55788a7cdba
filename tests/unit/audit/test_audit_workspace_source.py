"""Every run's workspace comes from one `git archive` per audit (issue 14: three git starts
per run were a fifth of an audited trivial run's overhead), and is still a fresh copy."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from reprobridge.audit import auditor, workspace
from reprobridge.audit.auditor import AuditOptions, run_audit


def test_one_archive_per_audit_and_each_run_starts_clean(
    tiny_repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = workspace._git_archive

    def counting(root: Path, commit: str) -> bytes:
        calls.append(commit)
        return real(root, commit)

    monkeypatch.setattr(workspace, "_git_archive", counting)
    # Each run changes a committed file of its workspace; the next must not see it.
    root = tiny_repo(
        "cat data.txt; echo changed-by-a-run >> data.txt; echo acc=0.9\n",
        files={"data.txt": "original\n"},
    )
    result = run_audit(root, AuditOptions(runs=3, backend="host"))
    assert result.passed, result.summary
    plan = json.loads((result.path / "plan.json").read_text())
    assert calls == [plan["commit"]]
    for k in range(3):
        run = result.path / f"runs/main/{k}"
        printed = (run / "stdout.log").read_text().splitlines()
        assert "original" in printed and "changed-by-a-run" not in printed
        record = json.loads((run / "status.json").read_text())["record"]
        assert record["workspace"]["commit"] == plan["commit"]
    tag = auditor._tmp_tag(result.path)
    assert list(Path(tempfile.gettempdir()).glob(f"rb-source-{tag}-*")) == []


def test_a_killed_auditors_archive_is_removed_on_resume(tmp_path: Path) -> None:
    bundle = tmp_path / "repro/evidence/20260101T000000Z-abcdef"
    bundle.mkdir(parents=True)
    left = tmp_path / "work" / f"rb-source-{auditor._tmp_tag(bundle)}-x"
    left.mkdir(parents=True)
    (left / "c.tar").write_bytes(b"")
    assert auditor._remove_leftovers(bundle, tmp_path / "work") == [left]
    assert not left.exists()


def test_run_directories_are_removed_in_the_background_and_gone_when_the_audit_returns(
    tiny_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each finished run's temporary directory is removed while the next run goes on
    (issue 14), and the audit waits for the last removal before it returns."""
    real = workspace.shutil.rmtree
    removed: list[Path] = []

    def slow_rmtree(path: Path, *args: Any, **kwargs: Any) -> None:
        if Path(path).name.startswith("rb-run-"):
            time.sleep(0.3)  # still removing when the audit reaches its end
            removed.append(Path(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(workspace.shutil, "rmtree", slow_rmtree)
    root = tiny_repo("echo acc=0.9\n")
    work = tmp_path / "work"
    work.mkdir()
    result = run_audit(root, AuditOptions(runs=2, backend="host", work_root=work))
    assert result.passed, result.summary
    assert len(removed) == 2
    assert list(work.iterdir()) == []


def test_removal_runs_one_at_a_time(tmp_path: Path) -> None:
    removal = workspace.Removal()
    for name in ("a", "b"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "f").write_bytes(b"x")
        removal.remove(tmp_path / name)
    removal.wait()
    assert list(tmp_path.iterdir()) == []
