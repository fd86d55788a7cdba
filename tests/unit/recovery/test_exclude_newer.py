"""Locks are bounded by the repository's date (issue 9, item 7)."""

from __future__ import annotations

import subprocess

from reprobridge.detect.index import RepoIndex
from reprobridge.manifest.notes import RecoveryNotes
from reprobridge.recovery._common import Builder
from reprobridge.recovery.dating import EnvironmentDate, environment_date, wheel_floor
from reprobridge.recovery.environment import merge_exclude_newer, merge_metadata_floors


def test_head_commit_date_is_read_with_the_hardened_git(make_repo) -> None:
    root = make_repo({"train.py": "print(1)\n"})
    # a repository-controlled alias or pager must not matter: config is neutralised
    subprocess.run(["git", "-C", str(root), "config", "core.pager", "false"], check=True)
    index = RepoIndex.from_git(root)
    assert index.head is not None
    commit, stamp = index.head
    assert len(commit) == 40 and stamp == 1700000000  # GIT_COMMITTER_DATE of conftest


def test_repository_without_commits_has_no_head(make_repo) -> None:
    root = make_repo({"train.py": "print(1)\n"}, commit=False)
    assert RepoIndex.from_git(root).head is None


def test_bound_is_the_end_of_the_commit_day_with_provenance() -> None:
    b, notes = Builder(), RecoveryNotes()
    merge_exclude_newer(
        b, EnvironmentDate("a" * 40, 1700000000, 1700000000), notes
    )  # 2023-11-14T22:13:20Z
    assert b.data["environment"]["exclude_newer"] == "2023-11-15T00:00:00Z"
    sources, confidence = b.prov["environment.exclude_newer"]
    assert sources == [
        "git: committer date of HEAD aaaaaaaaaaaa (2023-11-14), end of that day (UTC)"
    ]
    assert confidence == "medium"
    assert "as of 2023-11-14" in notes.decisions[0]


def test_implausible_dates_give_no_bound() -> None:
    for stamp in (0, 4102444800):  # 1970, 2100
        b, notes = Builder(), RecoveryNotes()
        merge_exclude_newer(b, EnvironmentDate("b" * 40, stamp, stamp), notes)
        assert "environment" not in b.data
        assert notes.warnings[0].startswith("HEAD (bbbbbbbbbbbb) has an implausible commit date")
    b = Builder()
    merge_exclude_newer(b, None, RecoveryNotes())
    assert b.data == {}


def test_implausible_code_date_names_the_commit_it_came_from() -> None:
    # The date came from the last change to the chosen code, not HEAD: the warning says so.
    b, notes = Builder(), RecoveryNotes()
    merge_exclude_newer(b, EnvironmentDate("d" * 40, 0, 0, files=3), notes)
    assert "environment" not in b.data
    assert notes.warnings == [
        "the last commit that changed the chosen experiments' code (dddddddddddd) has an "
        "implausible commit date; packages are resolved without a date bound"
    ]


def test_code_older_than_every_python_is_raised_to_the_wheel_floor() -> None:
    # 2018-05-11: numpy and matplotlib of that day have no wheels for Python 3.7, the
    # oldest rb provides; from 2018-12-07 (torch 1.0.0, the last of the five) all have.
    dated = environment_date(("c" * 40, 1526040000), None, ["3.7", "3.8", "3.11"])
    assert dated is not None and dated.floor is not None
    assert dated.commit_stamp == 1526040000 and dated.floor.python == "3.7"
    b, notes = Builder(), RecoveryNotes()
    merge_exclude_newer(b, dated, notes)
    assert b.data["environment"]["exclude_newer"] == "2018-12-08T00:00:00Z"
    (source,) = b.prov["environment.exclude_newer"][0]
    assert "(2018-05-11)" in source and "raised to 2018-12-07" in source
    assert "no wheels for Python 3.7" in source and "torch 1.0.0" in source
    assert "[wheel_floors]" in source
    assert "older than any Python rb provides" in notes.decisions[0]
    # a date after the floor is kept, less the release lag
    kept = environment_date(("d" * 40, 1700000000), None, ["3.7", "3.11"])
    assert kept is not None and kept.floor is None
    assert kept.stamp == 1700000000 - 14 * 86400 and kept.lag_days == 14


