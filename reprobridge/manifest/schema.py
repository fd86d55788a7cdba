"""Pydantic models of reprobridge.toml, schema version 1.

Contract: the key names here are read by other tools (the generated flake through
``builtins.fromTOML``, the auditor, the archive). Add fields freely; rename none without a
schema version bump and a migration. Every model rejects unknown keys (``extra="forbid"``)
and non-finite numbers; identifiers that become directory names or flake attribute names
are restricted to ``[a-z0-9][a-z0-9_-]*``.

Values the flake reads are plain strings, numbers, booleans, lists and tables: no TOML
datetimes (``builtins.fromTOML`` does not support them everywhere).
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import WithJsonSchema

#: Characters that make a command shell syntax when unquoted (a launcher then runs it with
#: ``bash -c``); ``plain_command`` refuses them anywhere, quoted or not.
SHELL_CHARS = frozenset("|&;<>()$`*?[]{}~\n#")
#: ``VAR=value cmd``: an assignment only to a shell.
SHELL_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


#: A parameter's placeholder in a command (``{lr}``): the launcher puts the tier's value
#: there as one quoted word, so it is no shell syntax.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def plain_command(command: str) -> bool:
    """Whether ``command`` is plain words a launcher runs as an argv, with no shell syntax
    anywhere (conservative: a quoted ``$`` counts too; a parameter's ``{name}`` is no shell
    syntax). Only such a command can run a tier's edited copy of its file in place of the
    original word."""
    command = PLACEHOLDER.sub("x", command)
    if SHELL_CHARS & set(command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and not SHELL_ASSIGNMENT.match(words[0])


SCHEMA_VERSION = 1

#: Experiment and dataset ids: safe as directory names, flake attribute names and shell words.
ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
#: Metric names: usable as identifiers in claim expressions (``exp.metric``).
METRIC_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
#: Parameter names: usable as shell variable suffixes and ``{name}`` placeholders.
PARAM_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
#: A nixpkgs attribute path (``ffmpeg``, ``xorg.libSM``), resolved under ``pkgs`` by the flake.
NIX_ATTR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_'-]*(?:\.[A-Za-z_][A-Za-z0-9_'-]*)*$"
DURATION_PATTERN = r"^(?:\d+(?:\.\d+)?[smhd])+$"

ExpId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
MetricName = Annotated[str, StringConstraints(pattern=METRIC_PATTERN)]
ParamName = Annotated[str, StringConstraints(pattern=PARAM_PATTERN)]
NixAttr = Annotated[str, StringConstraints(pattern=NIX_ATTR_PATTERN)]
Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN)]
Scalar = str | int | float | bool


def check_rel_path(text: str) -> str:
    """``text`` when it is a relative, normalised POSIX path inside its base, else ValueError.

    The contract of every manifest path the auditor reads or writes on behalf of the
    repository (``workdir``, ``outputs.path``, ``metrics.*.source.file``, dataset paths):
    components separated by single ``/``, none of them empty, ``.`` or ``..``; no leading
    ``/``, no backslash, no NUL, no drive or home prefix. ``"."`` alone is the base itself.
    The manifest is untrusted: a path that could name something outside the workspace
    (``../../etc/passwd``) is refused here, before any file is touched.
    """
    if text == ".":
        return text
    if not text:
        raise ValueError('is empty (use "." for the base directory itself)')
    if "\\" in text or "\0" in text:
        raise ValueError(f"{text!r}: use `/` only (no backslash or NUL)")
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        raise ValueError(f"{text!r} is absolute; give a path relative to the repository")
    parts = text.split("/")
    if ".." in parts:
        raise ValueError(f"{text!r} contains `..`; paths must stay inside the repository")
    if any(p in {"", "."} for p in parts):
        clean = "/".join(p for p in parts if p not in {"", "."}) or "."
        raise ValueError(f"{text!r} is not normalised (write {clean!r})")
    return text


def clean_rel_path(text: str) -> str | None:
    """``text`` normalised (``./a//b/`` -> ``a/b``) when that passes :func:`check_rel_path`,
    else None. For detectors, which must never write a path the schema refuses."""
    parts = [p for p in text.strip().split("/") if p not in {"", "."}]
    candidate = "/".join(parts) or "."
    if text.strip().startswith("/"):
        return None
    try:
        return check_rel_path(candidate)
    except ValueError:
        return None


#: check_rel_path as a JSON Schema pattern (ECMA regex), for editors; a test keeps them equal.
REL_PATH_PATTERN = (
    r"^(?:\.|(?![A-Za-z]:|~)(?!\.\.?(?:/|$))[^/\\\x00]+(?:/(?!\.\.?(?:/|$))[^/\\\x00]+)*)$"
)
#: A relative, normalised path inside the repository or the workdir (see check_rel_path).
RelPath = Annotated[
    str,
    AfterValidator(check_rel_path),
    WithJsonSchema({"type": "string", "pattern": REL_PATH_PATTERN}),
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``"90s"``, ``"30m"``, ``"1h30m"`` or ``"2d"``.

    Raises ``ValueError`` for anything else (``DURATION_PATTERN`` is the contract).
    """
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 1h30m)")
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([smhd])", text))


