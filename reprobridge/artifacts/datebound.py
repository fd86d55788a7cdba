"""Resolve within the date bound; relax it only for the packages that need it.

``environment.exclude_newer`` (uv's ``exclude-newer``) makes a 2022 repository resolve 2022
packages. It can leave a requirement with nothing to install: no release uploaded before the
bound has a wheel for the interpreter in use (jaxlib for CPython 3.11 before 2022-11; old
jaxlib releases were removed from PyPI altogether), or the package had no release yet
(torchdiffeq before 2019-07). uv then fails, and names each package its bound filtered
(``hint: `jaxlib` was filtered by `exclude-newer` ...``).

Contract of :func:`resolve_within_bound`: the resolution is first tried with the bound as
it is. When it fails and uv names packages the bound filtered, the bound is moved for just
those packages (uv's ``exclude-newer-package NAME=DATE``), by growing steps from the bound
(:data:`STEP_DAYS`), so each gets the oldest era that resolves, not the newest release; a
package released in lock-step with a relaxed one (:func:`release_family`: torch with
torchvision, jax with jaxlib) moves with it, so the two never drift apart. A package
first named after others were relaxed (a dependency of a newer jaxlib) starts at their
step. Never more than :data:`MAX_ATTEMPTS` resolutions; the bound is never dropped for
everything. The caller runs each attempt (``uv lock`` for `rb init`, ``uv pip compile``
for the host backend, both in the bubblewrap sandbox where one is usable) and records the
relaxations with their reasons: the manifest's ``environment.exclude_newer_package``, the
guide, the audit's evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from packaging.utils import canonicalize_name

from reprobridge import _proc
from reprobridge.data import load_packages

#: Days after the bound tried for a relaxed package, in order.
STEP_DAYS = (90, 182, 365, 547, 730, 1095, 1460, 2190, 3650)
#: Full resolutions tried at most (the first, bounded one included).
MAX_ATTEMPTS = 16
#: uv's words for a package its date bound (global or per package) filtered: the hint of a
#: fresh resolution, and the cause when a previous lock pinned a release the bound excludes.
#: A release range uv found only yanked releases in counts too: PyPI's torchvision releases
#: of 2019 are yanked, so a repository of May 2019 resolves nothing until it moves on.
_FILTERED = re.compile(
    r"`([A-Za-z0-9][A-Za-z0-9._-]*)` was filtered by `exclude-newer(?:-package)?`"
    r"|\b([A-Za-z0-9][A-Za-z0-9._-]*)==\S+ was published after the exclude newer time"
    r"|\b([A-Za-z0-9][A-Za-z0-9._-]*)(?:[<>=!~]=?[^\s,]*)? (?:was|were|is|are) yanked"
)
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Relaxation:
    """The date bound of ``package`` moved to ``bound`` (RFC 3339, UTC), and why."""

    package: str
    bound: str
    why: str


@dataclass(frozen=True)
class BoundedResolution:
    """The last attempt's result, the relaxations it used, and how many attempts ran."""

    result: _proc.Result
    relaxed: tuple[Relaxation, ...] = ()
    attempts: int = 1


def release_family(name: str) -> tuple[str, ...]:
    """The packages released in lock-step with ``name`` (itself included; ``(name,)`` when
    it belongs to no family of ``[release_families]`` in ``reprobridge/data/packages.toml``)."""
    key = canonicalize_name(name)
    for members in load_packages()["release_families"].values():
        family = tuple(canonicalize_name(m) for m in members)
        if key in family:
            return family
    return (key,)


def filtered_by_bound(stderr: str) -> list[str]:
    """Canonical names of the packages uv says its date bound filtered (or found yanked in
    the range it left), sorted."""
    return sorted({canonicalize_name(next(filter(None, m))) for m in _FILTERED.findall(stderr)})


def package_bound_flags(bounds: Iterable[tuple[str, str]]) -> list[str]:
    """uv's command-line flags for per-package date bounds ``(NAME, DATE)``:
    ``--exclude-newer-package NAME=DATE`` each, in order."""
    return [a for name, bound in bounds for a in ("--exclude-newer-package", f"{name}={bound}")]


def relaxation_flags(relaxed: Iterable[Relaxation]) -> list[str]:
    """uv's command-line flags for ``relaxed``."""
    return package_bound_flags((r.package, r.bound) for r in relaxed)


def relaxation_notes(relaxed: Iterable[Relaxation], exclude_newer: str) -> list[str]:
    """One sentence per relaxation, for the guide and the evidence."""
    day = exclude_newer[:10]
    return [f"date bound {day} relaxed for {r.package} to {r.bound[:10]}: {r.why}" for r in relaxed]


def _moved(exclude_newer: str, step: int) -> str:
    start = datetime.strptime(exclude_newer, _STAMP).replace(tzinfo=UTC)
    return (start + timedelta(days=STEP_DAYS[step])).strftime(_STAMP)


