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

The bound is that date less a release lag (``packages.toml``'s ``[date_bound]``: a release
days old when the authors last changed their code was rarely the one they ran), never
before the wheel floor of the oldest Python rb provides (``[wheel_floors]``: the day PyPI
had wheels for it of numpy, scipy, pandas, matplotlib and torch).

git runs through :func:`reprobridge.detect.index.last_commit` (the hardened helper: no hooks, the
repository's config neutralised), and every path is passed as a literal pathspec, so a
file name the repository chose is never read as a pattern or an option.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from reprobridge.data import load_packages
from reprobridge.detect.base import DetectContext, Finding
from reprobridge.detect.findings import PythonVersionValue, RequirementValue, of_type
from reprobridge.detect.index import last_commit
from reprobridge.recovery.pins import available_pythons, version_key

__all__ = [
    "CodeDate",
    "EnvironmentDate",
    "WheelFloor",
    "code_date",
    "environment_date",
    "python_of_date",
    "release_lag_days",
    "wheel_floor",
    "year_before",
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
    """The earliest date a bound may have: ``stamp``, the first day (``available``,
    ``YYYY-MM-DD``) PyPI had wheels for ``python`` (the oldest Python rb provides) of every
    package of ``first_wheels`` (name, its first release with one), from ``packages.toml``'s
    ``[wheel_floors]``."""

    stamp: int
    python: str
    available: str
    first_wheels: tuple[tuple[str, str], ...]


def wheel_floor(pythons: list[str]) -> WheelFloor | None:
    """The :class:`WheelFloor` of the oldest of ``pythons`` (``X.Y``, ascending) that
    ``packages.toml``'s ``[wheel_floors]`` dates; None when none is dated.

    Code older than that meets, as of its own date, packages with no wheels for any Python
    rb can give it (numpy and matplotlib of 2018-05 have none for 3.7, the oldest): uv
    builds them from source, which fails or outlasts a smoke audit. From the floor's day
    numpy, scipy, pandas, matplotlib and torch all have wheels for that Python, so the bound
    is raised to it (and that Python is chosen); the guide says the code is older."""
    floors = load_packages()["wheel_floors"]
    for python in pythons:
        floor = floors.get(python)
        if floor is not None:
            day = floor["available"]
            return WheelFloor(
                int(datetime.combine(day, time(), UTC).timestamp()),
                python,
                day.isoformat(),
                tuple(sorted(floor["first_wheels"].items())),
            )
    return None


def release_lag_days() -> int:
    """Days between the code's date and its date bound (``packages.toml``'s
    ``[date_bound] lag_days``): a release only days old when the authors last changed their
    code was rarely the one they ran; the table's comment has the measurement."""
    lag: int = load_packages()["date_bound"]["lag_days"]
    return lag


@dataclass(frozen=True)
class EnvironmentDate:
    """The date the environment is resolved as of: ``stamp``, from ``commit``; ``files``
    is None for HEAD's date, else how many files the chosen experiments' date came from
    (:class:`CodeDate`). ``stamp`` is the commit's own date (``commit_stamp``) less
    ``lag_days``; ``floor`` is set when that was older than the :class:`WheelFloor` and the
    date was raised to it."""

    commit: str
    stamp: int
    commit_stamp: int
    files: int | None = None
    floor: WheelFloor | None = None
    lag_days: int = 0

    @property
    def day(self) -> str:
        """``stamp``'s day (UTC), ``2022-01-22``: what the date bound is the end of."""
        return datetime.fromtimestamp(self.stamp, UTC).strftime("%Y-%m-%d")


def environment_date(
    head: tuple[str, int] | None, code: CodeDate | None, pythons: list[str]
) -> EnvironmentDate | None:
    """The :class:`EnvironmentDate` from the chosen experiments' ``code`` date (else HEAD's,
    ``head``), less :func:`release_lag_days`, raised to the :func:`wheel_floor` of
    ``pythons``; None without a commit."""
    if code is not None:
        commit, stamp, files = code.commit, code.stamp, code.files
    elif head is not None:
        commit, stamp, files = head[0], head[1], None
    else:
        return None
    lag = release_lag_days()
    lagged = stamp - lag * 86400
    floor = wheel_floor(pythons)
    if floor is not None and lagged < floor.stamp:
        return EnvironmentDate(commit, floor.stamp, stamp, files, floor, lag)
    return EnvironmentDate(commit, lagged, stamp, files, lag_days=lag)


def year_before(stamp: int) -> date:
    """The UTC day a year (365 days) before ``stamp``."""
    return datetime.fromtimestamp(stamp - 365 * 86400, UTC).date()


def python_of_date(stamp: int | None) -> str | None:
    """The newest Python ``X.Y`` released at least a year before ``stamp`` (the date bound),
    from ``packages.toml``'s ``python_releases``; the oldest Python rb provides for a date
    from its wheel floor on (:func:`wheel_floor`) that is younger than every Python released
    a year before; None without a date or before the table starts."""
    if stamp is None:
        return None

    released = [
        v for v, day in load_packages()["python_releases"].items() if day <= year_before(stamp)
    ]
    newest = max(released, key=version_key) if released else None
    # Between the oldest Python's wheel floor and a year after its release, the packages of
    # the date have wheels for that Python and for no older one rb provides.
    floor = wheel_floor(available_pythons())
    if (
        floor is not None
        and stamp >= floor.stamp
        and (newest is None or version_key(newest) < version_key(floor.python))
    ):
        return floor.python
    return newest
