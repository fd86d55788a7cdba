"""Findings, evidence and the Detector contract.

A detector reads one source of knowledge from a :class:`~reprobridge.detect.index.RepoIndex`
and returns :class:`Finding` objects. Detectors are deterministic, cheap, never execute repo
code and never touch the network; they report facts with ``file:line`` evidence and leave
decisions (which Python, which pin, which experiment id wins) to ``recovery.merge``.

Each finding kind has its own value class in :mod:`reprobridge.detect.findings`, which
documents the value's fields and the finding's ``key``; ``Finding[V]`` is a finding whose
value is a ``V``, and the merge reads the values typed (``of_type``, :meth:`DetectContext.of`):

====================  ==========================  =====================================
kind                  value class                 key
====================  ==========================  =====================================
python_requirement    ``RequirementValue``        normalized distribution name
optional_import       ``OptionalImportValue``     normalized distribution name
python_index          ``IndexValue``              url
python_pin            ``PinValue``                distribution
python_version        ``PythonVersionValue``      ``"python"``
cuda                  ``CudaValue``               ``"cuda"``
nvcc                  ``NvccValue``               ``"nvcc"``
compiler              ``CompilerValue``           ``"gcc"``
system_library        ``SystemLibraryValue``      nixpkgs attribute
experiment            ``ExperimentValue``         experiment id
rejected              ``RejectedValue``           path
mention               ``MentionValue``            path
hardware              ``HardwareValue``           entry
param                 ``ParamValue``              ``entry::name``
seed                  ``SeedValue``               entry
unbounded             ``UnboundedValue``          entry
bound                 ``BoundValue``              ``entry::[cell:]line:column``
dataset               ``DatasetValue``            dataset id
output                ``OutputValue``             ``entry::path``
metric                ``MetricValue``             metric name
logged_metric         ``LoggedMetricValue``       metric name
fetch                 ``FetchValue``              entry
service               ``ServiceValue``            script, ``Makefile::target`` or command
input                 ``InputValue``              entry
target                ``TargetValue``             ``row::column``
claim                 ``ClaimValue``              ``better>worse``
reproduces            ``ReproducesValue``         ``file:line``
project               ``ProjectValue``            field (name, title, url, doi, ...)
====================  ==========================  =====================================

Confidence: ``high`` (a declaration says so), ``medium`` (inferred from code), ``low`` (guess).
"""

from __future__ import annotations

import ast
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Literal

# PEP 696 defaults: a bare ``Finding`` is a ``Finding[FindingValue]``.
from typing_extensions import TypeVar

from reprobridge.detect._text import skip_path
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import ExperimentValue, FindingValue, RejectedValue, select
from reprobridge.detect.index import MAX_TEXT_BYTES
from reprobridge.errors import DetectionError, UnsafePathError

if TYPE_CHECKING:
    from reprobridge.detect.index import RepoIndex

Confidence = Literal["high", "medium", "low"]

_CONF_RANK: dict[Confidence, int] = {"high": 0, "medium": 1, "low": 2}


def rank_of(confidence: Confidence) -> int:
    """A confidence's rank, strongest first as a sort key: ``0`` ``high``, ``2`` ``low``."""
    return _CONF_RANK[confidence]


#: A finding's value type: one :mod:`~reprobridge.detect.findings` class per kind.
V_co = TypeVar("V_co", bound=FindingValue, covariant=True, default=FindingValue)
V = TypeVar("V", bound=FindingValue)


@dataclass(frozen=True, order=True)
class Evidence:
    """A place in the repository (or the paper) that supports a finding."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Finding(Generic[V_co]):
    """One fact a detector found. See the module docstring for ``kind``/``key``/``value``;
    ``value`` (a :class:`~reprobridge.detect.findings.FindingValue`) must be of ``kind``
    (ValueError otherwise)."""

    kind: str
    key: str
    value: V_co
    evidence: tuple[Evidence, ...]
    detector: str
    confidence: Confidence = "high"
    note: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.value, FindingValue) or self.kind != self.value.KIND:
            got = getattr(self.value, "KIND", type(self.value).__name__)
            raise ValueError(f"a {self.kind} finding with a {got} value")

    def sources(self) -> list[str]:
        """Evidence as ``file:line`` strings, for the manifest's provenance."""
        return [str(e) for e in self.evidence]


def rejected(entry: str, reason: str, evidence: Evidence, detector: str) -> Finding[RejectedValue]:
    """The ``rejected`` finding of a candidate experiment ``entry`` that is not one (low
    confidence: a guess about the author's intent), and why."""
    return Finding("rejected", entry, RejectedValue(entry, reason), (evidence,), detector, "low")


@dataclass
class Warning_:
    """Something a detector skipped or could not use, shown to the user but not fatal."""

    message: str
    path: str | None = None


