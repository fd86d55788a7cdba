"""The date a repository's environment is resolved as of: the last change to what the
chosen experiments run.

The date bound (``environment.exclude_newer``) and the Python of that date stand for "the
environment the authors last ran this code in". A repository's HEAD can be years younger
than the code a reproduction runs: a textbook's notebooks last edited in 2023 in a
repository whose README changed in 2026, or one chapter's scripts among many. Resolved as
of HEAD, such code meets the libraries of 2026 (NumPy 2.4 no longer converts a 1-element
array to a float, which those notebooks do). So the date is that of the last commit that
changed a file the chosen experiments run — each script or notebook and the repository
modules it imports, transitively — or a file that declares the environment's requirements
or Python version (a requirements file, ``pyproject.toml``, ``setup.py``; not a notebook
that no chosen experiment runs, though its ``pip install`` line is a declaration). A
shell script counts with the Python files its commands name. When that cannot be known
(a Makefile target, a shell command that names no file of the repository such as
``python $SCRIPT``; no commit touches those files), HEAD's date stands, as before.

git runs through :func:`reprobridge.detect.index.last_commit` (the hardened helper: no hooks, the
repository's config neutralised), and every path is passed as a literal pathspec, so a
file name the repository chose is never read as a pattern or an option.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, time

from reprobridge.data import load_packages
from reprobridge.detect.base import DetectContext, Finding
from reprobridge.detect.findings import PythonVersionValue, RequirementValue, of_type
from reprobridge.detect.index import last_commit

__all__ = [
    "CodeDate",
    "EnvironmentDate",
    "WheelFloor",
    "code_date",
    "environment_date",
    "wheel_floor",
]

#: Paths per ``git log`` call (the command line stays well under the kernel's limit).
_CHUNK = 200


def _declares(path: str) -> bool:
    """Whether ``path`` is a file that declares an environment (a requirements file,
    ``pyproject.toml``, ``setup.py``, ``environment.yml``, ``.python-version``...) rather
    than code: a notebook no chosen experiment runs may ``pip install`` something, but its
    edits say nothing of the chosen code's date."""
    name = path.rsplit("/", 1)[-1]
    return name == "setup.py" or not name.endswith((".py", ".ipynb"))


@dataclass(frozen=True)
class CodeDate:
    """The last commit (``commit``, committer time ``stamp``) that changed one of ``files``
    files the chosen experiments run or declare their environment in; HEAD is younger."""

    commit: str
    stamp: int
    files: int


def code_date(
    ctx: DetectContext, by_kind: dict[str, list[Finding]], closure: Collection[str] | None
) -> CodeDate | None:
    """The :class:`CodeDate` of the files the chosen experiments run (``closure``, from
    :func:`reprobridge.recovery.scope.run_closure`), or None when HEAD's date stands: no
    commit (``ctx.index.head`` is None), no closure (no chosen experiment, or one that is
    not a Python script or notebook), no commit touching those files, or that commit is
    HEAD's date (or younger)."""
    head = ctx.index.head
    if head is None or closure is None:
        return None
    files = set(closure)
    declaring = [*of_type(by_kind, RequirementValue), *of_type(by_kind, PythonVersionValue)]
    for f in declaring:
        if isinstance(f.value, RequirementValue) and not f.value.declared:
            continue  # known from an import only: its importers are in the closure or not
        files.update(p for e in f.evidence if _declares(p := e.path) or p in closure)
    files = {p for p in files if ctx.index.get(p) is not None}
    newest: tuple[int, str] | None = None
    ordered = sorted(files)
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start : start + _CHUNK]
        last = last_commit(ctx.index.root, (f":(literal){p}" for p in chunk))
        if last is not None:
            found = (last[1], last[0])
            newest = found if newest is None or found > newest else newest
    if newest is None or newest[0] // 86400 >= head[1] // 86400:
        return None
    return CodeDate(commit=newest[1], stamp=newest[0], files=len(files))


@dataclass(frozen=True)
class WheelFloor:
    """The earliest date a bound may have: a year after ``python`` (the oldest Python rb
    provides) was released (``released``, ``YYYY-MM-DD``), when packages had wheels for it."""

    stamp: int
    python: str
    released: str


def wheel_floor(pythons: list[str]) -> WheelFloor | None:
    """The :class:`WheelFloor` of the oldest of ``pythons`` (``X.Y``, ascending) that
    ``packages.toml``'s ``python_releases`` dates; None when none is dated.

    Code older than that meets, as of its own date, packages with no wheels for any Python
    rb can give it (numpy and matplotlib of 2018-05 have none for 3.7, the oldest): uv
    builds them from source, which fails or outlasts a smoke audit. A year after the oldest
    Python's release its packages have wheels, so the bound is raised to that day (and the
    Python of that date is chosen); the guide says the code is older."""
    released = load_packages()["python_releases"]
    for python in pythons:
        day = released.get(python)
        if day is not None:
            floor = datetime.combine(day.replace(year=day.year + 1), time(), UTC)
            return WheelFloor(int(floor.timestamp()), python, day.isoformat())
    return None


@dataclass(frozen=True)
class EnvironmentDate:
    """The date the environment is resolved as of: ``stamp``, from ``commit``; ``files``
    is None for HEAD's date, else how many files the chosen experiments' date came from
    (:class:`CodeDate`); ``floor`` is set when that commit's own date (``commit_stamp``)
    was older than the :class:`WheelFloor` and the date was raised to it."""

    commit: str
    stamp: int
    commit_stamp: int
    files: int | None = None
    floor: WheelFloor | None = None


def environment_date(
    head: tuple[str, int] | None, code: CodeDate | None, pythons: list[str]
) -> EnvironmentDate | None:
    """The :class:`EnvironmentDate` from the chosen experiments' ``code`` date (else HEAD's,
    ``head``), raised to the :func:`wheel_floor` of ``pythons``; None without a commit."""
    if code is not None:
        commit, stamp, files = code.commit, code.stamp, code.files
    elif head is not None:
        commit, stamp, files = head[0], head[1], None
    else:
        return None
    floor = wheel_floor(pythons)
    if floor is not None and stamp < floor.stamp:
        return EnvironmentDate(commit, floor.stamp, stamp, files, floor)
    return EnvironmentDate(commit, stamp, stamp, files)
