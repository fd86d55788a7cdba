"""The bench suite file: which repositories to bench and what a person verified by hand.

Contract: :func:`load_suite` returns a validated :class:`Suite` or raises
:class:`~reprobridge.errors.SuiteError` naming the file and the field (``repo.3.commit``)
in one line. The file is TOML::

    [bench]                      # optional
    name = "corpus"
    time_limit_s = 480

    [[repo]]
    name = "makemore"            # unique; names the copy, the record and the table row
    path = "/work/corpus/makemore"   # a local checkout (its committed HEAD is copied) ...
    url = "https://github.com/karpathy/makemore"   # ... or a git URL (cloned) ...
    commit = "988aa59e..."       # ... at this commit (required with url)
    shape = "single-file trainer"
    cpu_runnable = true          # whether a person ran the experiment on a CPU
    verified = "what was checked by hand"
    dependencies = ["torch"]     # packages the experiment needs (checked by hand)
    notes = "snapshot lacks data/*.pt"   # optional: a limit of the benched copy, reported
    [repo.expected]              # optional: metric name -> value (and tolerance)
    test_loss = { value = 2.1, tolerance = 0.3 }

``path`` wins when it exists (relative paths are relative to the suite file); otherwise
``url`` and ``commit`` are cloned, so one suite serves a machine with local mirrors and one
without.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reprobridge.errors import SuiteError
from reprobridge.manifest.validation import first_problem

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class Expected(BaseModel):
    """A metric value a person measured or the paper reports; met within ``tolerance``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    tolerance: float = Field(default=0.0, ge=0.0)
    #: Restrict to one experiment id (default: any experiment that reports the metric).
    experiment: str | None = None

    @model_validator(mode="after")
    def _finite(self) -> Expected:
        if not (math.isfinite(self.value) and math.isfinite(self.tolerance)):
            raise ValueError("value and tolerance must be finite numbers")
        return self

    def met_by(self, measured: float) -> bool:
        """Whether ``measured`` lies within ``value ± tolerance``."""
        return abs(measured - self.value) <= self.tolerance


class RepoEntry(BaseModel):
    """One repository of the suite."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    path: str | None = None
    url: str | None = None
    commit: str | None = None
    shape: str = ""
    cpu_runnable: bool = True
    verified: str = ""
    dependencies: list[str] = Field(default_factory=list)
    expected: dict[str, Expected] = Field(default_factory=dict)
    notes: str = ""

    @model_validator(mode="after")
    def _source(self) -> RepoEntry:
        if not _NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r} must be letters, digits, '.', '_' or '-' (a file name)"
            )
        if self.path is None and self.url is None:
            raise ValueError("needs `path` (a local checkout) or `url` and `commit`")
        if self.url is not None and self.commit is None:
            raise ValueError("`url` needs `commit` (a benchmark pins what it measured)")
        if self.commit is not None and not _COMMIT.match(self.commit):
            raise ValueError(f"commit {self.commit!r} is not a hex commit id")
        return self


class BenchSettings(BaseModel):
    """Suite-wide defaults (the command line overrides them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    time_limit_s: float = Field(default=600.0, gt=0)
    description: str = ""


class Suite(BaseModel):
    """A whole suite file."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    bench: BenchSettings = Field(default_factory=BenchSettings)
    repos: list[RepoEntry] = Field(alias="repo", min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Suite:
        seen: set[str] = set()
        for entry in self.repos:
            if entry.name.lower() in seen:
                raise ValueError(f"two repositories are named {entry.name!r}")
            seen.add(entry.name.lower())
        return self


def load_suite(path: Path) -> tuple[Suite, Path]:
    """Read and validate the suite at ``path``; return it and the directory that relative
    ``path`` entries are resolved against."""
    shown = str(path)
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise SuiteError("no such file", path=shown) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"cannot be read: {exc}", path=shown) from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"is not valid TOML: {exc}", path=shown) from None
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise _one_line(exc, shown) from None
    return suite, path.resolve().parent


def resolve_source(entry: RepoEntry, base: Path) -> Path | None:
    """The local checkout to copy for ``entry``: its ``path`` when that directory exists,
    else None (clone ``url`` at ``commit``)."""
    if entry.path is None:
        return None
    local = Path(entry.path).expanduser()
    local = local if local.is_absolute() else base / local
    return local if local.is_dir() else None


def _one_line(exc: ValidationError, path: str) -> SuiteError:
    problem = first_problem(exc, Suite)
    hint = f"known keys here: {', '.join(sorted(problem.known))}" if problem.known else None
    return SuiteError(problem.message, path=path, field=problem.field, hint=hint)
