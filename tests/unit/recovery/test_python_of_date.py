"""The Python version follows the repository's date when nothing pins it (issue 9, item 7).

A repository last changed in November 2022 is resolved with packages of that date (uv's
exclude-newer): torch 1.13 then had no wheels for Python 3.11, released a month earlier.
rb init picks the newest Python released at least a year before the last commit.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.recovery.merge import merge_findings

TRAIN = "import torch\n\nif __name__ == '__main__':\n    print(torch.zeros(1))\n"


def _dated(make_repo, day: str, files: dict[str, str]) -> Path:
    root = make_repo(files)
    env = {**os.environ, "GIT_COMMITTER_DATE": f"{day}T12:00:00Z"}
    subprocess.run(
        ["git", "-C", str(root), "commit", "-q", "--amend", "--no-edit", "--date", day],
        check=True,
        env=env,
    )
    return root


def _python(root: Path) -> str:
    return merge_findings(
        detect_repo(RepoIndex.from_git(root)), repo_name="r"
    ).manifest.environment.python


@pytest.mark.parametrize(
    ("day", "python"),
    # 2018-05: older than any Python rb provides (3.7's packages of that date have no
    # wheels for it): the date is raised to 3.7's wheel floor (2018-12-07), so 3.7.
    # 2019-03: less than a year after 3.7's release, but after its wheel floor: 3.7 (the
    # year rule alone names 3.6, which rb does not provide, and the default would win).
    [
        ("2022-11-21", "3.10"),
        ("2020-06-01", "3.7"),
        ("2026-11-01", "3.11"),
        ("2018-05-11", "3.7"),
        ("2019-03-15", "3.7"),
    ],
)
def test_the_python_is_the_newest_released_a_year_before_the_last_commit(
    make_repo, day: str, python: str
) -> None:
    root = _dated(make_repo, day, {"train.py": TRAIN, "requirements.txt": "torch\n"})
    assert _python(root) == python


def test_a_declared_python_wins_over_the_date(make_repo) -> None:
    root = _dated(
        make_repo,
        "2022-11-21",
        {"train.py": TRAIN, "requirements.txt": "torch\n", ".python-version": "3.11\n"},
    )
    assert _python(root) == "3.11"
