"""The value of each finding kind: one frozen dataclass per kind.

This is the contract between the detectors (which build these values) and the merge (which
reads them): mypy checks both sides against it. Each class names its kind in ``KIND``; a
:class:`~reprobridge.detect.base.Finding` holds one of them as ``value`` and refuses a kind
that does not match.

``to_json()`` gives the value as the plain dict it was before it was typed (a field marked
:func:`absent` is left out while it holds its default, as the dict left out its key); the
fixture tests compare expectations written in TOML against it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

if TYPE_CHECKING:
    from reprobridge.detect.base import Finding

_ABSENT = "absent_when_default"


def absent(default: Any) -> Any:
    """A field that ``to_json`` leaves out while it holds ``default``."""
    return dataclasses.field(default=default, metadata={_ABSENT: True})


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, FindingValue):
        return value.to_json()
    return value


@dataclass(frozen=True)
class FindingValue:
    """Base of the typed finding values (see the module docstring)."""

    #: The finding kind, given as ``class X(FindingValue, kind="...")``.
    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind:
            cls.KIND = kind

    def to_json(self) -> dict[str, Any]:
        """The value as a plain dict (lists for tuples; :func:`absent` fields at their
        default left out)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata.get(_ABSENT) and value == f.default:
                continue
            out[f.name] = _plain(value)
        return out


V = TypeVar("V", bound=FindingValue)


def of_type(by_kind: Mapping[str, Iterable[Finding[Any]]], cls: type[V]) -> list[Finding[V]]:
    """The findings of ``cls``'s kind in ``by_kind`` (findings grouped by kind), typed."""
    return [f for f in by_kind.get(cls.KIND, ()) if isinstance(f.value, cls)]


# -- environment ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RequirementValue(FindingValue, kind="python_requirement"):
    """[normalized distribution name]: a PEP 508 requirement.

    ``declared`` is False for one only seen in imports (flagged by the merge). The imports
    detector also gives the files that import it (``importers``), and marks one imported
    only by tests, docs or benchmarks (``support_only``)."""

    requirement: str
    declared: bool
    importers: tuple[str, ...] | None = absent(None)
    support_only: bool = absent(False)


@dataclass(frozen=True)
class OptionalImportValue(FindingValue, kind="optional_import"):
    """[normalized distribution name]: imported (``module``) only inside a ``try`` whose
    handler catches a failed import; the evidence is every guarded import. Never a
    requirement: the merge lists it in ``environment.optional_requirements``."""

    requirement: str
    module: str


IndexRole = Literal["index", "extra"]


@dataclass(frozen=True)
class IndexValue(FindingValue, kind="python_index"):
    """[url]: a package index a declaration file names."""

    url: str
    role: IndexRole


@dataclass(frozen=True)
class PinValue(FindingValue, kind="python_pin"):
    """[distribution]: the version a committed lock (``lock``, a path)
    holds."""

    version: str
    lock: str


@dataclass(frozen=True)
class PythonVersionValue(FindingValue, kind="python_version"):
    """["python"]: an exact ``X.Y`` or a PEP 440 specifier set (one of
    the two is set)."""

    exact: str | None = absent(None)
    specifier: str | None = absent(None)


@dataclass(frozen=True)
class _Version(FindingValue):
    version: str


@dataclass(frozen=True)
class CudaValue(_Version, kind="cuda"):
    """["cuda"]: a CUDA ``version``, ``major.minor`` (or ``major`` only)."""


@dataclass(frozen=True)
class NvccValue(FindingValue, kind="nvcc"):
    """["nvcc"]: CUDA sources are compiled (``.cu``, ``cpp_extension``)."""


@dataclass(frozen=True)
class CompilerValue(_Version, kind="compiler"):
    """["gcc"]: a gcc major ``version``."""


@dataclass(frozen=True)
class SystemLibraryValue(FindingValue, kind="system_library"):
    """[nixpkgs attribute]: ``name`` is the name the source used."""

    name: str


# -- project and paper ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectValue(FindingValue, kind="project"):
    """[field: name, title, url, doi, license or authors]: the field's ``value``; authors
    also come one by one (``values``; ``value`` joins them with ``"; "``)."""

    value: str
    values: tuple[str, ...] | None = absent(None)


@dataclass(frozen=True)
class TargetValue(FindingValue, kind="target"):
    """[row::column]: a number of a paper's result table, with its table's name and
    caption, the column's direction (None: unknown), whether it is a percentage, and the
    ``spread`` of ``91.2 ± 0.3`` (None without one)."""

    row: str
    column: str
    value: float
    table: str
    caption: str
    higher_is_better: bool | None
    percent: bool
    spread: float | None = absent(None)


@dataclass(frozen=True)
class ClaimValue(FindingValue, kind="claim"):
    """[better>worse]: the paper says row ``better`` beats row ``worse`` (on column
    ``metric``, where it says which)."""

    better: str
    worse: str
    metric: str | None


@dataclass(frozen=True)
class ReproducesValue(FindingValue, kind="reproduces"):
    """[file:line]: a README sentence about which paper result the code gives."""

    text: str


# -- procedure -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BoundValue(FindingValue, kind="bound"):
    """[entry::line:column, a notebook's entry::cell:line:column]: a literal of an
    experiment's entry file that bounds its run (:mod:`reprobridge.detect.bounds`).

    ``cell`` counts a notebook's cells from 1 (None in a script), ``line`` is within the cell
    or the file, ``column`` in characters; ``was`` is the literal's source text and ``value``
    what it denotes; ``name`` the assigned name or the loop variable; ``site`` whether it is
    a setting or a training loop's ``range``; ``start`` a loop's first value; ``code`` the
    line as it reads."""

    entry: str
    cell: int | None
    line: int
    column: int
    was: str
    value: int
    name: str
    site: Literal["assign", "loop"]
    start: int
    code: str
