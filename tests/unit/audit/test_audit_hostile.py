"""A hostile repository against the auditor (reliability.md case 34), with real git.

The repository is untrusted: its ``.git/config`` can name programs (fsmonitor, hooks,
filter and diff drivers) and its tree can hold links out of itself. The auditor's git
calls must run none of those programs, and no link may make it read or write outside the
repository (``repro -> /etc``, a committed ``data -> /etc``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.workspace import overlay_files, prepare_workspace
from reprobridge.errors import AuditError


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True)


def _committed(tiny_repo: Callable[..., Path], files: dict[str, str]) -> Path:
    return tiny_repo(files.pop("run.sh"), files=files, name="hostile")


def test_git_config_programs_never_run(tiny_repo: Callable[..., Path], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    touch = f"touch {marker}"
    root = _committed(
        tiny_repo,
        {
            # export-subst only substitutes placeholders (no program runs): harmless.
            "run.sh": "echo acc=0.9 commit=$Format:%H$\n",
            "notes.txt": "plain text\n",
            ".gitattributes": "run.sh export-subst\n*.txt filter=x diff=x\n",
        },
    )
    # A link out of the tree, committed: the data filter refuses it, the audit goes on.
    (root / "data").symlink_to("/etc")
    _git(root, "add", "data")
    _git(root, "commit", "-qm", "a link out")
    hooks = root / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\n{touch}\n")
        (hooks / hook).chmod(0o755)
    for key, value in {
        "core.fsmonitor": touch,
        "core.hooksPath": str(hooks),
        "core.pager": touch,
        "filter.x.clean": f"{touch}; cat",
        "filter.x.smudge": f"{touch}; cat",
        "filter.x.required": "true",
        "diff.x.textconv": f"{touch}; cat",
        "diff.external": touch,
    }.items():
        _git(root, "config", key, value)
    # An uncommitted change to a filtered file: `git diff` for the fingerprint and for the
    # dirty-tree record (--allow-dirty) reads it.
    (root / "notes.txt").write_text("changed\n")

    result = run_audit(root, AuditOptions(runs=1, backend="host", allow_dirty=True))

    assert not marker.exists(), "a program from .git/config ran"
    assert result.passed, json.dumps(result.summary, indent=1)
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"commit={commit}" in (result.path / "runs/main/0/stdout.log").read_text()
    record = json.loads((result.path / "runs/main/0/status.json").read_text())["record"]
    assert record["workspace"]["skipped"] == {"data": "'data' is a link to an absolute path"}


def test_evidence_is_never_written_through_a_symlinked_repro(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    root = _committed(tiny_repo, {"run.sh": "echo acc=0.9\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "launchers").mkdir()
    (outside / "launchers" / "main.sh").write_text(f"touch {tmp_path / 'ran'}\n")
    (outside / "check.py").write_text("secret = 1\n")
    for target in (Path("/etc"), outside):
        before = sorted(p.name for p in target.iterdir())
        real = root / "repro"
        if not real.is_symlink():
            real.rename(root / "repro.real")
        else:
            real.unlink()
        (root / "repro").symlink_to(target)
        with pytest.raises(AuditError, match="symlink"):
            run_audit(root, AuditOptions(runs=1, backend="host"))
        assert sorted(p.name for p in target.iterdir()) == before
        assert not (tmp_path / "ran").exists()


def test_workspace_overlay_skips_symlinks(tiny_repo: Callable[..., Path], tmp_path: Path) -> None:
    root = _committed(tiny_repo, {"run.sh": "echo acc=0.9\n"})
    outside = tmp_path / "outside"
    (outside / "launchers").mkdir(parents=True)
    (outside / "launchers" / "evil.sh").write_text("echo evil\n")
    (outside / "secret.txt").write_text("secret\n")
    # Links at every level rb's overlay reads: a whole artifact dir, a file, a nested file.
    launchers = root / "repro" / "launchers"
    for p in launchers.iterdir():
        p.unlink()
    launchers.rmdir()
    launchers.symlink_to(outside / "launchers")
    (root / "repro" / "check.py").unlink()
    (root / "repro" / "check.py").symlink_to(outside / "secret.txt")
    (root / "repro" / "python" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "repro" / "python" / "sub").symlink_to(outside)

    listed = overlay_files(root)
    assert not any(
        rel.startswith("repro/launchers") or rel == "repro/check.py" or "leak" in rel
        for rel in listed
    ), listed
    assert not any(rel.startswith("repro/python/sub") for rel in listed)
    info = prepare_workspace(root, tmp_path / "ws")
    for p in (tmp_path / "ws").rglob("*"):
        if p.is_file():
            assert b"secret" not in p.read_bytes() and b"evil" not in p.read_bytes(), p
    assert set(info.overlaid) == set(listed)