#: An example value per numeric field, for the error that names the form expected.
_NUMBER_EXAMPLES = {"range": "[0, 1]"}


def _shown(value: Any) -> str:
    """What a value of the wrong type is, for an error: ``the string "0.5"``, ``true``."""
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"a {type(value).__name__}"


def _strict_number(value: Any, info: ValidationInfo) -> Any:
    """``value`` when it is a TOML number (an int or a float, never a bool), else ValueError
    saying the form expected. pydantic's lax mode would turn ``"0.5"`` or ``true`` into a
    number; a threshold written as text is a mistake to report, not to guess at."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    key = info.field_name or "value"
    example = _NUMBER_EXAMPLES.get(key, "0.5")
    raise ValueError(f"expected a number, e.g. {key} = {example}; got {_shown(value)}")


def _strict_int(value: Any, info: ValidationInfo) -> Any:
    """``value`` when it is a TOML integer (never a bool, a float nor text), else ValueError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    key = info.field_name or "value"
    raise ValueError(f"expected a whole number, e.g. {key} = 2; got {_shown(value)}")


#: A number of the manifest (thresholds, targets): an int or a float as TOML writes them.
Number = Annotated[float, BeforeValidator(_strict_number)]
#: A number that must not be negative (a tolerance). The bound comes before the validator so
#: that the JSON Schema says ``minimum``.
NonNegativeNumber = Annotated[float, Field(ge=0), BeforeValidator(_strict_number)]
#: A whole number from 1 (``k`` of ``k_of_n``).
PositiveWholeNumber = Annotated[int, Field(ge=1), BeforeValidator(_strict_int)]


def _empty() -> list[Any]:
    """A new empty list, the default of a list field. Not ``default_factory=list``:
    pydantic takes the factory's ``inspect.signature``, which for the builtin ``list``
    parses its text signature with tokenize (~0.3 ms a field, ~6 ms of every start that
    loads the manifest; measured in benchmarks/log-2026-11.md)."""
    return []


class StrictModel(BaseModel):
    """Base of every manifest model: unknown keys and NaN/inf are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)


class Paper(StrictModel):
    """Bibliographic facts of the paper the repository belongs to."""

    title: str | None = Field(None, description="The paper's title.")
    url: str | None = Field(None, description="Where the paper is (arXiv, proceedings).")
    doi: str | None = Field(None, description="DOI without the https://doi.org/ prefix.")
    path: str | None = Field(
        None,
        description="Paper file given to `rb init --paper`, relative to the repo (`../p.md`"
        " when it lies beside it; never an absolute path).",
    )
    sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the paper file: a refresh reads a paper outside the repo only"
        " when it still has these bytes.",
    )
    authors: list[str] = Field(default_factory=_empty, description="Author names, in order.")


class Project(StrictModel):
    """The repository being reproduced."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=100)] = Field(
        description="Short name of the project (the repository's)."
    )
    paper: Paper = Field(default_factory=Paper, description="The paper this repository belongs to.")
    license: str | None = Field(None, description="SPDX identifier of the code's licence.")


