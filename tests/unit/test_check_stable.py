"""`rb check` in a reviewer's copy: a clone under another folder name is in sync, and the
project name of a first `rb init` there comes from the remote, not the folder."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

from rbcli import rb


def _commit_all(root: Path) -> None:
    for args in (["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixup-paper"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_check_is_in_sync_in_a_clone_under_another_name(tmp_path: Path) -> None:
    root = tmp_path / "mixup"
    shutil.copytree(EXAMPLE, root)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    _commit_all(root)
    assert rb("init", "--paper", "paper.md", "--no-lock", str(root), cwd=root).returncode == 0
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "rb init")
    clone = tmp_path / "reviewer-copy"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    check = rb("check", str(clone))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "in sync" in check.stdout


def test_a_first_init_in_a_clone_names_the_project_after_the_remote(tmp_path: Path) -> None:
    root = tmp_path / "mixup"
    shutil.copytree(EXAMPLE, root)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    _commit_all(root)
    clone = tmp_path / "some-other-folder"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    assert rb("init", "--no-lock", str(clone)).returncode == 0
    manifest = tomllib.loads((clone / "reprobridge.toml").read_text())
    assert manifest["project"]["name"] == "mixup"
    sources = manifest["derived"]["project.name"]["sources"]
    assert sources == ["the git remote `origin`'s repository name"]
