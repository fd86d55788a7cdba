"""The value of each finding kind: one frozen dataclass per kind.

This is the contract between the detectors (which build these values) and the merge (which
reads them): mypy checks both sides against it. Each class is a frozen dataclass (its base
makes it one) and names its kind in ``KIND``; a :class:`~reprobridge.detect.base.Finding`
holds one of them as ``value`` and refuses a kind that does not match.

``to_json()`` gives the value as the plain dict it was before it was typed (a field marked
:data:`ABSENT` is left out while it holds its default, as the dict left out its key); the
fixture tests compare expectations written in TOML against it.

A third-party detector (:mod:`~reprobridge.detect.registry`) that reports a kind of its own
declares its value the same way, ``class MyValue(FindingValue, kind="my_kind")``; the merge
reads only the kinds it knows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar, cast

from typing_extensions import dataclass_transform

if TYPE_CHECKING:
    from reprobridge.detect.base import Finding

#: A literal default of a parameter.
Scalar = str | int | float | bool
#: How a value follows a parameter's flag: ``--lr 0.1`` or ``optimizer.lr=0.1``.
Syntax = Literal["space", "equals"]
#: The manifest's experiment kinds.
ExperimentKind = Literal["script", "module", "notebook", "make", "shell"]

#: Field metadata: ``to_json`` leaves the field out while it holds its default.
ABSENT: Final = MappingProxyType({"absent_when_default": True})


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, _Record):
        return value.to_json()
    return value


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class _Record:
    """Every subclass is a frozen dataclass (PEP 681: mypy checks it as one)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True)(cls)

    def to_json(self) -> dict[str, Any]:
        """The value as a plain dict (lists for tuples; :data:`ABSENT` fields at their
        default left out)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata == ABSENT and value == f.default:
                continue
            out[f.name] = _plain(value)
        return out


class FindingValue(_Record):
    """Base of the typed finding values (see the module docstring)."""

    #: The finding kind, given as ``class X(FindingValue, kind="...")``.
    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind:
            cls.KIND = kind


V = TypeVar("V", bound=FindingValue)


def select(findings: Iterable[Finding], cls: type[V]) -> list[Finding[V]]:
    """The findings whose value is a ``cls``, typed as such."""
    return [cast("Finding[V]", f) for f in findings if isinstance(f.value, cls)]


def of_type(by_kind: Mapping[str, Iterable[Finding]], cls: type[V]) -> list[Finding[V]]:
    """The findings of ``cls``'s kind in ``by_kind`` (findings grouped by kind), typed."""
    return select(by_kind.get(cls.KIND, ()), cls)


# -- environment ---------------------------------------------------------------------------


class RequirementValue(FindingValue, kind="python_requirement"):
    """[normalized distribution name]: a PEP 508 requirement.

    ``declared`` is False for one only seen in imports (flagged by the merge). The imports
    detector also gives the files that import it (``importers``), and marks one imported
    only by tests, docs or benchmarks (``support_only``); the requirements detector marks
    one from an optional requirements file (``optional``)."""

    requirement: str
    declared: bool
    importers: tuple[str, ...] | None = field(default=None, metadata=ABSENT)
    support_only: bool = field(default=False, metadata=ABSENT)
    #: Declared in an optional requirements file only: a development/test/docs set or a
    #: variant beside the base file (``requirements-atari.txt``); the merge keeps it only
    #: when code the chosen experiments run imports it.
    optional: bool = field(default=False, metadata=ABSENT)
    #: Needed by a call the code makes, not by an import (the package table's ``[calls]``):
    #: the call as the guide names it (``gym's .render()``).
    called: str = field(default="", metadata=ABSENT)
    #: With ``called``: only releases of the called package from this ISO day on need it;
    #: the merge leaves it out under an earlier date bound.
    since: str = field(default="", metadata=ABSENT)


class OptionalImportValue(FindingValue, kind="optional_import"):
    """[normalized distribution name]: imported (``module``) only inside a ``try`` whose
    handler catches a failed import; the evidence is every guarded import. Never a
    requirement: the merge lists it in ``environment.optional_requirements``."""

    requirement: str
    module: str


IndexRole = Literal["index", "extra"]


class IndexValue(FindingValue, kind="python_index"):
    """[url]: a package index a declaration file names."""

    url: str
    role: IndexRole