class NixpkgsPin(StrictModel):
    """The nixpkgs commit the flake pins (chosen from ReproBridge's pin data, never invented)."""

    release: str = Field(description="Channel name, e.g. nixos-25.05.")
    rev: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
    narHash: Annotated[str, StringConstraints(pattern=r"^sha256-[A-Za-z0-9+/]{43}=$")]
    lastModified: int = Field(
        ge=0, description="Commit time of `rev` (Unix seconds), as in flake.lock."
    )


class Environment(StrictModel):
    """What the pinned environment contains."""

    python: Annotated[str, StringConstraints(pattern=r"^3\.\d{1,2}$")] = Field(
        "3.11", description="Python major.minor; the flake uses nixpkgs `python3XY`."
    )
    cuda: Annotated[str, StringConstraints(pattern=r"^\d{1,2}\.\d$")] | None = Field(
        None, description="CUDA toolkit major.minor; absent means CPU only."
    )
    nvcc: bool = Field(False, description="The code compiles CUDA sources (.cu, cpp_extension).")
    compilers: dict[Literal["gcc"], Annotated[str, StringConstraints(pattern=r"^\d{1,2}$")]] = (
        Field(default_factory=dict, description='Compiler major versions, e.g. `{gcc = "12"}`.')
    )
    system: list[NixAttr] = Field(default_factory=_empty, description="nixpkgs attribute names.")
    nixpkgs: NixpkgsPin | None = Field(None, description="The nixpkgs commit the flake pins.")
    python_requirements: list[str] = Field(default_factory=_empty, description="PEP 508 strings.")
    python_indexes: list[str] = Field(
        default_factory=_empty,
        description="Extra package indexes (e.g. PyTorch CUDA wheel indexes).",
    )
    optional_requirements: list[str] = Field(
        default_factory=_empty,
        description="Distributions the code imports only inside a `try` that falls back when "
        "the import fails: not installed (the code runs without them); listed so a person "
        "can add one to `python_requirements` to use the feature that needs it.",
    )
    python_lock: str | None = Field(None, description="Path of the uv lock, relative to the repo.")
    pythonpath: list[
        Annotated[
            str,
            StringConstraints(
                pattern=r"^(?:\.|[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*)$"
            ),
        ]
    ] = Field(
        default_factory=_empty,
        description="Directories (relative to the repo) the launchers put on PYTHONPATH, so "
        "the repository's own package imports from any working directory.",
    )
    install_project: bool = Field(
        False,
        description="Also install the repository's own project (editable, without its "
        "dependencies) for each run, so code that reads its installed metadata "
        "(`importlib.metadata.version`) works. Its build backend runs only in the run's "
        "sandbox (`rb audit` with builds allowed); otherwise `pythonpath` alone is used and "
        "the audit's fingerprint says so.",
    )
    python_constraints: list[str] = Field(
        default_factory=_empty,
        description="PEP 508 constraints (uv's constraint-dependencies): versions of the "
        "repository's own lock for packages it does not require directly.",
    )
    exclude_newer: (
        Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")] | None
    ) = Field(
        None,
        description="Upper date bound (UTC, RFC 3339) for resolving the Python packages: uv's "
        "`exclude-newer`, from the last commit that changed the code the chosen experiments run "
        "or their requirements (else HEAD), less a 14-day release lag, never before the day "
        "the oldest Python rb provides had wheels of its core packages.",
    )
    exclude_newer_package: dict[
        Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")],
        Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")],
    ] = Field(
        default_factory=dict,
        description="Per-package date bounds that replace `exclude_newer` (uv's "
        "`exclude-newer-package`): where the bound leaves a package no release usable on "
        "the interpreter, `rb init` moves it for that package (and the packages released "
        "in lock-step with it) only; the `[derived]` sources say why.",
    )
    torch_index: Literal["pypi"] | None = Field(
        None,
        description="Where the torch family (torch, torchvision, torchaudio) is locked from. "
        "Unset: PyTorch's own index, its CPU wheels when no experiment needs a GPU, the "
        'wheels of `environment.cuda` otherwise. `"pypi"`: the default index, whose Linux '
        "wheels carry CUDA (gigabytes); `rb init` writes it when PyTorch's index could not be "
        "reached and the default index could (the `[derived]` source says so).",
    )
    python_env: Literal["uv", "nixpkgs"] = Field(
        "uv",
        description="How the flake provides Python packages: a uv venv from the lock (default) "
        "or nixpkgs python.withPackages.",
    )

    @field_validator("python_requirements", "python_constraints")
    @classmethod
    def _valid_requirements(cls, value: list[str]) -> list[str]:
        from packaging.requirements import InvalidRequirement, Requirement

        for item in value:
            try:
                Requirement(item)
            except InvalidRequirement as exc:
                raise ValueError(f"not a PEP 508 requirement: {item!r} ({exc})") from None
        return value


