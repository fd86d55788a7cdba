"""Every run's workspace comes from one `git archive` per audit (issue 14: three git starts
per run were a fifth of an audited trivial run's overhead), and is still a fresh copy."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

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
