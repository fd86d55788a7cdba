"""Merge rules for the environment: requirements, Python, CUDA, compilers, system libraries
and the nixpkgs pin (rules stated in :mod:`reprobridge.recovery.merge`)."""

from __future__ import annotations

import re
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from reprobridge.data import load_packages
from reprobridge.detect._pkgmap import RENAMED_REQUIREMENTS
from reprobridge.detect.base import Finding
from reprobridge.detect.findings import (
    CompilerValue,
    CudaValue,
    IndexValue,
    NvccValue,
    OptionalImportValue,
    PinValue,
    PythonVersionValue,
    RequirementValue,
    SystemLibraryValue,
    of_type,
)
from reprobridge.detect.index import RepoIndex
from reprobridge.errors import RenderError
from reprobridge.manifest.notes import Conflict, RecoveryNotes
from reprobridge.manifest.schema import NIX_ATTR_PATTERN
from reprobridge.recovery import pins
from reprobridge.recovery._common import Builder, best
from reprobridge.recovery.dating import EnvironmentDate, python_of_date, year_before
from reprobridge.recovery.gpuneed import GpuNeed
from reprobridge.recovery.pins import version_key

_REQ_PRIORITY = {
    "requirements": 0,
    "pyproject": 1,
    "setupcfg": 2,
    "setuppy": 3,
    "pipfile": 4,
    "lockfiles": 4,
    "conda": 5,
    "imports": 6,
}
_EXACT_PY_PRIORITY = {"pyversion": 0, "conda": 1, "pipfile": 2, "lockfiles": 2, "pyproject": 3}
_FRAMEWORK_MAX_PY = {
    "torch": [("1.11", "3.10"), ("1.13", "3.10"), ("2.1", "3.11"), ("2.4", "3.12"), ("9", "3.13")],
    "tensorflow": [("2.11", "3.10"), ("2.15", "3.11"), ("9", "3.12")],
}
DEFAULT_PYTHON = "3.11"
PYTHON_CAP = "3.12"


def merge_requirements(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    notes: RecoveryNotes,
    dated: EnvironmentDate | None = None,
) -> dict[str, Requirement]:
    """One requirement per distribution (the more specific file wins; undeclared imports
    flagged); returns them by name. A requirement a call needs only from a release after
    ``dated`` (``RequirementValue.since``) is left out, and the decisions say why."""
    groups: dict[str, list[Finding[RequirementValue]]] = defaultdict(list)
    day = dated.day if dated else None
    for f in of_type(by_kind, RequirementValue):
        if day is not None and f.value.since and day < f.value.since:
            notes.decisions.append(
                f"{f.key} not added for {f.value.called} ({f.sources()[0]}): only releases "
                f"from {f.value.since} on need it, after the date bound ({day})"
            )
            continue
        key = canonicalize_name(f.key)
        groups[RENAMED_REQUIREMENTS.get(key, key)].append(f)
    chosen: dict[str, Requirement] = {}
    for name in sorted(groups):
        ranked = best(groups[name], _REQ_PRIORITY)
        # The real name before a placeholder's, then the more specific file.
        ranked.sort(
            key=lambda f: (
                canonicalize_name(f.key) != name,
                _REQ_PRIORITY.get(f.detector, 99),
                f.sources(),
            )
        )
        top = ranked[0]
        try:
            req = Requirement(top.value.requirement)
        except InvalidRequirement:
            notes.warnings.append(
                f"{top.sources()[0]}: ignored invalid requirement {top.value.requirement!r}"
            )
            continue
        if canonicalize_name(req.name) != name:
            notes.warnings.append(
                f"{top.sources()[0]}: {req.name} is a placeholder on PyPI; "
                f"using {name} instead (without the placeholder's version specifier)"
            )
            req = _renamed(req, name)
        chosen[name] = req
        specs = {f.value.requirement for f in ranked}
        if len(specs) > 1:
            others = [
                f"{f.value.requirement} ({', '.join(f.sources())})"
                for f in ranked[1:]
                if f.value.requirement != top.value.requirement
            ]
            notes.conflicts.append(
                Conflict(
                    f"environment.python_requirements[{name}]",
                    f"{top.value.requirement} ({', '.join(top.sources())})",
                    others,
                    "the more specific dependency file wins",
                )
            )
        if top.value.called:
            notes.decisions.append(
                f"{name} added: {top.value.called} at {top.sources()[0]} needs it "
                "(data/packages.toml [calls])"
            )
        elif not top.value.declared:
            notes.flagged_imports.append(
                f"{name} (imported at {top.sources()[0]}, declared nowhere)"
            )
    lock_sources = _apply_pins(b, of_type(by_kind, PinValue), chosen, notes)
    if chosen:
        sources = sorted({s for g in groups.values() for f in g for s in f.sources()})
        sources += lock_sources
        conf = "medium" if notes.flagged_imports else "high"
        b.put(
            "environment.python_requirements",
            [str(chosen[n]) for n in sorted(chosen)],
            sources,
            conf,
        )
    indexes = sorted({f.value.url for f in of_type(by_kind, IndexValue)})
    if indexes:
        b.put(
            "environment.python_indexes",
            indexes,
            [s for f in of_type(by_kind, IndexValue) for s in f.sources()],
        )
    return chosen