class Dataset(StrictModel):
    """A dataset an experiment reads."""

    path: RelPath | None = Field(
        None, description="Where the experiments read it, relative to the repo (no `..`)."
    )
    url: str | None = Field(None, description="Where to download it.")
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        None, description="Checksum the auditor verifies before a run."
    )
    name: str | None = Field(None, description="Library dataset name, e.g. torchvision CIFAR10.")
    generated: bool = Field(False, description="The code generates it; nothing to download.")
    license: str | None = Field(
        None,
        description="SPDX licence id of the data; `rb archive --with-data` carries the dataset "
        "only when it allows redistribution (e.g. CC-BY-4.0, CC0-1.0).",
    )
    description: str | None = None


class MetricSource(StrictModel):
    """Where the auditor reads a metric: a regex over the run's log, or a key in an output file."""

    regex: str | None = Field(
        None, description="First group is the value; matched on stdout+stderr."
    )
    file: RelPath | None = Field(
        None,
        description="Output file (JSON, YAML or CSV), or a TensorBoard log directory or event "
        "file, relative to the workdir (no `..`).",
    )
    key: str | None = Field(
        None,
        description="Dotted key path in `file` (CSV: column name, its last non-empty value; "
        "TensorBoard: the scalar's tag, last value logged).",
    )
    select: Literal["last", "only"] = Field(
        "last",
        description="Several regex matches: `last` takes the last one (a running log); `only` "
        "requires every match to agree (a result printed once).",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> MetricSource:
        if (self.regex is None) == (self.file is None):
            raise ValueError("give exactly one of `regex` or `file` (with `key`)")
        if self.file is not None and not self.key:
            raise ValueError("`file` needs a `key`")
        if self.regex is not None:
            try:
                compiled = re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"`regex` does not compile: {exc}") from None
            if compiled.groups < 1:
                raise ValueError("`regex` needs one capturing group for the value")
        return self


#: Where a metric's tolerance comes from (see :attr:`Metric.tolerance_source`).
ToleranceSource = Literal["paper-spread", "paper-precision", "stated"]

#: How many standard deviations of the audit's own runs widen a ``paper-precision``
#: tolerance: about 95% of runs of a normal spread fall within 2 of their mean.
SPREAD_FACTOR = 2.0


class Metric(StrictModel):
    """A number an experiment produces and the band it must fall in."""

    source: MetricSource
    target: Number | None = Field(None, description="The value the paper reports.")
    tolerance: NonNegativeNumber | None = Field(
        None, description="Absolute tolerance around `target`."
    )
    relative_tolerance: NonNegativeNumber | None = Field(None, description="Fraction of |target|.")
    tolerance_source: ToleranceSource | None = Field(
        None,
        description="Where the tolerance comes from: `paper-spread` (3 x the ± spread the "
        "paper states, at least 1% of the target), `paper-precision` (half a unit of the last "
        "digit the paper prints; an audit of n >= 2 runs adds 2 x their standard deviation) "
        "or `stated` (a person chose it). Reports print it beside the tolerance.",
    )
    min: Number | None = Field(None, description="Lowest acceptable value.")
    max: Number | None = Field(None, description="Highest acceptable value.")
    higher_is_better: bool | None = Field(None, description="Direction, for claims and reports.")
    range: list[Number] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="The values the metric can take, e.g. `[0, 1]` for an accuracy: reports "
        "clip confidence intervals to it (and say so). Never a threshold.",
    )
    provenance: str | None = Field(
        None, description="Where the target comes from (paper table, row, column)."
    )
    claimed: Number | None = Field(
        None,
        description="A value someone claimed (the guide, an agent); kept beside the measured one, never decides.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Metric:
        if (
            self.tolerance is not None or self.relative_tolerance is not None
        ) and self.target is None:
            raise ValueError("a tolerance needs a `target`")
        if (
            self.tolerance_source is not None
            and self.tolerance is None
            and self.relative_tolerance is None
        ):
            raise ValueError("`tolerance_source` needs a `tolerance` or `relative_tolerance`")
        if self.tolerance_source == "paper-precision" and self.tolerance is None:
            raise ValueError('`tolerance_source = "paper-precision"` needs an absolute `tolerance`')
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"`min` ({self.min}) is above `max` ({self.max})")
        if self.range is not None and not self.range[0] < self.range[1]:
            raise ValueError(f"`range` needs [low, high] with low < high, not {list(self.range)}")
        return self


