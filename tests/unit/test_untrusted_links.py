"""Links the repository plants never take rb outside it (issue 8, smaller breaks).

On the old main: ``rb init --paper paper.pdf`` with ``paper.pdf -> <host file>`` read the
host file as the paper; ``reprobridge.toml -> /elsewhere`` was loaded (and audited) as the
repository's manifest; a ``.git`` *file* (``gitdir: /elsewhere/.git``) made ``rb init``'s
``git add -N`` write another repository's index.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from rbcli import rb

from reprobridge import _proc
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.workspace import head_commit
from reprobridge.errors import AuditError, UnsafePathError
from reprobridge.initializer import init_repository

PAPER = "# A paper\n\n| method | acc |\n|---|---|\n| ours | 91.0 |\n"


def test_paper_symlink_out_of_the_repository_is_refused(make_repo, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.md"
    secret.write_text("# SECRET-HOST-FILE\n")
    root: Path = make_repo({"train.py": "print('acc=0.9')\n"})
    (root / "paper.md").symlink_to(secret)
    (root / "docs").symlink_to(tmp_path)  # a directory link on the way
    for given in ("paper.md", str(root / "paper.md"), "docs/host-secret.md"):
        out = rb("init", "-q", "--paper", given, "--no-lock", str(root), cwd=root)
        assert out.returncode == 4, out.stderr
        [line, hint] = out.stderr.splitlines()
        assert line.startswith("error: ") and "symlink" in line and "out of the repository" in line
        assert hint.startswith("hint: ")
        assert not (root / "reprobridge.toml").exists()
    # The operator's own file outside the repository is still fine.
    (tmp_path / "mine.md").write_text(PAPER)
    init_repository(root, paper=tmp_path / "mine.md", lock="never")


def test_manifest_symlink_is_refused(tiny_repo, tmp_path: Path) -> None:
    root: Path = tiny_repo("echo acc=0.9\n")
    elsewhere = tmp_path / "elsewhere.toml"
    (root / "reprobridge.toml").rename(elsewhere)
    (root / "reprobridge.toml").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="symlink"):
        run_audit(root, AuditOptions(runs=1, backend="host"))
    for verb in (["check"], ["audit", "--runs", "1", "--backend", "host"]):
        out = rb(*verb, cwd=root)
        assert out.returncode == 4, out.stderr
        assert out.stderr.startswith("error: reprobridge.toml: is a symlink")
    assert not (root / "repro" / "evidence").exists() or not any(
        (root / "repro" / "evidence").iterdir()
    )


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def test_git_file_redirecting_to_another_repository(make_repo, tmp_path: Path) -> None:
    victim: Path = make_repo({"victim.txt": "mine\n"})
    index_before = (victim / ".git" / "index").read_bytes()
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / "train.py").write_text("print('acc=0.9')\n")
    (attacker / ".git").write_text(f"gitdir: {victim / '.git'}\n")

    assert _proc.foreign_git_dir(attacker) is not None
    with pytest.raises(UnsafePathError, match="another repository"):
        init_repository(attacker, lock="never")
    with pytest.raises(UnsafePathError, match="never writes to another repository"):
        _proc.git(attacker, "add", "--intent-to-add", "--", "train.py")
    out = rb("init", "-q", "--no-lock", str(attacker), cwd=attacker)
    assert out.returncode == 4 and out.stderr.startswith("error: "), out.stderr
    assert (victim / ".git" / "index").read_bytes() == index_before
    assert _git(victim, "status", "--porcelain") == ""
    assert not (attacker / "reprobridge.toml").exists()


def test_linked_worktrees_and_own_git_dirs_are_fine(make_repo, tmp_path: Path) -> None:
    main: Path = make_repo({"train.py": "print('acc=0.9')\n"})
    assert _proc.foreign_git_dir(main) is None
    linked = tmp_path / "linked"
    _git(main, "worktree", "add", "-q", str(linked))
    assert (linked / ".git").is_file()
    assert _proc.foreign_git_dir(linked) is None
    init_repository(linked, lock="never")
    assert (linked / "reprobridge.toml").is_file()


def test_head_commit_names_the_commit_or_none(make_repo, tmp_path: Path) -> None:
    """One reader of HEAD for the auditor, the archive, the fingerprint and the bench: the
    commit, else None (no commit yet, or no repository at all)."""
    root = make_repo({"train.py": "print(1)\n"})
    expected = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert _proc.head_commit(root) == expected
    empty = make_repo({"train.py": ""}, commit=False)
    assert _proc.head_commit(empty) is None
    with pytest.raises(AuditError, match="no commit to audit"):
        head_commit(empty)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert _proc.head_commit(plain) is None