class _Steps:
    """How far the bound has moved for each family, and who uv named first in each."""

    def __init__(self, exclude_newer: str, fixed: set[str], python: str | None) -> None:
        self.exclude_newer = exclude_newer
        self.fixed = fixed
        self.where = f"Python {python}" if python else "this interpreter"
        self.steps: dict[tuple[str, ...], int] = {}  # family -> index into STEP_DAYS
        self.named: dict[tuple[str, ...], str] = {}  # family -> the member uv named first
        self.names: set[str] = set()  # every package uv named
        #: family -> a package moved before it was named (the newer release needs it)
        self.needed_by: dict[tuple[str, ...], str | None] = {}

    def advance(self, result: _proc.Result) -> str:
        """Move the families of the packages ``result`` names one step (a family met for
        the first time starts where the others are): ``moved``, ``none`` (uv named no
        package the bound filtered) or ``exhausted`` (a family is past the last step)."""
        names = filtered_by_bound(result.stderr.decode("utf-8", "replace"))
        families = {release_family(n) for n in names if n not in self.fixed}
        if not families:
            return "none"
        start = max(self.steps.values(), default=-1)
        first = sorted(self.named.values())[:1]  # what moved before: what needs the new ones
        for family in sorted(families):
            self.steps[family] = self.steps[family] + 1 if family in self.steps else max(start, 0)
            if family not in self.named:
                self.named[family] = next(n for n in names if n in family)
                self.needed_by[family] = first[0] if first else None
        self.names.update(n for n in names if n not in self.fixed)
        return "exhausted" if max(self.steps.values()) >= len(STEP_DAYS) else "moved"

    def relaxed(self) -> tuple[Relaxation, ...]:
        out = [
            Relaxation(
                member,
                _moved(self.exclude_newer, min(step, len(STEP_DAYS) - 1)),
                self._why(family, member),
            )
            for family, step in self.steps.items()
            for member in family
        ]
        return tuple(sorted(out, key=lambda r: r.package))

    def _why(self, family: tuple[str, ...], member: str) -> str:
        day = self.exclude_newer[:10]
        if member != self.named[family]:
            return f"released in lock-step with {self.named[family]}"
        if self.needed_by.get(family):
            return f"the moved {self.needed_by[family]} needs a release uploaded after {day}"
        return f"no release usable on {self.where} uploaded before {day}"


#: Probes (resolutions of the named packages alone) tried at most.
MAX_PROBES = 32


def resolve_within_bound(
    attempt: Callable[[Sequence[Relaxation]], _proc.Result],
    exclude_newer: str | None,
    *,
    python: str | None = None,
    kept: Mapping[str, str] | None = None,
    probe: Callable[[Sequence[str], Sequence[Relaxation]], _proc.Result] | None = None,
) -> BoundedResolution:
    """Run ``attempt`` (a resolution with these relaxations on top of the bound) until it
    succeeds or no relaxation is left to try (see the module docstring). ``kept`` are
    packages already relaxed by the caller's inputs (the manifest's
    ``exclude_newer_package``): never relaxed again here. ``python`` (``X.Y``) only words
    the reasons.

    ``probe`` (optional) resolves just the named packages with these relaxations
    (:func:`compile_probe`): the steps are found with it, and the full resolution is tried
    again only once the named packages resolve alone. A failing full resolution is slow,
    uv backtracks through every release of what depends on the missing package (minutes
    for a notebook stack on jax); a probe of jax and jaxlib alone takes seconds."""
    result = attempt(())
    if exclude_newer is None or result.returncode == 0:
        return BoundedResolution(result)
    state = _Steps(exclude_newer, {canonicalize_name(k) for k in (kept or {})}, python)
    attempts, probes = 1, 0
    while attempts < MAX_ATTEMPTS:
        outcome = state.advance(result)
        while probe is not None and outcome == "moved" and probes < MAX_PROBES:
            probes += 1
            tried = probe(sorted(state.names), state.relaxed())
            if tried.returncode == 0:
                break
            outcome = state.advance(tried)
            if outcome == "none":
                outcome = "moved"  # the probe failed otherwise: the full resolution decides
                break
        if outcome != "moved":
            break
        attempts += 1
        result = attempt(state.relaxed())
        if result.returncode == 0:
            return BoundedResolution(result, state.relaxed(), attempts)
    return BoundedResolution(result, state.relaxed(), attempts)


def compile_probe(
    uv: str,
    directory: Path,
    exclude_newer: str,
    python: str,
    run: Callable[[list[str]], _proc.Result],
    *,
    flags: Sequence[str] = (),
) -> Callable[[Sequence[str], Sequence[Relaxation]], _proc.Result]:
    """A ``probe`` for :func:`resolve_within_bound`: ``uv pip compile`` of the named
    packages alone (a file in ``directory``, removed after), for ``python``, with the
    bound and the relaxations, run by ``run`` (the caller's sandbox or host runner, in
    ``directory``, so that the uv settings of the project there, its indexes, apply as
    they do to the full resolution); ``flags`` are the caller's own (``--no-build`` on
    the host, the extra indexes given on the command line). A probe that fails without
    naming a package the bound filtered leaves the decision to the full resolution."""

    def probe(names: Sequence[str], relaxed: Sequence[Relaxation]) -> _proc.Result:
        path = directory / ".rb-date-probe.in"
        path.write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
        argv = [uv, "pip", "compile", "--quiet", "--no-progress", "--no-header"]
        argv += [str(path), "--python", python, "--exclude-newer", exclude_newer, *flags]
        try:
            return run([*argv, *relaxation_flags(relaxed)])
        finally:
            path.unlink(missing_ok=True)

    return probe