class Stability(StrictModel):
    """How the runs of an audit must agree for the metric level to pass.

    ``all``: every run meets every threshold (the default); ``k_of_n``: at least ``k`` runs
    do; ``mean_within``: the mean over runs meets the thresholds.
    """

    policy: Literal["all", "k_of_n", "mean_within"] = Field(
        "all", description="all, k_of_n or mean_within."
    )
    k: PositiveWholeNumber | None = Field(None, description="Runs that must pass, for k_of_n.")

    @model_validator(mode="after")
    def _k_for_k_of_n(self) -> Stability:
        if (self.policy == "k_of_n") != (self.k is not None):
            raise ValueError("`k` is required with policy k_of_n and only there")
        return self


#: A dotted Python name (``jax.tree_util.tree_map``, ``float``): the only text an edit may
#: write besides a whole number, so that a manifest value can rename what the code calls but
#: never inject code of its own.
DOTTED_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,99}(?:\.[A-Za-z_][A-Za-z0-9_]{0,99}){0,9}$"


class ExpectedRaise(StrictModel):
    """A cell of an executed notebook that is meant to raise, and what."""

    cell: int = Field(ge=1, description="The cell, counted from 1 over every cell (markdown too).")
    error: Annotated[str, StringConstraints(pattern=DOTTED_NAME_PATTERN)] = Field(
        description="The exception's class name (`ValueError`); another error is not expected."
    )


class Output(StrictModel):
    """A file the experiment must write."""

    path: RelPath = Field(description="Relative to the experiment's workdir (no `..`).")
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        None, description="Expected content hash (checked in the full tier only)."
    )
    raises: list[ExpectedRaise] = Field(
        default_factory=_empty,
        description=(
            "An executed notebook's cells meant to raise (rb init: those whose saved "
            "outputs show an error), as the `raises-exception` cell tag marks them; any other "
            "cell that raised leaves the audit INCOMPLETE."
        ),
    )


class Hardware(StrictModel):
    """What the experiment needs to run as the paper ran it."""

    gpus: int = Field(0, ge=0, description="NVIDIA GPUs per run.")
    gpu_memory_gb: float | None = Field(
        None,
        gt=0,
        description=(
            "Memory per GPU, in GB (10^9 bytes). A local audit counts only GPUs with at "
            "least this much (NVML): with fewer than `gpus` of them the run does not start "
            "(hw-unavailable). Not part of a Slurm request."
        ),
    )
    cpus: int | None = Field(None, ge=1, description="CPU cores.")
    memory_gb: float | None = Field(None, gt=0, description="Host memory.")


#: What names a tier's copy of an edited file next to it (``demo.ipynb`` ->
#: ``demo_rb_smoke.ipynb`` for the smoke tier, ``demo_rb_full.ipynb`` for the full one).
DERIVED_SUFFIX = "_rb_smoke"
DERIVED_SUFFIXES = {"smoke": DERIVED_SUFFIX, "full": "_rb_full"}

#: ``jax>=0.3.16``: a distribution (normalised name) at a version or later.
AT_LEAST_PATTERN = r"^[a-z0-9](?:[a-z0-9._-]{0,98}[a-z0-9])?>=[0-9]{1,9}(?:\.[0-9]{1,9}){0,5}$"

DottedName = Annotated[str, StringConstraints(pattern=DOTTED_NAME_PATTERN)]


