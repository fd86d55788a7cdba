"""`rb archive --with-closure`: the devShell's Nix closure as a file binary cache.

Contract of :func:`export_closure`: after it returns, ``dest`` is a Nix binary cache
(``nix-cache-info``, ``*.narinfo``, ``nar/``) holding

1. the flake's source and every locked input (``nix flake archive --to file://dest``):
   Nix substitutes a locked input by its ``narHash`` from a cache, so evaluation needs no
   network;
2. the realised development environment of the default devShell and its whole runtime
   closure (``nix develop --profile P -c true``, then ``nix copy --to file://dest P``):
   ``nix develop`` finds that environment's store path in the cache instead of building.

Used offline from an unpacked archive (documented in docs/archive.md)::

    nix develop --option substituters "file://$PWD/nix-cache" --option require-sigs false

``require-sigs false`` because ``nix copy`` does not sign; the archive's MANIFEST.json
(and its signature, when present) vouches for the cache's bytes. All calls go through
:mod:`reprobridge._proc`; a failure is an ArchiveError naming the command.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from reprobridge import _proc
from reprobridge.errors import ArchiveError, CommandFailed, MachineError

NIX_FLAGS = ("--extra-experimental-features", "nix-command flakes")


def _overrides(overrides: Mapping[str, str] | None) -> list[str]:
    out: list[str] = []
    for name, url in sorted((overrides or {}).items()):
        out += ["--override-input", name, url]
    return out


def export_closure(
    root: Path,
    dest: Path,
    *,
    nix: str = "nix",
    overrides: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 3600,
) -> str:
    """Fill ``dest`` (created) with the flake inputs and devShell closure; return the
    store path of the development environment. See the module doc."""
    dest.mkdir(parents=True, exist_ok=True)
    url = f"file://{dest.resolve()}"
    flake = str(Path(root).resolve())
    over = _overrides(overrides)
    run_env = dict(env) if env is not None else dict(os.environ)
    try:
        _proc.run(
            [
                nix,
                *NIX_FLAGS,
                "flake",
                "archive",
                "--no-write-lock-file",
                *over,
                "--to",
                url,
                flake,
            ],
            env=run_env,
            timeout=timeout,
        )
        with tempfile.TemporaryDirectory(prefix="rb-closure-") as tmp:
            profile = Path(tmp) / "devshell"
            _proc.run(
                [
                    nix,
                    *NIX_FLAGS,
                    "develop",
                    "--no-write-lock-file",
                    *over,
                    "--profile",
                    str(profile),
                    flake,
                    "-c",
                    "true",
                ],
                env=run_env,
                timeout=timeout,
            )
            store_path = os.path.realpath(profile)
            _proc.run(
                [nix, *NIX_FLAGS, "copy", "--to", url, store_path], env=run_env, timeout=timeout
            )
    except (CommandFailed, MachineError) as exc:
        raise ArchiveError(
            f"could not export the Nix closure: {exc}",
            hint="check that `nix develop` works here, or archive without --with-closure",
        ) from exc
    return store_path