def merge_optional_imports(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    requirements: dict[str, Requirement],
    notes: RecoveryNotes,
) -> None:
    """``environment.optional_requirements``: distributions imported only under a guard
    that falls back when the import fails (``optional_import`` findings), that no
    requirement names. Not installed: a guarded import of a package that builds for
    minutes (an sdist compiled against torch) must not block an environment whose code
    runs without it. The guards are the provenance."""
    optional = {
        canonicalize_name(f.key): f
        for f in of_type(by_kind, OptionalImportValue)
        if canonicalize_name(f.key) not in requirements
    }
    if not optional:
        return
    names = sorted(optional)
    b.put(
        "environment.optional_requirements",
        names,
        [s for n in names for s in optional[n].sources()],
        "medium",
    )
    notes.decisions.append(
        "not installed, imported only inside a try that falls back when the import fails: "
        + "; ".join(f"{n} ({', '.join(optional[n].sources())})" for n in names)
        + "; add one to environment.python_requirements to use what needs it"
    )


def _renamed(req: Requirement, name: str) -> Requirement:
    """``req`` for distribution ``name``: its extras and markers kept, its versions (and
    URL) dropped, since they were the placeholder's."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f"; {req.marker}" if req.marker else ""
    return Requirement(f"{name}{extras}{marker}")


#: What the way rb runs an experiment needs in the environment, by a word among the
#: command's first few (``jupyter``, ``python -m nbconvert``): notebooks run headless as
#: ``jupyter nbconvert --execute`` (nbconvert brings the ``jupyter`` command, ipykernel the
#: ``python3`` kernel that executes the cells), or with papermill.
RUN_TOOLING: dict[str, tuple[str, ...]] = {
    "jupyter": ("nbconvert", "ipykernel"),
    "nbconvert": ("nbconvert", "ipykernel"),
    "papermill": ("papermill", "ipykernel"),
}


def add_run_tooling(b: Builder, notes: RecoveryNotes) -> None:
    """Add the packages rb's run commands need (:data:`RUN_TOOLING`) to
    ``environment.python_requirements``, with the experiments that need them as provenance."""
    experiments = b.data.get("experiments", {})
    needed: dict[str, list[str]] = {}
    for exp_id in sorted(experiments):
        words = str(experiments[exp_id].get("command", "")).split()[:4]
        for dist in dict.fromkeys(d for w in words for d in RUN_TOOLING.get(w, ())):
            needed.setdefault(dist, []).append(exp_id)
    if not needed:
        return
    current = list(b.data.get("environment", {}).get("python_requirements", []))
    have = {canonicalize_name(Requirement(r).name) for r in current}
    added = [d for d in sorted(needed) if d not in have]
    if not added:
        return
    sources, confidence = b.prov.get("environment.python_requirements", ([], "high"))
    why = [
        f"rb run tooling: {d} for experiment(s) {', '.join(needed[d])} (how notebooks run)"
        for d in added
    ]
    b.put(
        "environment.python_requirements",
        sorted([*current, *added], key=lambda r: canonicalize_name(Requirement(r).name)),
        [*sources, *why],
        confidence,
    )
    notes.decisions.append(
        f"added {', '.join(added)} to the environment: the notebook experiments run headless "
        "(`jupyter nbconvert --execute`), which needs them"
    )


#: Commit dates before this are not believed (PyPI had few uploads with times then); a
#: bound that early would only make the resolution fail.
_EARLIEST_BOUND = 1262304000  # 2010-01-01


def merge_exclude_newer(b: Builder, dated: EnvironmentDate | None, notes: RecoveryNotes) -> None:
    """``environment.exclude_newer``: the end (UTC) of the day of ``dated`` (see
    :mod:`reprobridge.recovery.dating`: the last commit that changed what the chosen
    experiments run, else HEAD's, less the release lag, raised to the wheel floor), so the
    lock resolves the versions the authors had when they last changed the code (a 2022
    repository does not get a 2025 torch, nor one released days before its last commit).
    Nothing without a commit."""
    if dated is None:
        return
    commit, stamp = dated.commit, dated.stamp
    if dated.commit_stamp < _EARLIEST_BOUND or stamp > time.time() + 86400:
        # Name the commit the date came from: HEAD, or the last change to the chosen code.
        which = (
            f"HEAD ({commit[:12]})"
            if dated.files is None
            else f"the last commit that changed the chosen experiments' code ({commit[:12]})"
        )
        notes.warnings.append(
            f"{which} has an implausible commit date; packages are resolved without a date bound"
        )
        return
    day_end = (stamp // 86400 + 1) * 86400
    bound = datetime.fromtimestamp(day_end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    day = dated.day
    own = datetime.fromtimestamp(dated.commit_stamp, UTC).strftime("%Y-%m-%d")
    if dated.files is None:
        source = f"git: committer date of HEAD {commit[:12]} ({own})"
        what = "the last commit"
    else:
        source = (
            f"git: committer date of {commit[:12]} ({own}), the last commit that changed one "
            f"of the {dated.files} files the chosen experiments run or declare their "
            "environment in (later commits change other files)"
        )
        what = "the last change to the chosen experiments' code and requirements"
    if dated.lag_days:
        source += (
            f"; less {dated.lag_days} days: a release younger than that at the code's date "
            "was rarely the authors' (data/packages.toml [date_bound])"
        )
        what += f" was {own}; {dated.lag_days} days before it"
    elif dated.floor is not None:
        what += f" was {own}"
    if dated.floor is not None:
        floor = dated.floor
        wheels = ", ".join(f"{n} {v}" for n, v in floor.first_wheels)
        source += (
            f"; raised to {day}: packages older than that have no wheels for Python "
            f"{floor.python}, the oldest rb provides; from {floor.available} they do "
            f"({wheels}: data/packages.toml [wheel_floors])"
        )
        what += f", older than any Python rb provides: raised to {day}"
    b.put("environment.exclude_newer", bound, [source + ", end of that day (UTC)"], "medium")
    notes.decisions.append(
        f"Python packages are resolved as of {day} ({what}): uv's exclude-newer = "
        f"{bound}; edit environment.exclude_newer to move it"
    )


def merge_metadata_floors(b: Builder, notes: RecoveryNotes) -> None:
    """For each package of ``packages.toml``'s ``[metadata_floors]`` whose first release
    uv can read came after the date bound: ``environment.python_constraints`` +=
    ``NAME>=VERSION`` and ``environment.exclude_newer_package[NAME]`` = the day PyPI had
    it. uv skips releases whose metadata it cannot parse, and under such a bound would
    resolve an ancient release that builds from source. A package the repository's own lock
    constrains is left to it. Nothing without a date bound."""
    env = b.data.get("environment", {})
    bound = env.get("exclude_newer")
    if not bound:
        return
    constraints: list[str] = list(env.get("python_constraints", []))
    constrained = {canonicalize_name(Requirement(c).name) for c in constraints}
    floors = load_packages().get("metadata_floors", {})
    added = [
        name
        for name, floor in sorted(floors.items())
        if canonicalize_name(name) not in constrained
        and bound[:10] < floor["available"].isoformat()
    ]
    if not added:
        return
    sources, confidence = b.prov.get("environment.python_constraints", ([], "medium"))
    why = [f"rb rule: {floors[n]['why']} (data/packages.toml [metadata_floors])" for n in added]
    b.put(
        "environment.python_constraints",
        [*constraints, *(f"{n}>={floors[n]['version']}" for n in added)],
        [*sources, *why],
        confidence,
    )
    for name, reason in zip(added, why, strict=True):
        b.put(
            f"environment.exclude_newer_package.{canonicalize_name(name)}",
            f"{floors[name]['available'].isoformat()}T00:00:00Z",
            [reason],
            "medium",
        )
    notes.decisions.append(
        "constrained "
        + ", ".join(f"{n}>={floors[n]['version']}" for n in added)
        + f" and moved its date bound to when PyPI had that release: under {bound[:10]} uv "
        "cannot read the metadata of the releases before, and would resolve an ancient one "
        "that builds from source"
    )


def _apply_pins(
    b: Builder,
    pins_found: list[Finding[PinValue]],
    chosen: dict[str, Requirement],
    notes: RecoveryNotes,
) -> list[str]:
    """The committed lock's versions: each requirement it locks is pinned to the locked
    version (extras and markers kept) unless the requirement excludes it (a conflict, kept);
    the other locked packages become ``environment.python_constraints``. Returns the lock
    evidence for the requirements' provenance."""
    if not pins_found:
        return []
    by_name = {f.key: f for f in sorted(pins_found, key=lambda f: f.sources())}
    used: list[str] = []
    for name, req in sorted(chosen.items()):
        pin = by_name.get(name)
        if pin is None:
            continue
        version = pin.value.version
        if req.url or not req.specifier.contains(version, prereleases=True):
            notes.conflicts.append(
                Conflict(
                    f"environment.python_requirements[{name}]",
                    str(req),
                    [f"{name}=={version} ({', '.join(pin.sources())})"],
                    "the declared requirement excludes the locked version; kept the declaration",
                )
            )
            continue
        pinned = Requirement(str(req))
        pinned.specifier = SpecifierSet(f"=={version}")
        chosen[name] = pinned
        used += pin.sources()
    constraints = [
        f"{name}=={by_name[name].value.version}" for name in sorted(by_name) if name not in chosen
    ]
    locks = sorted({f.value.lock for f in pins_found})
    if constraints:
        b.put(
            "environment.python_constraints",
            constraints,
            [f"{lock} (the repository's lock)" for lock in locks],
        )
    notes.decisions.append(
        f"the repository's own lock ({', '.join(locks)}) is the authors' environment: "
        f"{len(used)} requirement(s) pinned to its versions, {len(constraints)} more locked "
        "package(s) kept as constraints"
    )
    return sorted(set(used))


#: Files that declare the repository as an installable project.
_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def merge_pythonpath(b: Builder, index: RepoIndex, notes: RecoveryNotes) -> None:
    """``environment.pythonpath``: where the repository's own package imports from, so an
    experiment whose workdir is ``examples/`` can still ``import mypkg``.

    ``src`` for a src layout, the root when it holds a package (``pkg/__init__.py``) or a
    project file declares one. rb init never installs the project: that would run its build
    backend (setup.py) outside the sandbox; its import roots on PYTHONPATH give the same
    imports for Python code. When a project file declares an installable project,
    ``environment.install_project`` asks ``rb audit`` to install it too, in the run's sandbox,
    for code that reads its installed metadata.
    """
    paths = {entry.path for entry in index}
    declared = [name for name in _PROJECT_FILES if name in paths]
    src = any(p.startswith("src/") and p.endswith("/__init__.py") for p in paths)
    root_pkg = any(
        p.count("/") == 1
        and p.endswith("/__init__.py")
        and not p.startswith(("src/", "tests/", "test/", "docs/"))
        for p in paths
    )
    roots = (["src"] if src else []) + (["."] if root_pkg or (declared and not src) else [])
    if not roots:
        return
    why = (
        f"{declared[0]} declares the project" if declared else "the repository holds a package"
    ) + (" (src layout)" if src else "")
    b.put(
        "environment.pythonpath",
        roots,
        [f"{why}: its import roots on PYTHONPATH instead of an installation"],
        "medium",
    )
    notes.decisions.append(
        f"the repository's own package imports from any working directory: the launchers set "
        f"PYTHONPATH to {':'.join(roots)} ({why})"
    )
    if _declares_project(index, declared):
        b.put(
            "environment.install_project",
            True,
            [f"{declared[0]} declares the project: its metadata (version) is read when installed"],
            "medium",
        )
        notes.decisions.append(
            f"{declared[0]} declares the project: rb audit also installs it (editable, without "
            "dependencies) in each run's sandbox, so importlib.metadata finds it; rb init never "
            "builds it (that would run its build backend outside the sandbox)"
        )


def _declares_project(index: RepoIndex, declared: list[str]) -> bool:
    """Whether a project file declares an installable project: setup.py or setup.cfg, or a
    pyproject.toml with ``[project]``, ``[tool.poetry]`` or ``[build-system]`` (one that
    only configures tools is not installable)."""
    if "setup.py" in declared or "setup.cfg" in declared:
        return True
    if "pyproject.toml" not in declared:
        return False
    text = index.try_read_text("pyproject.toml")
    try:
        data = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError:
        return False
    tool = data.get("tool")
    return (
        "project" in data or "build-system" in data or (isinstance(tool, dict) and "poetry" in tool)
    )


def merge_python(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    reqs: dict[str, Requirement],
    notes: RecoveryNotes,
    dated: EnvironmentDate | None = None,
) -> str:
    """The Python ``X.Y`` of the environment: exact version files first, then the
    specifiers (framework pins included), the newest admitted, at most the default, and
    at most the newest Python released a year before the date bound (``dated.stamp``:
    HEAD's, or that of the chosen experiments' code, less the release lag, raised to the
    wheel floor; see
    :mod:`reprobridge.recovery.dating`): a 2022 repository resolved as of its date has no
    wheels for a Python of late 2022."""
    found = of_type(by_kind, PythonVersionValue)
    exact = [(f, v) for f in found if (v := f.value.exact) is not None]
    specs: list[tuple[SpecifierSet, Finding | str]] = []
    for f in found:
        if f.value.specifier is not None:
            try:
                specs.append((SpecifierSet(f.value.specifier), f))
            except InvalidSpecifier:
                notes.warnings.append(
                    f"{f.sources()[0]}: ignored invalid Python specifier {f.value.specifier!r}"
                )
    for fw, table in _FRAMEWORK_MAX_PY.items():
        req = reqs.get(fw)
        pinned = _pinned_version(req) if req else None
        if pinned:
            for upto, maxpy in table:
                if version_key(f"{pinned.major}.{pinned.minor}") <= version_key(upto):
                    specs.append(
                        (
                            SpecifierSet(f"<={maxpy}.99"),
                            f"{fw}=={pinned} has wheels up to Python {maxpy}",
                        )
                    )
                    break
    sources: list[str] = []
    if exact:
        ranked = sorted(
            exact, key=lambda fv: (_EXACT_PY_PRIORITY.get(fv[0].detector, 9), fv[0].sources())
        )
        choice = _major_minor(ranked[0][1])
        sources = ranked[0][0].sources()
        others = sorted({_major_minor(v) for _, v in ranked[1:]} - {choice})
        if others:
            notes.conflicts.append(
                Conflict(
                    "environment.python",
                    f"{choice} ({', '.join(sources)})",
                    others,
                    "an exact version file wins",
                )
            )
        for spec, why in specs:
            if not spec.contains(f"{choice}.0", prereleases=True):
                src = ", ".join(why.sources()) if isinstance(why, Finding) else why
                notes.conflicts.append(
                    Conflict(
                        "environment.python",
                        choice,
                        [f"{spec} ({src})"],
                        "kept the exact version; check it",
                    )
                )
        confidence = "high"
    else:
        candidates = [
            v for v in pins.available_pythons() if version_key(v) <= version_key(PYTHON_CAP)
        ]
        admitted = [
            v for v in candidates if all(s.contains(f"{v}.0", prereleases=True) for s, _ in specs)
        ]
        of_date = python_of_date(dated.stamp) if dated else None
        if dated is not None and of_date is not None and admitted:
            by_date = [v for v in admitted if version_key(v) <= version_key(of_date)]
            why = f"git: packages as of {dated.day}; Python {of_date} is " + (
                "the newest released a year before it"
                if load_packages()["python_releases"][of_date] <= year_before(dated.stamp)
                else "the oldest rb provides, and they have wheels for it "
                "(data/packages.toml [wheel_floors])"
            )
            # Older than every Python rb can provide (a bound moved by hand before the
            # wheel floor): no date rule. The oldest (3.7) would meet the packages of its
            # date without wheels for it (numpy and matplotlib of 2018-05 have none for
            # 3.7, so the environment built them from source and a smoke audit of
            # yunjey/pytorch-tutorial ran out of time); the default Python moves the bound
            # per package to releases with wheels instead.
            if by_date and by_date != admitted:
                admitted = by_date
                specs.append((SpecifierSet(f"<={by_date[-1]}.99"), why))
        if specs and admitted:
            choice = admitted[-1]
            sources = sorted(
                {s for _, w in specs for s in (w.sources() if isinstance(w, Finding) else [w])}
            )
            if version_key(choice) > version_key(DEFAULT_PYTHON) and all(
                s.contains(f"{DEFAULT_PYTHON}.0") for s, _ in specs
            ):
                choice = DEFAULT_PYTHON
            confidence = "medium"
        else:
            if specs:
                notes.warnings.append(
                    "no Python version satisfies every constraint found; using the default"
                )
            choice, sources, confidence = (
                DEFAULT_PYTHON,
                ["rb default (no Python version declared)"],
                "low",
            )
    b.put("environment.python", choice, sources, confidence)
    return choice


def _major_minor(version: str) -> str:
    parts = re.findall(r"\d+", version)
    return ".".join(parts[:2]) if len(parts) >= 2 else f"{parts[0]}.0" if parts else DEFAULT_PYTHON


def _pinned_version(req: Requirement) -> Version | None:
    for spec in req.specifier:
        if spec.operator in {"==", "==="} and "*" not in spec.version:
            try:
                return Version(spec.version)
            except ValueError:
                return None
    return None


def _cuda_version(raw: str) -> tuple[str, str | None]:
    """``"12.1.105"`` -> ``"12.1"``; a bare major (``"12"``, from ``nvidia-*-cu12`` wheels)
    becomes the CUDA that the newest closed release defaults to for that major, with a note."""
    parts = re.findall(r"\d+", raw)
    if len(parts) >= 2:
        return f"{parts[0]}.{parts[1]}", None
    major = parts[0] if parts else "12"
    known = [v for v in pins.available_cudas() if v.split(".")[0] == major]
    default = pins.default_cuda(major)
    chosen = default or (known[-1] if known else f"{major}.0")
    return (
        chosen,
        f"only CUDA {major} is known (wheel names); chose {chosen}, the newest release's default",
    )


@dataclass(frozen=True)
class NamedCuda:
    """The CUDA version the packages name (``X.Y``), with its sources and confidence."""

    version: str
    sources: tuple[str, ...]
    confidence: str


def merge_cuda(by_kind: dict[str, list[Finding]], notes: RecoveryNotes) -> NamedCuda | None:
    """The CUDA ``X.Y`` the packages name (highest-confidence source), or None."""
    found = best(of_type(by_kind, CudaValue), {})
    if not found:
        return None
    top = found[0]
    version, note = _cuda_version(top.value.version)
    if note:
        notes.decisions.append(note)
    others = sorted(
        {_cuda_version(f.value.version)[0] for f in found[1:] if "." in f.value.version} - {version}
    )
    if others:
        notes.conflicts.append(
            Conflict(
                "environment.cuda",
                f"{version} ({', '.join(top.sources())})",
                others,
                "the highest-confidence source wins",
            )
        )
    return NamedCuda(version, tuple(top.sources()), "low" if note else top.confidence)


def decide_cuda(
    b: Builder, named: NamedCuda | None, need: GpuNeed, notes: RecoveryNotes
) -> str | None:
    """``environment.cuda``: the named version where CUDA code is compiled or an experiment
    needs a GPU, else None (CPU only), the decision and its evidence stated either way."""
    if named is None:
        return None
    where = ", ".join(named.sources)
    if not need.needed:
        notes.decisions.append(f"CUDA {named.version} named by {where}, not installed: {need.why}")
        return None
    b.put("environment.cuda", named.version, list(named.sources), named.confidence)
    notes.decisions.append(f"CUDA {named.version} named by {where}, installed: {need.why}")
    return named.version


def merge_environment(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    python: str,
    cuda: str | None,
    python_lock: str | None,
    notes: RecoveryNotes,
) -> None:
    """nvcc, gcc, system libraries and the nixpkgs pin (with the pin's reasons as decisions)."""
    nvcc = of_type(by_kind, NvccValue)
    libraries = of_type(by_kind, SystemLibraryValue)
    if nvcc:
        b.put("environment.nvcc", True, [s for f in nvcc for s in f.sources()])
        if cuda is None:
            notes.warnings.append(
                "CUDA sources are compiled but no CUDA version was found: set environment.cuda"
            )
    gcc_f = best(of_type(by_kind, CompilerValue), {})
    gcc = _major_minor(gcc_f[0].value.version).split(".")[0] if gcc_f else None
    system = sorted(
        {
            f.key
            for f in libraries
            if f.confidence != "low" and re.fullmatch(NIX_ATTR_PATTERN, f.key)
        }
    )
    skipped = sorted({f.key for f in libraries} - set(system))
    for name in skipped:
        notes.warnings.append(
            f"system library {name!r} has no known nixpkgs attribute; add it by hand if needed"
        )
    if system:
        b.put(
            "environment.system",
            system,
            [s for f in libraries if f.key in system for s in f.sources()],
        )
    choice = _choose_pin(python, cuda, gcc, bool(nvcc), notes)
    if choice.python_attr != pins.python_attr(python):
        b.put(
            "environment.python",
            choice.python_attr.removeprefix("python").replace("3", "3.", 1),
            ["no known nixpkgs release carries the recovered Python; nearest newer one"],
            "low",
        )
    if choice.cuda_attr and cuda and choice.cuda_attr != pins.cuda_attr(cuda):
        b.put(
            "environment.cuda",
            choice.cuda_attr.removeprefix("cudaPackages_").replace("_", "."),
            ["no known nixpkgs release carries the recovered CUDA; nearest newer one"],
            "low",
        )
    gcc_final = gcc or choice.gcc
    if gcc_final:
        src = gcc_f[0].sources() if gcc_f else [f"nvcc {cuda} host-compiler limit (pin data)"]
        b.put("environment.compilers.gcc", gcc_final, src, "high" if gcc_f else "medium")
    b.put(
        "environment.nixpkgs",
        {
            "release": choice.release,
            "rev": choice.rev,
            "narHash": choice.narHash,
            "lastModified": choice.lastModified,
        },
        [f"pin data: {choice.release}"],
        "medium" if choice.attrs_inferred else "high",
    )
    notes.decisions.extend(choice.reasons)
    if python_lock:
        b.put("environment.python_lock", python_lock, ["uv lock"])


def _choose_pin(
    python: str, cuda: str | None, gcc: str | None, nvcc: bool, notes: RecoveryNotes
) -> pins.PinChoice:
    try:
        return pins.choose_pin(python, cuda, gcc, nvcc=nvcc)
    except RenderError:
        pass
    pythons = [v for v in pins.available_pythons() if version_key(v) >= version_key(python)] or [
        python
    ]
    cudas = (
        [None]
        if cuda is None
        else [
            v
            for v in pins.available_cudas()
            if v.split(".")[0] == cuda.split(".")[0] and version_key(v) >= version_key(cuda)
        ]
    )
    for py in pythons:
        for cu in cudas or [cuda]:
            try:
                choice = pins.choose_pin(py, cu, None, nvcc=nvcc)
            except RenderError:
                continue
            notes.conflicts.append(
                Conflict(
                    "environment",
                    f"python {py}" + (f", CUDA {cu}" if cu else ""),
                    [
                        f"python {python}"
                        + (f", CUDA {cuda}" if cuda else "")
                        + (f", gcc {gcc}" if gcc else "")
                    ],
                    "no known nixpkgs release carries the recovered versions; nearest newer ones",
                )
            )
            return choice
    return pins.choose_pin(python, cuda, gcc, nvcc=nvcc)  # raises the clear error


# -- datasets -----------------------------------------------------------------------------
