"""The nix executor: `nix run .#reproduce-<exp>` in the repository (pinned environment)."""

from __future__ import annotations

import re
from pathlib import Path

from reprobridge import _proc
from reprobridge.constants import LOGS_DIR
from reprobridge.errors import CommandFailed, MachineError
from reprobridge.execute.base import RunOutcome, RunRequest

#: nixpkgs from 2025-08 on refuses older Nix (lib/minfeatures.nix).
MIN_NIX = (2, 18)
NIX_FLAGS = ["--extra-experimental-features", "nix-command flakes", "--no-update-lock-file"]


def nix_version() -> tuple[int, int] | None:
    """(major, minor) of the `nix` on PATH, or None."""
    if not _proc.which("nix"):
        return None
    try:
        out = _proc.run(["nix", "--version"], timeout=30).text
    except (CommandFailed, MachineError):
        return None
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


class NixExecutor:
    """Runs the flake app, which runs the launcher and then the threshold check."""

    name = "nix"

    def __init__(self, root: Path) -> None:
        self.root = root

    def unavailable(self) -> str | None:
        version = nix_version()
        if version is None:
            return "nix is not installed"
        if version < MIN_NIX:
            return (
                f"nix {version[0]}.{version[1]} is older than 2.18, which current nixpkgs requires"
            )
        return None

    def run(self, request: RunRequest, *, echo: bool = False) -> RunOutcome:
        args = ["--tier", request.tier] + (
            ["--seed", str(request.seed)] if request.seed is not None else []
        )
        result = _proc.run(
            ["nix", *NIX_FLAGS, "run", f".#reproduce-{request.experiment}", "--", *args],
            cwd=self.root,
            timeout=None,
            check=False,
        )
        log = self.root / LOGS_DIR / request.experiment / f"{request.tier}-nix.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(result.stdout + result.stderr)
        if echo:
            print(result.text)
        return RunOutcome(self.name, result.returncode, log, result.text, hermetic=True)
