"""The one exception hierarchy of ReproBridge.

Library code raises these and never prints or exits; ``reprobridge.cli`` is the single
place that turns them into a one-line ``error: ...`` message (plus an optional hint line)
and the exit code of the class::

    ReproBridgeError                    exit 1x  (never raised bare)
    ├── ConfigError                     2   an operator setting is invalid (user config
    │                                       file, RB_* variable), like a bad flag
    ├── ManifestError                   3   reprobridge.toml missing, malformed, invalid
    │   ├── ManifestNotFoundError
    │   ├── SchemaVersionError
    │   └── SuiteError          an `rb bench` suite file is missing, malformed, invalid
    ├── BenchInterrupted                130/143  rb bench stopped by a signal (resumable)
    ├── RepositoryError                 4   the target is not a usable repository
    │   ├── NotAGitRepositoryError
    │   ├── EmptyRepositoryError
    │   └── UnsafePathError             symlink or path that leaves the repository
    ├── DetectionError                  5   a source of knowledge cannot be read (malformed
    │                                       requirements, YAML, setup.py, too large, binary)
    ├── RenderError                     6   an artifact cannot be rendered (unfilled
    │                                       placeholder, no nixpkgs pin fits)
    ├── CommandFailed                   7   a subprocess failed or timed out
    ├── RecoveryError                   8   the recovery agent failed (budget, API)
    ├── AuditError                      9
    │   └── UnknownExperimentError      2   an experiment named on the command line the
    │                                       manifest does not have (a usage error)
    ├── ArchiveError                    10
    ├── MachineError                    11  this machine lacks something (nix, uv, disk)
    └── WriteError                      12  an artifact could not be written; nothing was changed

Exit codes 0 (success, an audit verdict PASS), 1 (an audit verdict FAIL), 2 (command-line
usage, click's own) and 20 (an audit verdict INCOMPLETE: nothing failed, but something was
not judged) are not errors of this tree (``EXIT_*`` below). An audit verdict NOT JUDGED (this
machine could not judge the paper: Nix too old or offline for the pin, no GPU, not the
manifest's Python) exits 11, MachineError's code, as a machine problem found before the
bundle would. Every error carries the ``path`` and ``field`` it is about
when there is one, so messages name the file and the key a person has to fix.
"""

from __future__ import annotations

from typing import ClassVar

#: Exit statuses of an audit's overall verdict (``rb audit``, ``rb run``, ``rb demo``).
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
#: Nothing failed, but not everything was judged (no metric, a metric without a threshold,
#: a smoke tier without thresholds, an undecided claim). Outside the error band 3-13.
EXIT_INCOMPLETE = 20
#: This machine lacks something (MachineError's code): also the verdict NOT JUDGED, whose
#: bundle says what this machine could not do, never anything about the paper.
EXIT_MACHINE = 11
VERDICT_EXIT = {
    "PASS": EXIT_PASS,
    "FAIL": EXIT_FAIL,
    "INCOMPLETE": EXIT_INCOMPLETE,
    "NOT JUDGED": EXIT_MACHINE,
}


class ReproBridgeError(Exception):
    """Root of every error ReproBridge raises on purpose.

    ``message`` is one line; ``path`` and ``field`` (both optional) are prefixed to it as
    ``path: field: message``; ``hint`` is a second line telling the user what to do.
    """

    exit_code: ClassVar[int] = 13

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = " ".join(message.split())  # one line, always
        self.path = path
        self.field = field
        self.hint = hint

    def __str__(self) -> str:
        parts = [p for p in (self.path, self.field) if p]
        return ": ".join([*parts, self.message])

    def exit_status(self) -> int:
        """The process exit status for this error (the class's code unless overridden)."""
        return self.exit_code


class ConfigError(ReproBridgeError):
    """An operator setting is invalid: the user config file (``path`` is the file) or an
    ``RB_*`` environment variable (``path`` is the variable's name). Exit 2, as a bad flag."""

    exit_code = 2


class ManifestError(ReproBridgeError):
    """The manifest (reprobridge.toml) is missing, not valid TOML, or not a valid manifest."""

    exit_code = 3


class ManifestNotFoundError(ManifestError):
    """No reprobridge.toml where one is needed."""


class SchemaVersionError(ManifestError):
    """The manifest declares a schema version this release does not know."""


class SuiteError(ManifestError):
    """An `rb bench` suite file is missing, not valid TOML, or not a valid suite (like the
    manifest, an input a person wrote; same exit code)."""


class BenchInterrupted(ReproBridgeError):
    """`rb bench` was asked to stop (SIGINT/SIGTERM): the running repositories were stopped,
    the finished ones keep their records; exit 130 or 143, as shells report signals."""

    def __init__(self, signum: int) -> None:
        super().__init__(
            f"interrupted by signal {signum}; finished repositories keep their records",
            hint="run the same command again to resume",
        )
        self.signum = signum

    def exit_status(self) -> int:
        return 128 + self.signum


class RepositoryError(ReproBridgeError):
    """The target directory cannot be used as a repository."""

    exit_code = 4


class NotAGitRepositoryError(RepositoryError):
    """The target is not inside a git work tree."""


class EmptyRepositoryError(RepositoryError):
    """The repository has no files to recover anything from."""


class UnsafePathError(RepositoryError):
    """A path (usually a symlink) points outside the repository."""


class DetectionError(ReproBridgeError):
    """A source of knowledge (requirements, setup.py, YAML, ...) cannot be read or parsed."""

    exit_code = 5


class RenderError(ReproBridgeError):
    """An artifact cannot be rendered from the manifest."""

    exit_code = 6


class CommandFailed(ReproBridgeError):
    """A subprocess exited non-zero or timed out.

    ``argv`` and ``returncode`` are kept for evidence; ``stderr_tail`` is the last lines.
    """

    exit_code = 7

    def __init__(
        self,
        message: str,
        *,
        argv: list[str] | None = None,
        returncode: int | None = None,
        stderr_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.argv = argv or []
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class RecoveryError(ReproBridgeError):
    """The recovery agent could not complete (budget exhausted, API error)."""

    exit_code = 8


class AuditError(ReproBridgeError):
    """The auditor could not run or judge (not: a verdict that failed)."""

    exit_code = 9


class UnknownExperimentError(AuditError):
    """An experiment named on the command line that the manifest does not have: a usage
    error (exit 2, like a bad flag), not an audit that could not run."""

    exit_code = 2


class ArchiveError(ReproBridgeError):
    """An archive cannot be built, verified or unpacked."""

    exit_code = 10


class MachineError(ReproBridgeError):
    """This machine lacks a tool or resource the command needs."""

    exit_code = EXIT_MACHINE


class WriteError(ReproBridgeError):
    """Artifacts could not be written; the repository was left as it was."""

    exit_code = 12
