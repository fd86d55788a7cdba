"""`rb archive --with-closure`: the devShell's Nix closure as a file binary cache.

Contract of :func:`export_closure`: after it returns, ``dest`` is a Nix binary cache
(``nix-cache-info``, ``*.narinfo``, ``nar/``) holding

1. the flake's source and every locked input (``nix flake archive --to file://dest``):
   Nix substitutes a locked input by its ``narHash`` from a cache, so evaluation needs no
   network;
2. the realised development environment of the default devShell and its whole runtime
   closure (``nix develop --profile P -c true``, then ``nix copy --to file://dest P``):
   ``nix develop`` finds that environment's store path in the cache instead of building.

The cache is signed: a fresh Nix signing key (``nix-store --generate-binary-cache-key
rb-archive-<commit12>``) signs every ``.narinfo`` as it is written (the ``secret-key``
parameter of the binary cache store); the secret half is deleted when the export ends and
the public half is written to ``dest/rb-signing-key.pub``, which the archive's
MANIFEST.json (and its DSSE signature, when present) covers; ``rb unpack`` prints it. Used
offline from an unpacked archive (documented in docs/archive.md)::

    nix develop --option substitute true --option substituters "file://$PWD/nix-cache" \\
        --option trusted-public-keys "$(cat nix-cache/rb-signing-key.pub)"

(``substitute true``: Nix turns substitution off when it finds no network interface,
file caches included). The cache serves the Nix version that made it: ``nix develop``'s
environment derivation embeds that version's ``get-env.sh``.

with Nix checking every path's signature (``require-sigs`` stays on). All calls go
through :mod:`reprobridge._proc`; a failure is an ArchiveError naming the command.

The flake is the repository's, so these calls are the audit's Nix calls in all but name:
each gets :func:`~reprobridge.audit.nixcalls.nix_env` (an allowlist, never the
operator's other variables) and :data:`~reprobridge.audit.nixcalls.SANDBOXED_BUILDS`, and
nothing is built where Nix would ignore those (:func:`~reprobridge.audit.nixcalls.require_sandbox`).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from reprobridge import _machine, _proc
from reprobridge.audit.nixcalls import SANDBOXED_BUILDS, nix_env, require_sandbox
from reprobridge.errors import ArchiveError, CommandFailed, MachineError

NIX_FLAGS = ("--extra-experimental-features", "nix-command flakes", *SANDBOXED_BUILDS)


def _overrides(overrides: Mapping[str, str] | None) -> list[str]:
    out: list[str] = []
    for name, url in sorted((overrides or {}).items()):
        out += ["--override-input", name, url]
    return out


#: The cache's public signing key, inside the cache (``rb unpack`` prints it).
PUBLIC_KEY_FILE = "rb-signing-key.pub"


_KEY_RE = re.compile(r"^[A-Za-z0-9._+-]{1,100}:[A-Za-z0-9+/]{43}=$")


def cache_public_key(cache: Path) -> str | None:
    """The public signing key an unpacked ``nix-cache/`` carries, or None (no cache, no
    key file, or text that is not a Nix ed25519 public key: archive content is printed
    only when it has that exact shape)."""
    path = cache / PUBLIC_KEY_FILE
    if path.is_symlink() or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    return text if _KEY_RE.match(text) else None


def _signing_key(nix: str, name: str, tmp: Path, env: Mapping[str, str]) -> tuple[Path, str]:
    """A fresh Nix signing key pair: ``(secret key file, public key text)``. The secret
    key lives in ``tmp`` only (deleted with it): it signs this cache and nothing else."""
    secret, public = tmp / "signing.sec", tmp / "signing.pub"
    store = str(Path(_proc.which(nix) or nix).with_name("nix-store"))
    if not Path(store).exists():
        store = "nix-store"
    _proc.run(
        [store, "--generate-binary-cache-key", name, str(secret), str(public)],
        env=env,
        timeout=120,
    )
    return secret, public.read_text(encoding="utf-8").strip()


def export_closure(
    root: Path,
    dest: Path,
    *,
    nix: str = "nix",
    overrides: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 3600,
    key_name: str = "rb-archive",
) -> str:
    """Fill ``dest`` (created) with the flake inputs and devShell closure, signed by a
    fresh key whose public half is written to ``dest/rb-signing-key.pub``; return the
    store path of the development environment. See the module doc. ``env`` (default: this
    process's) is passed through the :func:`~reprobridge.audit.nixcalls.nix_env` allowlist."""
    dest.mkdir(parents=True, exist_ok=True)
    flake = str(Path(root).resolve())
    over = _overrides(overrides)
    run_env = nix_env(env)
    keys = tempfile.TemporaryDirectory(prefix="rb-closure-key-")
    try:
        require_sandbox(
            _machine.default_run,
            nix,
            "set `sandbox = true` for Nix, or archive without --with-closure",
        )
        secret, public = _signing_key(nix, key_name, Path(keys.name), run_env)
        (dest / PUBLIC_KEY_FILE).write_text(public + "\n", encoding="utf-8")
        # The binary cache store signs every narinfo it writes with ``secret-key``.
        url = f"file://{dest.resolve()}?secret-key={secret}"
        return _export(nix, flake, over, url, run_env, timeout)
    except (CommandFailed, MachineError) as exc:
        raise ArchiveError(
            f"could not export the Nix closure: {exc}",
            hint="check that `nix develop` works here, or archive without --with-closure",
        ) from exc
    finally:
        keys.cleanup()


def _export(
    nix: str, flake: str, over: list[str], url: str, run_env: dict[str, str], timeout: float
) -> str:
    """The three nix calls of the module doc, writing to the store ``url``."""
    _proc.run(
        [
            nix,
            *NIX_FLAGS,
            "flake",
            "archive",
            "--no-update-lock-file",
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
                "--no-update-lock-file",
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
        _proc.run([nix, *NIX_FLAGS, "copy", "--to", url, store_path], env=run_env, timeout=timeout)
    return store_path