class PinValue(FindingValue, kind="python_pin"):
    """[distribution]: the version a committed lock (``lock``, a path)
    holds."""

    version: str
    lock: str


class PythonVersionValue(FindingValue, kind="python_version"):
    """["python"]: an exact ``X.Y`` or a PEP 440 specifier set (one of
    the two is set)."""

    exact: str | None = field(default=None, metadata=ABSENT)
    specifier: str | None = field(default=None, metadata=ABSENT)


class NvccValue(FindingValue, kind="nvcc"):
    """["nvcc"]: CUDA sources are compiled (``.cu``, ``cpp_extension``)."""


class _Version(FindingValue):
    version: str


class CudaValue(_Version, kind="cuda"):
    """["cuda"]: a CUDA ``version``, ``major.minor`` (or ``major`` only)."""


class CompilerValue(_Version, kind="compiler"):
    """["gcc"]: a gcc major ``version``."""


class SystemLibraryValue(FindingValue, kind="system_library"):
    """[nixpkgs attribute]: ``name`` is the name the source used."""

    name: str


# -- project and paper ---------------------------------------------------------------------


class ProjectValue(FindingValue, kind="project"):
    """[field: name, title, url, doi, license or authors]: the field's ``value``; authors
    also come one by one (``values``; ``value`` joins them with ``"; "``)."""

    value: str
    values: tuple[str, ...] | None = field(default=None, metadata=ABSENT)


class TargetValue(FindingValue, kind="target"):
    """[row::column]: a number of a paper's result table, with its table's name and
    caption, the column's direction (None: unknown), whether it is a percentage, the
    ``spread`` of ``91.2 ± 0.3`` (None without one) and the ``decimals`` the value is
    printed with (``81.0``: 1; None where unknown)."""

    row: str
    column: str
    value: float
    table: str
    caption: str
    higher_is_better: bool | None
    percent: bool
    spread: float | None = field(default=None, metadata=ABSENT)
    decimals: int | None = field(default=None, metadata=ABSENT)


class ClaimValue(FindingValue, kind="claim"):
    """[better>worse]: the paper says row ``better`` beats row ``worse`` (on column
    ``metric``, where it says which)."""

    better: str
    worse: str
    metric: str | None


class ReproducesValue(FindingValue, kind="reproduces"):
    """[file:line]: a README sentence about which paper result the code gives."""

    text: str


# -- procedure: experiments and what they read, print and write ----------------------------


class ExperimentValue(FindingValue, kind="experiment"):
    """[experiment id]: a candidate ``command``, run from ``workdir`` (a folder of the
    repository as written, ``.`` for the root, never empty); ``entry`` is the path of the
    script, notebook, Makefile or shell script it runs."""

    command: str
    kind: ExperimentKind
    description: str
    entry: str
    workdir: str


class EntryValue(FindingValue):
    """A value about one experiment's script or notebook, the ``entry``."""

    entry: str


class ServiceValue(EntryValue, kind="service"):
    """[a shell script's path, ``Makefile::target``, or the command itself]: commands an experiment's command, shell script or Makefile runs that need a
    daemon, a cluster or the network, which the audit's offline sandbox lacks (``docker``,
    ``kubectl``, ``sbatch``, ``wget``): ``tools``, each named once, in order of appearance."""

    tools: tuple[str, ...]


class ExtraValue(EntryValue, kind="optional_set"):
    """[``<workdir>: <command>``, :func:`extra_key`]: a README or docs code block installs
    optional requirement ``sets`` (a project extra ``.[atari]``, an optional requirements
    file) before this command, each named once, in order; the environment rb builds holds
    no optional set."""

    sets: tuple[str, ...]


def extra_key(value: ExperimentValue) -> str:
    """The key of the ``optional_set`` finding of a README command: its working directory
    and its words (one command in two folders is two runs)."""
    return f"{value.workdir}: {' '.join(value.command.split())}"


class MentionValue(EntryValue, kind="mention"):
    """[path]: the top-level README names this script or notebook."""


class RejectedValue(EntryValue, kind="rejected"):
    """[path]: looked at as an experiment, not one, and why (``reason``)."""

    reason: str


class HardwareValue(FindingValue, kind="hardware"):
    """[entry]: the experiment needs ``gpus`` GPUs."""

    gpus: int