def derived_copy(path: str, tier: str = "smoke") -> str:
    """Where ``tier``'s copy of ``path`` (a relative POSIX path) is written: next to it, so it
    runs from the same folder (a notebook's kernel starts in the notebook's folder, a script
    imports its neighbours), under a name that is still a Python module name."""
    suffix = DERIVED_SUFFIXES.get(tier, f"_rb_{tier}")
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    copy = f"{stem}{suffix}.{ext}" if dot and stem else f"{name}{suffix}"
    return f"{folder}/{copy}" if folder else copy


def edit_place(cell: int | None, line: int) -> str:
    """Where an edit's text is, for messages: ``cell 6 line 5`` in a notebook (cells count
    from 1), ``line 5`` in a script or config file."""
    return f"cell {cell} line {line}" if cell is not None else f"line {line}"


def requirement_name(text: str) -> str | None:
    """The canonical distribution name of a PEP 508 string, or None when it does not parse
    (a path, a URL, text pip would refuse)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return None


class SourceEdit(StrictModel):
    """A piece of the experiment's own code that a tier replaces, in a copy of the file.

    Two kinds: a literal run bound lowered to a whole number (``max_iters = 2000`` -> 20),
    or a name a later release of a package removed, renamed to its replacement
    (``jax.tree_multimap`` -> ``jax.tree_util.tree_map``; ``when`` says for which versions).
    The copy (``demo.ipynb`` -> ``demo_rb_smoke.ipynb``, next to it: :func:`derived_copy`)
    is written by ``repro/derive.py`` when the tier runs, and the command runs it instead
    of the original, which is never modified. The edit applies only where the file still
    reads ``was`` at ``line``/``column`` (of ``cell``); otherwise the run stops and says so.
    """

    file: RelPath = Field(
        description="The notebook, script or JSON/YAML config file the command names as one of "
        "its words, relative to the repo (no `..`)."
    )
    cell: int | None = Field(
        None,
        ge=1,
        description="Notebooks: the cell, counting from 1 over every cell (markdown too).",
    )
    line: int = Field(ge=1, description="Line of the literal, in the cell or the file (from 1).")
    column: int = Field(ge=0, description="Characters before the literal on that line.")
    was: Annotated[str, StringConstraints(min_length=1, max_length=100)] = Field(
        description="The source text, checked before the edit (`2000`, `10**4`, "
        "`jax.tree_multimap`)."
    )
    value: int | DottedName = Field(
        description="What replaces it in the copy: a whole number (a lowered bound), or a "
        "dotted Python name (`jax.tree_util.tree_map`, `float`) for a removed name; nothing "
        "else (no calls, operators or spaces)."
    )
    when: Annotated[str, StringConstraints(pattern=AT_LEAST_PATTERN)] | None = Field(
        None,
        description="Renamed names only: `jax>=0.3.16` applies the edit only when the run's "
        "environment has that distribution at that version or later (`repro/derive.py` reads "
        "the installed version); otherwise the original text runs.",
    )
    code: str | None = Field(
        None, description="The line as it reads, for the reader (`max_iters = 2000`)."
    )

    @field_validator("value", mode="before")
    @classmethod
    def _value_kind(cls, value: Any) -> Any:
        # Checked before pydantic's own union check, whose two-branch message would not say
        # what an edit may write.
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError("must be a whole number or a dotted Python name")
        if isinstance(value, str) and not re.fullmatch(DOTTED_NAME_PATTERN, value):
            raise ValueError(
                f"{value!r} is not a dotted Python name (such as `jax.tree_util.tree_map`); an "
                "edit writes a whole number or a name, never other code"
            )
        return value

    @field_validator("was", "code")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError("must be one line")
        return value

    @model_validator(mode="after")
    def _rename_consistent(self) -> SourceEdit:
        if self.renames:
            if not re.fullmatch(DOTTED_NAME_PATTERN, self.was):
                raise ValueError("a renaming edit (`value` a name) must replace a name (`was`)")
        elif self.when is not None:
            raise ValueError("`when` applies to renaming edits only (`value` a dotted name)")
        return self

    @property
    def renames(self) -> bool:
        """Whether the edit renames a removed name (``value`` a dotted name), rather than
        lowering a bound (``value`` a whole number)."""
        return isinstance(self.value, str)


class Tier(StrictModel):
    """A setting of an experiment: `full` is what the paper ran, `smoke` a CPU-minutes check.

    Every field overrides the experiment's own; `params` are merged key by key. A tier is
    *bounded* when it shortens the run (``params``, ``args`` or ``edits`` that lower a
    bound); a smoke tier with none of them is the full command stopped at its ``timeout``.
    """

    params: dict[ParamName, Scalar] = Field(
        default_factory=dict, description="Overrides of the experiment's params."
    )
    seeds: list[int] | None = Field(
        None, description="Seeds of this tier (default: the experiment's)."
    )
    timeout: Duration | None = Field(None, description="Wall-clock limit of this tier.")
    args: list[Annotated[str, StringConstraints(min_length=1, max_length=500)]] = Field(
        default_factory=_empty,
        description="Arguments appended to the command in this tier, in the project's own "
        "syntax: `--trainer.max_iters=20`, hydra `trainer.max_epochs=2`.",
    )
    edits: list[SourceEdit] = Field(
        default_factory=_empty,
        description="Literals of the notebook, script or config file the command names that "
        "this tier replaces (`max_iters = 2000` -> 20, `for k in range(100)` -> 20, "
        '`"epochs": 30` -> 2, `optimize(f, 200, b)` for `def optimize(func, num_iter, bounds)` '
        "-> 20), in a copy written next to it when the tier runs; the command names the copy. For loops bounded in code or a config file rather than on the "
        "command line. Also names the pinned packages removed, renamed to their replacement "
        "(`jax.tree_multimap` -> `jax.tree_util.tree_map`, with `when`), in every tier that "
        "runs. One file per tier.",
    )
    metrics: dict[MetricName, Metric] | None = Field(
        None,
        description="Metrics with thresholds for this tier (they replace the experiment's); "
        "absent in smoke: values must exist and be finite, nothing is judged (verdict "
        "INCOMPLETE).",
    )
    description: str | None = None

    @model_validator(mode="after")
    def _edits_one_file(self) -> Tier:
        files = sorted({e.file for e in self.edits})
        if len(files) > 1:
            raise ValueError(
                f"`edits` change one file, the one the command runs (not {', '.join(files)})"
            )
        return self

    @property
    def bounded(self) -> bool:
        """Whether the tier shortens the run (``params``, ``args`` or ``edits`` that lower a
        bound; an edit that renames a removed name shortens nothing)."""
        return bool(self.params or self.args or any(not e.renames for e in self.edits))

    def derived(self, tier: str = "smoke") -> tuple[str, str] | None:
        """(the edited file, the copy tier ``tier`` runs) when the tier has ``edits``."""
        if not self.edits:
            return None
        return self.edits[0].file, derived_copy(self.edits[0].file, tier)


class Experiment(StrictModel):
    """One experiment: a command, its parameters and seeds, and what it must produce."""

    description: str | None = None
    command: str = Field(
        description="Shell words; `{seed}` and `{param}` placeholders are filled by the launcher."
    )
    workdir: RelPath = Field(
        ".", description="Directory the command runs in, relative to the repo (no `..`)."
    )
    setup: list[str] = Field(
        default_factory=_empty,
        description="Commands run first, in order, in the same workdir and environment, each "
        "of which must succeed (a script the README runs before this one to write the file it "
        "reads); no `{placeholders}`. The tier's timeout covers them and the command.",
    )
    kind: Literal["script", "module", "notebook", "make", "shell"] = Field(
        "script", description="What the command runs (informational)."
    )
    params: dict[ParamName, Scalar] = Field(
        default_factory=dict,
        description="Values of the command's `{name}` placeholders (full tier).",
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0], description="Seeds to run; `{seed}` in the command."
    )
    timeout: Duration = Field("1h", description="Wall-clock limit: 90s, 30m, 2h, 1h30m, 2d.")
    hardware: Hardware = Field(default_factory=Hardware, description="What one run needs.")
    network: bool = Field(
        False, description="Whether the run may use the network (else offline switches are set)."
    )
    datasets: list[ExpId] = Field(
        default_factory=_empty, description="Ids of `[datasets.<id>]` it reads."
    )
    outputs: list[Output] = Field(default_factory=_empty, description="Files the run must write.")
    metrics: dict[MetricName, Metric] = Field(
        default_factory=dict, description="Numbers the run produces, with thresholds."
    )
    tiers: dict[Literal["full", "smoke"], Tier] = Field(
        default_factory=dict, description="`full`: what the paper ran; `smoke`: CPU minutes."
    )
    stability: Stability = Field(
        default_factory=Stability, description="How runs of an audit must agree."
    )
    unbounded: str | None = Field(
        None,
        description="Why the command would not end on its own and which flag bounds it.",
    )
    main: bool = Field(
        False,
        description="The experiment an audit runs when none is named (with those the claims "
        "compare; `--all` runs every one): *the* experiment of the repository (rb init marks "
        "the best-ranked one that runs on a CPU from the repository's own data). Without any "
        "and without claims, an audit runs every experiment with the tier.",
    )

    @field_validator("command")
    @classmethod
    def _placeholders_known(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("`command` is empty")
        return value

    @field_validator("setup")
    @classmethod
    def _setup_plain(cls, value: list[str]) -> list[str]:
        for command in value:
            if not command.strip():
                raise ValueError("a `setup` command is empty")
            if re.search(r"\{[A-Za-z_][A-Za-z0-9_]*\}", command):
                raise ValueError(f"`setup` command {command!r} has a placeholder")
        return value

    @model_validator(mode="after")
    def _placeholders_defined(self) -> Experiment:
        names = set(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", self.command))
        missing = sorted(names - set(self.params) - {"seed"})
        if missing:
            raise ValueError(f"`command` uses {{{missing[0]}}} but `params` has no {missing[0]!r}")
        return self

    def tier(self, name: Literal["full", "smoke"]) -> Tier:
        """The tier named ``name``; a missing `full` tier is the experiment itself.

        Raises KeyError for a missing `smoke` tier.
        """
        if name == "full":
            return self.tiers.get("full") or Tier()
        return self.tiers[name]


TierName = Literal["full", "smoke"]


def _full_only() -> list[TierName]:
    return ["full"]


class Claim(StrictModel):
    """A comparison the paper makes between experiments (conclusion level)."""

    expr: str = Field(description="e.g. `method.accuracy > baseline.accuracy`.")
    provenance: str | None = None
    tiers: list[TierName] = Field(
        default_factory=_full_only,
        min_length=1,
        description="Tiers whose runs the claim is about (default: full only; in any other "
        "tier it is not applicable, never a pass).",
    )


class Derivation(StrictModel):
    """Where a derived value came from, and a digest of the value rb wrote.

    On re-init a value whose current digest differs from ``digest`` was edited by a person
    and is kept.
    """

    sources: list[str] = Field(description="file:line evidence, paper tables, or rules applied.")
    digest: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]
    confidence: Literal["high", "medium", "low"] = "high"


class Manifest(StrictModel):
    """The whole reprobridge.toml."""

    schema_: Literal[1] = Field(1, alias="schema", description="Manifest schema version.")
    project: Project = Field(description="The repository and its paper.")
    environment: Environment = Field(
        default_factory=Environment, description="The pinned environment."
    )
    datasets: dict[ExpId, Dataset] = Field(default_factory=dict, description="Datasets by id.")
    experiments: dict[ExpId, Experiment] = Field(
        default_factory=dict, description="Experiments by id."
    )
    claims: list[Claim] = Field(
        default_factory=_empty, description="Comparisons between experiments."
    )
    derived: dict[str, Derivation] = Field(
        default_factory=dict,
        description="Provenance of every value rb derived, keyed by dotted path.",
    )

    @model_validator(mode="after")
    def _references_resolve(self) -> Manifest:
        for exp_id, exp in self.experiments.items():
            for ds in exp.datasets:
                if ds not in self.datasets:
                    raise ValueError(f"experiments.{exp_id}.datasets names unknown dataset {ds!r}")
        return self


def is_finite_tree(value: Any) -> bool:
    """True when no float anywhere in ``value`` (nested dicts/lists) is NaN or infinite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(is_finite_tree(v) for v in value.values())
    if isinstance(value, list):
        return all(is_finite_tree(v) for v in value)
    return True