def test_the_floor_is_the_day_every_core_package_had_wheels_for_that_python() -> None:
    # The floor is per Python, from [wheel_floors], not a blanket year after its release:
    # for 3.7, 2018-12-07 (torch 1.0.0's wheels), not 2019-06-27.
    floor = wheel_floor(["3.7", "3.8"])
    assert floor is not None and (floor.python, floor.available) == ("3.7", "2018-12-07")
    assert dict(floor.first_wheels) == {
        "matplotlib": "2.2.2",
        "numpy": "1.14.5",
        "pandas": "0.23.2",
        "scipy": "1.1.0",
        "torch": "1.0.0",
    }
    # the oldest Python given that the table dates is the one that counts
    later = wheel_floor(["3.9", "3.11"])
    assert later is not None and (later.python, later.available) == ("3.9", "2020-12-10")
    assert wheel_floor(["2.7"]) is None


def test_the_bound_is_the_code_date_less_the_release_lag() -> None:
    # matplotlib 3.1.0 came out 2019-05-18, three days before this code's last commit
    # (2019-05-21): resolved as of the commit, it is the lock's, though the authors ran
    # an older one. Less the lag, the bound is 2019-05-07, before it.
    dated = environment_date(("e" * 40, 1558440000), None, ["3.7", "3.11"])  # 2019-05-21 12:00
    assert dated is not None and dated.floor is None and dated.lag_days == 14
    b, notes = Builder(), RecoveryNotes()
    merge_exclude_newer(b, dated, notes)
    assert b.data["environment"]["exclude_newer"] == "2019-05-08T00:00:00Z"
    (source,) = b.prov["environment.exclude_newer"][0]
    assert source.startswith("git: committer date of HEAD eeeeeeeeeeee (2019-05-21); less 14 days")
    assert "[date_bound]" in source
    assert (
        "as of 2019-05-07 (the last commit was 2019-05-21; 14 days before it)"
        in (notes.decisions[0])
    )


def test_a_bound_before_a_metadata_floor_constrains_the_package() -> None:
    # pandas 0.18-0.24 declare `pytz (>=2011k)`: uv skips them and, under a 2019-06 bound,
    # resolved pandas 0.11 (2013), which builds from source and failed.
    b, notes = Builder(), RecoveryNotes()
    merge_exclude_newer(b, EnvironmentDate("e" * 40, 1561680000, 1561680000), notes)  # 2019-06-28
    merge_metadata_floors(b, notes)
    assert b.data["environment"]["python_constraints"] == ["pandas>=0.25.0"]
    assert b.data["environment"]["exclude_newer_package"] == {"pandas": "2019-07-25T00:00:00Z"}
    sources, _ = b.prov["environment.python_constraints"]
    assert any("2011k" in s and "[metadata_floors]" in s for s in sources)
    assert any("pandas>=0.25.0" in d for d in notes.decisions)
    # after the floor's release: nothing to add
    later = Builder()
    merge_exclude_newer(later, EnvironmentDate("f" * 40, 1700000000, 1700000000), RecoveryNotes())
    merge_metadata_floors(later, RecoveryNotes())
    assert "python_constraints" not in later.data["environment"]
    # the repository's own lock constrains pandas: left to it
    locked = Builder()
    locked.put("environment.python_constraints", ["pandas==0.23.4"], ["uv.lock"])
    merge_exclude_newer(locked, EnvironmentDate("g" * 40, 1561680000, 1561680000), RecoveryNotes())
    merge_metadata_floors(locked, RecoveryNotes())
    assert locked.data["environment"]["python_constraints"] == ["pandas==0.23.4"]