@dataclass
class DetectContext:
    """What detectors share in one run: the index, the paper (optional) and warnings."""

    index: RepoIndex
    paper_path: str | None = None
    warnings: list[Warning_] = field(default_factory=list)
    #: Findings of the detectors that ran before this one (registry order). A detector that
    #: derives from another's facts (CUDA from the pinned torch, system libraries from Python
    #: packages) reads them here instead of re-reading the files.
    findings: list[Finding] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Finding]:
        """Earlier findings of ``kind``."""
        return [f for f in self.findings if f.kind == kind]

    def of(self, cls: type[V]) -> list[Finding[V]]:
        """Earlier findings of the kind of value ``cls``, typed."""
        return select(self.findings, cls)

    def experiment_entries(self, *suffixes: str) -> list[str]:
        """The entries (script, notebook, ... paths) of the earlier experiment findings that
        end with one of ``suffixes``, sorted, each once."""
        return sorted(
            {f.value.entry for f in self.of(ExperimentValue) if f.value.entry.endswith(suffixes)}
        )

    def warn(self, message: str, path: str | None = None) -> None:
        """Record a non-fatal problem (skipped file, ambiguous value)."""
        self.warnings.append(Warning_(message, path))

    def text_or_warn(self, path: str, what: str = "", *, limit: int = MAX_TEXT_BYTES) -> str | None:
        """``path``'s text (:meth:`~reprobridge.detect.index.RepoIndex.try_read_text`), or
        None after warning ``skipped <what>: not readable as text (binary, too large or
        unsafe)``: a detector skips such a file, it does not fail."""
        text = self.index.try_read_text(path, limit=limit)
        if text is None:
            skipped = f"skipped {what}" if what else "skipped"
            self.warn(f"{skipped}: not readable as text (binary, too large or unsafe)", path)
        return text

    def own_texts(self, paths: Iterable[str], what: str = "") -> Iterator[tuple[str, str]]:
        """``(path, text)`` of each of ``paths``, in order, that is the repository's own (not
        under a :func:`~reprobridge.detect._text.skip_path` directory) and readable as text;
        an unreadable one is skipped with :meth:`text_or_warn`'s warning."""
        for path in paths:
            if skip_path(path):
                continue
            text = self.text_or_warn(path, what)
            if text is not None:
                yield path, text

    def python_trees(self, paths: Iterable[str]) -> Iterator[tuple[str, ast.Module]]:
        """``(path, tree)`` of each of ``paths``, in order, that parses
        (:meth:`~reprobridge.detect.index.RepoIndex.parse_python`); the others are passed
        over. Analyse each tree inside :meth:`skip_too_deep`."""
        for path in paths:
            tree = self.index.parse_python(path)
            if tree is not None:
                yield path, tree

    @contextlib.contextmanager
    def skip_too_deep(self, path: str) -> Iterator[None]:
        """Analyse ``path`` inside this: a RecursionError (expressions nested too deeply for
        a recursive walk, as generated code has) ends the analysis of that file with the
        warning ``skipped: expressions nested too deeply to analyse``, not the detector.
        What the analysis collected before it stays."""
        try:
            yield
        except RecursionError:
            self.warn("skipped: expressions nested too deeply to analyse", path)


class Detector(ABC):
    """One source of knowledge.

    Contract: ``detect`` reads only through ``ctx.index`` (never the current directory, never
    executing repo code, never the network), returns findings in a deterministic order, and
    raises :class:`~reprobridge.errors.DetectionError` (naming the file and, where it can, the
    line or field) only for a declared source it cannot parse — e.g. a malformed
    requirements.txt. Problems with incidental files are ``ctx.warn``-ed and skipped.
    """

    #: Short stable name, used in provenance ("requirements", "argparse", ...).
    name: str = ""

    @abstractmethod
    def detect(self, ctx: DetectContext) -> list[Finding]:
        """Return the findings of this source in ``ctx.index``."""


class DeclaredFileDetector(Detector):
    """A detector for one kind of declaration file (``setup.py``, ``setup.cfg``, ...).

    The file at the repository root (or in ``binder/``, which then replaces the root's; see
    :mod:`~reprobridge.detect.envscope`) is a declared source: an error reading or parsing it
    propagates (DetectionError naming the file). Files of that name deeper in the tree are
    vendored or example projects: their findings are medium confidence, and a broken one is
    skipped with a warning. Files the precedence rules ignore are not read.
    """

    #: The base name of the files this detector reads.
    filename: str = ""

    def detect(self, ctx: DetectContext) -> list[Finding]:
        scope = env_scope(ctx.index)
        findings: list[Finding] = []
        for path in ctx.index.named(self.filename):
            if skip_path(path) or scope.ignores(path):
                continue
            if not scope.declared(path):
                try:
                    findings += self._one(ctx, path, "medium")
                except (DetectionError, UnsafePathError) as exc:
                    ctx.warn(f"skipped: {exc}", path)
            else:
                findings += self._one(ctx, path, "high")
        return findings

    @abstractmethod
    def _one(self, ctx: DetectContext, path: str, confidence: Confidence) -> list[Finding]:
        """The findings of the one file at ``path``."""