class ParamValue(EntryValue, kind="param"):
    """[entry::name]: a parameter of ``entry``; ``flag`` sets it on the command line (None:
    positional, or a config file's key), ``syntax`` says how (None for a config file's).
    ``every``: a training loop of the file runs ``range(<it>)`` and prints only every this
    many iterations counted from one (0: no such loop), so a smoke value below it prints
    nothing."""

    name: str
    flag: str | None
    default: Scalar | None
    type: str | None
    syntax: Syntax | None = field(default=None, metadata=ABSENT)
    every: int = field(default=0, metadata=ABSENT)


class SeedValue(EntryValue, kind="seed"):
    """[entry]: how ``entry`` is seeded: a flag (with its ``syntax``), or a literal in the
    code (``flag`` None); ``default`` is the literal seed, if any."""

    flag: str | None
    default: int | None
    syntax: Syntax | None = field(default=None, metadata=ABSENT)


class UnboundedValue(EntryValue, kind="unbounded"):
    """[entry]: a loop without an end, and why (``reason``); the parameter that bounds it,
    where there is one: its ``flag``, ``name``, ``syntax`` and ``default``; ``budget``: the
    name the loop's exit tests (``max_steps``), None when the loop has no exit at all."""

    reason: str
    flag: str | None
    name: str | None = field(default=None, metadata=ABSENT)
    syntax: Syntax | None = field(default=None, metadata=ABSENT)
    default: Scalar | None = field(default=None, metadata=ABSENT)
    budget: str | None = field(default=None, metadata=ABSENT)


class DatasetValue(FindingValue, kind="dataset"):
    """[dataset id]: where a dataset is (``path``), comes from (``url``), or what a library
    calls it (``name``: ``huggingface:imdb``); ``generated`` when the code makes it."""

    path: str | None = field(default=None, metadata=ABSENT)
    url: str | None = field(default=None, metadata=ABSENT)
    name: str | None = field(default=None, metadata=ABSENT)
    generated: bool = field(default=False, metadata=ABSENT)

    def filled_from(self, other: DatasetValue) -> DatasetValue:
        """This value, with the fields it lacks taken from ``other``."""
        return DatasetValue(
            self.path or other.path,
            self.url or other.url,
            self.name or other.name,
            self.generated or other.generated,
        )


class OutputValue(EntryValue, kind="output"):
    """[entry::path]: a file ``entry`` writes."""

    path: str


class SavedError(_Record):
    """A notebook cell (counted from 1 over every cell) whose saved outputs show ``error``
    (the exception's class name) raised."""

    cell: int
    error: str


class RaisesValue(EntryValue, kind="raises"):
    """[notebook path]: its code cells whose saved outputs show an error: the authors saw
    them raise, so an executed copy is expected to raise there (``cells``, in order)."""

    cells: tuple[SavedError, ...]


class MetricSource(_Record):
    """Where a metric is read: a ``regex`` over the log, or a ``key`` of a JSON ``file``."""

    regex: str | None = field(default=None, metadata=ABSENT)
    file: str | None = field(default=None, metadata=ABSENT)
    key: str | None = field(default=None, metadata=ABSENT)


class MetricValue(EntryValue, kind="metric"):
    """[metric name]: a metric of ``entry`` and where it is read."""

    source: MetricSource


class LoggedMetricValue(EntryValue, kind="logged_metric"):
    """[name]: a metric ``entry`` logs only to an experiment tracker (``sink``)."""

    name: str
    sink: str  # "wandb" or "tensorboard"


class InputValue(EntryValue, kind="input"):
    """[entry]: a file ``entry`` reads (``path``) that the script ``producer`` beside it
    writes."""

    path: str
    producer: str


class FetchValue(EntryValue, kind="fetch"):
    """[entry]: data ``entry`` reads that the repository lacks (one line each)."""

    datasets: tuple[str, ...]


class BoundValue(EntryValue, kind="bound"):
    """[entry::line:column, a notebook's entry::cell:line:column]: a literal of an
    experiment's entry file that bounds its run (:mod:`reprobridge.detect.procedure.bounds`).

    ``cell`` counts a notebook's cells from 1 (None in a script), ``line`` is within the cell
    or the file, ``column`` in characters; ``was`` is the literal's source text and ``value``
    what it denotes; ``name`` the assigned name, the loop variable or the parameter an
    argument is passed to; ``site`` whether it is a setting, a call's keyword, a training
    loop's ``range`` or an argument passed by position to a function of the repository;
    ``start`` a loop's first value; ``code`` the line as it reads."""

    cell: int | None
    line: int
    column: int
    was: str
    value: int
    name: str
    site: Literal["assign", "keyword", "loop", "argument"]
    start: int
    code: str
    #: The loop prints only every this many iterations counted from one (``if (epoch + 1) %
    #: 5 == 0: print(...)``): a smoke value below it prints nothing (0: no such gate).
    every: int = 0


