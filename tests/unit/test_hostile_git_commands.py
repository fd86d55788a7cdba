"""`rb init`, `rb check` and `rb archive` on a repository whose ``.git/config`` names a
program for every key git may run one from, and whose HEAD carries a signature that
``log.showSignature`` would have ``gpg.program`` check: none of them runs (the
repository arrives with its ``.git``: a tarball, a shared disk)."""

from __future__ import annotations

from pathlib import Path

from hostile_git import arm, ran, traps_are_real
from rbcli import rb

from reprobridge import _proc

SECRET = {"AWS_SECRET_ACCESS_KEY": "s3cr3t-0123456789", "ANTHROPIC_API_KEY": ""}


def test_init_check_and_archive_run_no_program_of_the_repository(make_repo, tmp_path: Path) -> None:
    root = make_repo({"train.py": "print('acc=0.9')\n", "requirements.txt": "numpy\n"})
    proc = rb("init", "--no-lock", "--agent", "static", cwd=root, env=SECRET)
    assert proc.returncode == 0, proc.stderr
    ident = ("-c", "user.name=t", "-c", "user.email=t@example.invalid")
    _proc.git(root, "add", "-A")
    _proc.git(root, *ident, "commit", "-qm", "rb init")
    marks = tmp_path / "marks"
    arm(root, marks)
    traps_are_real(root, marks)
    (root / "train.py").write_text("print('acc=0.8')\n")  # dirty: git reads the work tree

    for args in (
        ("init", "--no-lock", "--agent", "static"),
        ("check",),
        ("archive", "--evidence", "none", "--with-source", "-o", str(tmp_path / "a.tar.gz")),
    ):
        proc = rb(*args, cwd=root, env=SECRET)
        assert proc.returncode == 0, (args, proc.stderr)
        assert ran(marks) == [], (args, ran(marks))
