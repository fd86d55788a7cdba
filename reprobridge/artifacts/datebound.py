"""Resolve within the date bound; relax it only for the packages that need it (issue 9).

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

from packaging.utils import canonicalize_name

from reprobridge import _proc
from reprobridge.data import load_packages

#: Days after the bound tried for a relaxed package, in order.
STEP_DAYS = (90, 182, 365, 547, 730, 1095, 1460, 2190, 3650)
#: Resolutions tried at most (the first, bounded one included).
MAX_ATTEMPTS = 16
#: uv's words for a package its date bound (global or per package) filtered: the hint of a
#: fresh resolution, and the cause when a previous lock pinned a release the bound excludes.
_FILTERED = re.compile(
    r"`([A-Za-z0-9][A-Za-z0-9._-]*)` was filtered by `exclude-newer(?:-package)?`"
    r"|\b([A-Za-z0-9][A-Za-z0-9._-]*)==\S+ was published after the exclude newer time"
)
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Relaxation:
    """The date bound of ``package`` moved to ``bound`` (RFC 3339, UTC), and why."""

    package: str
    bound: str
    why: str

    @property
    def setting(self) -> str:
        """uv's ``NAME=DATE`` form (``--exclude-newer-package``)."""
        return f"{self.package}={self.bound}"


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
    """Canonical names of the packages uv says its date bound filtered, sorted."""
    return sorted({canonicalize_name(a or b) for a, b in _FILTERED.findall(stderr)})


def relaxation_flags(relaxed: Iterable[Relaxation]) -> list[str]:
    """uv's command-line flags for ``relaxed``."""
    return [a for r in relaxed for a in ("--exclude-newer-package", r.setting)]


def relaxation_notes(relaxed: Iterable[Relaxation], exclude_newer: str) -> list[str]:
    """One sentence per relaxation, for the guide and the evidence."""
    day = exclude_newer[:10]
    return [f"date bound {day} relaxed for {r.package} to {r.bound[:10]}: {r.why}" for r in relaxed]


def _moved(exclude_newer: str, step: int) -> str:
    start = datetime.strptime(exclude_newer, _STAMP).replace(tzinfo=UTC)
    return (start + timedelta(days=STEP_DAYS[step])).strftime(_STAMP)


def resolve_within_bound(
    attempt: Callable[[Sequence[Relaxation]], _proc.Result],
    exclude_newer: str | None,
    *,
    python: str | None = None,
    kept: Mapping[str, str] | None = None,
) -> BoundedResolution:
    """Run ``attempt`` (a resolution with these relaxations on top of the bound) until it
    succeeds or no relaxation is left to try (see the module docstring). ``kept`` are
    packages already relaxed by the caller's inputs (the manifest's
    ``exclude_newer_package``): never relaxed again here. ``python`` (``X.Y``) only words
    the reasons."""
    result = attempt(())
    if exclude_newer is None or result.returncode == 0:
        return BoundedResolution(result)
    fixed = {canonicalize_name(k) for k in (kept or {})}
    steps: dict[tuple[str, ...], int] = {}  # family -> index into STEP_DAYS
    named: dict[tuple[str, ...], str] = {}  # family -> the member uv named first
    day = exclude_newer[:10]
    where = f"Python {python}" if python else "this interpreter"
    relaxed: tuple[Relaxation, ...] = ()
    attempts = 1
    for attempts in range(2, MAX_ATTEMPTS + 1):
        stderr = result.stderr.decode("utf-8", "replace")
        families = {release_family(n) for n in filtered_by_bound(stderr) if n not in fixed}
        if not families:
            break
        start = max(steps.values(), default=-1)
        for family in sorted(families):
            steps[family] = steps[family] + 1 if family in steps else max(start, 0)
            named.setdefault(family, next(n for n in filtered_by_bound(stderr) if n in family))
        if max(steps.values()) >= len(STEP_DAYS):
            break
        relaxed = tuple(
            sorted(
                (
                    Relaxation(
                        member,
                        _moved(exclude_newer, step),
                        f"no release usable on {where} uploaded before {day}"
                        if member == named[family]
                        else f"released in lock-step with {named[family]}",
                    )
                    for family, step in steps.items()
                    for member in family
                ),
                key=lambda r: r.package,
            )
        )
        result = attempt(relaxed)
        if result.returncode == 0:
            return BoundedResolution(result, relaxed, attempts)
    return BoundedResolution(result, relaxed, attempts)
