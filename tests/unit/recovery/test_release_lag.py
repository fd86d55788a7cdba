"""The date bound lags the code's date, and its floor is per Python (issue 9).

The fixture's plot calls ``set_aspect`` on 3-D axes, which matplotlib 3.0 accepted and
3.1.0 (2019-05-18) refuses. Committed 2019-05-21, three days after that release, the code
was written against an older matplotlib; rb resolved it as of 2019-06-27 anyway (a blanket
wheel floor a year after Python 3.7's release), so the lock held 3.1. Now the bound is the
code's date less the release lag (2019-05-07), above 3.7's wheel floor (2018-12-07).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.recovery.merge import merge_findings

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/repos/zero-release-days-old"


def _committed(tmp_path: Path, day: str) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    (root / "expected.toml").unlink(missing_ok=True)
    env = {**os.environ, "GIT_AUTHOR_DATE": f"{day}T12:00:00Z"}
    env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "flows"], check=True, env=env)
    return root


def test_a_release_days_old_at_the_code_date_is_not_locked(tmp_path: Path) -> None:
    merged = merge_findings(
        detect_repo(RepoIndex.from_git(_committed(tmp_path, "2019-05-21"))), repo_name="flows"
    )
    env = merged.manifest.environment
    # before matplotlib 3.1.0's upload (2019-05-18), not 2019-06-28
    assert env.exclude_newer == "2019-05-08T00:00:00Z"
    # Python 3.7 was released less than a year before, but its packages had wheels from
    # 2018-12-07 on: 3.7, not the default Python
    assert env.python == "3.7"
    (why,) = merged.manifest.derived["environment.python"].sources
    assert why == (
        "git: packages as of 2019-05-07; Python 3.7 is the oldest rb provides, and they have "
        "wheels for it (data/packages.toml [wheel_floors])"
    )
    assert any("as of 2019-05-07" in d and "14 days before" in d for d in merged.notes.decisions)


def test_code_older_than_the_floor_is_raised_to_it(tmp_path: Path) -> None:
    merged = merge_findings(
        detect_repo(RepoIndex.from_git(_committed(tmp_path, "2018-09-03"))), repo_name="flows"
    )
    env = merged.manifest.environment
    assert (env.exclude_newer, env.python) == ("2018-12-08T00:00:00Z", "3.7")


@pytest.mark.parametrize(("committed", "added"), [("2023-06-01", True), ("2019-06-01", False)])
def test_a_call_implied_requirement_waits_for_the_release_that_needs_it(
    make_repo, monkeypatch: pytest.MonkeyPatch, committed: str, added: bool
) -> None:
    """gym draws with pygame from 0.22.0 (2022-02-18): code of 2023 that calls
    `env.render()` gets pygame; code of 2019 locks a gym that draws with pyglet, and an old
    pygame may have no wheel for its Python (MorvanZhou/PyTorch-Tutorial: the build of
    pygame failed the whole environment), so it does not."""
    monkeypatch.setenv("GIT_COMMITTER_DATE", f"{committed}T12:00:00Z")
    monkeypatch.setenv("GIT_AUTHOR_DATE", f"{committed}T12:00:00Z")
    render = "import gym\nenv = gym.make('CartPole-v1')\nenv.reset()\nenv.render()\n"
    root = make_repo({"requirements.txt": "gym\n", "train.py": render})
    merged = merge_findings(detect_repo(RepoIndex.from_git(root)), repo_name="rl")
    requirements = merged.manifest.environment.python_requirements
    assert ("pygame" in requirements) is added, requirements
    said = "pygame added" if added else "pygame not added for gym's .render() (train.py:4)"
    assert any(d.startswith(said) for d in merged.notes.decisions), merged.notes.decisions
    assert not any("pygame" in f for f in merged.notes.flagged_imports)