class Removal(_Record):
    """One entry of ``reprobridge/data/api_drift.toml`` (its header describes the fields):
    ``name``, fully qualified, is gone from ``distribution`` since ``removed_in``;
    ``replacement`` names what replaces it and ``source`` where the removal is documented.
    ``method``: ``name`` is a method or attribute of a class
    (``matplotlib.axes.Axes.set_axis_bgcolor``), matched on any object by its last part.
    ``keyword``: an entry of the table's ``[[keyword]]`` list: ``name`` (a function) still
    exists, but a call that passes it ``keyword`` fails since ``removed_in``; nothing
    replaces it (``replacement`` is "").
    ``attribute``: an entry of the ``[[assigned]]`` list: ``name`` (a class) made its
    ``attribute`` read-only in ``removed_in``, so ``self.<attribute> = ...`` in a class
    derived from it fails; nothing replaces it either."""

    distribution: str
    name: str
    removed_in: str
    replacement: str
    source: str
    method: bool = field(default=False, metadata=ABSENT)
    keyword: str = field(default="", metadata=ABSENT)
    attribute: str = field(default="", metadata=ABSENT)
    #: An entry of the ``[[unpacked]]`` list: ``name`` (a method) returns another number of
    #: values since ``removed_in``; code that unpacks it into ``count`` names fails.
    count: int = field(default=0, metadata=ABSENT)
    #: How many names code written for the release unpacks the result into (0: unknown).
    count_since: int = field(default=0, metadata=ABSENT)

    @property
    def condition(self) -> str:
        """``jax>=0.3.16``: the versions that lack the name (a renaming edit's ``when``)."""
        return f"{self.distribution}>={self.removed_in}"

    @property
    def what(self) -> str:
        """What the release did to code that uses the entry (``jax.tree_multimap is gone``,
        ``seaborn.scatterplot(cmap=...) fails``)."""
        if self.keyword:
            return f"{self.name}({self.keyword}=...) fails"
        if self.attribute:
            return f"`self.{self.attribute} = ...` in a {self.name} fails"
        if self.count:
            return f"unpacking {self.name}() into {self.count} names fails"
        return f"{self.name} is gone"


class DriftValue(EntryValue, kind="api_drift"):
    """[entry::line:column, a notebook's entry::cell:line:column]: a reference of an
    experiment's entry file to a name a later release of a package removed
    (:mod:`reprobridge.detect.procedure.drift`; the names are data in
    ``reprobridge/data/api_drift.toml``, each a :class:`Removal`).

    ``file`` is where the reference is: the entry, or a repository module the entry
    imports (reported so the guide can name it; only the entry is edited).
    ``cell``/``line``/``column`` place ``was``, the reference as the code spells it
    (``np.float``, ``jax.tree_multimap``, the ``sklearn.cross_validation`` of an import
    statement), as a bound's are placed (:class:`BoundValue`). ``value`` is what replaces
    that text, spelled through the code's own alias (``np.float64``), or "" where no edit of
    that text alone can name the replacement (``from jax import tree_multimap``): such a
    reference is reported, never rewritten. ``removal`` is the table's entry for the name;
    ``code`` the line.

    The fields of a renaming edit (:class:`~reprobridge.manifest.schema.SourceEdit`) have
    the same names and meanings (``when`` is the removal's :attr:`Removal.condition`):
    :mod:`reprobridge.recovery.drift` builds the edit from the value's attributes."""

    file: str
    cell: int | None
    line: int
    column: int
    was: str
    value: str
    removal: Removal
    code: str
    #: The code uses the API as the release has it (``s, r, term, trunc, info =
    #: env.step(a)``, an ``[[unpacked]]`` entry's ``count_since``): it needs the release or
    #: later, so no bound below it is written; nothing is edited.
    current: bool = field(default=False, metadata=ABSENT)

    @property
    def when(self) -> str:
        """The versions the edit applies to (``jax>=0.3.16``)."""
        return self.removal.condition
