"""The executor contract and the choice between backends."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from reprobridge.errors import MachineError

Backend = Literal["auto", "nix", "host"]


@dataclass(frozen=True)
class RunRequest:
    """One run: which experiment of the manifest at ``root``, which tier and seed."""

    root: Path
    experiment: str
    tier: Literal["full", "smoke"] = "full"
    seed: int | None = None


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: the launcher's exit status, the check's, and where the log is."""

    backend: str
    returncode: int
    log_path: Path
    check_output: str
    hermetic: bool

    @property
    def passed(self) -> bool:
        return self.returncode == 0


class Executor(Protocol):
    """Runs one experiment to completion.

    Contract: ``unavailable()`` returns None when the executor can run here, else a
    one-line reason; ``run`` blocks until the launcher and the threshold check finished,
    streams nothing to the caller's terminal unless ``echo`` is set, and never raises for
    a failing experiment (that is a RunOutcome with a non-zero returncode).
    """

    name: str

    def unavailable(self) -> str | None: ...

    def run(self, request: RunRequest, *, echo: bool = False) -> RunOutcome: ...


def choose_executor(backend: Backend, root: Path) -> tuple[Executor, str | None]:
    """The executor for ``backend`` and, when ``auto`` fell back to the host, why.

    ``auto`` prefers nix when it is recent enough for current nixpkgs; ``nix`` raises
    MachineError when it is not.
    """
    from reprobridge.execute.host import HostExecutor
    from reprobridge.execute.nix import NixExecutor

    reason: str | None = None
    if backend in ("nix", "auto"):
        nix = NixExecutor(root)
        reason = nix.unavailable()
        if reason is None:
            return nix, None
        if backend == "nix":
            raise MachineError(f"the nix backend cannot run here: {reason}", hint="see `rb doctor`")
    return HostExecutor(root), reason
