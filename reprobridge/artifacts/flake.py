"""flake.nix and flake.lock for a target repository.

The flake is the fixed file ``reprobridge/templates/flake.nix``, which is also what ``nix
flake init -t github:reprobridge/reprobridge`` copies: it reads ``reprobridge.toml`` with
``builtins.fromTOML`` and derives the devShell and one ``apps.<system>.reproduce-<exp>`` per
experiment from it. Python changes exactly one line, the nixpkgs input URL (flake inputs
must be literals), so for the template's own pin ``rb init`` and ``nix flake init`` write the
same bytes. The file carries no rb version for the same reason.

The renderers are pure and deterministic: the same manifest and version give the same
bytes. :func:`parse_flake_lock` reads a lock's pins back, for the audit's fingerprint and
the report.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from reprobridge.constants import FLAKE_FILE, MANIFEST_FILE
from reprobridge.errors import RenderError
from reprobridge.manifest.schema import Manifest, NixpkgsPin

TEMPLATE = "flake.nix"
_URL_LINE = re.compile(r'^(  inputs\.nixpkgs\.url = )"[^"\n]*";$', re.M)


def load_template(name: str) -> str:
    """The text of ``reprobridge/templates/<name>`` (package data).

    Raises :class:`RenderError` when the file is not shipped with the package.
    """
    try:
        return resources.files("reprobridge").joinpath("templates", name).read_text("utf-8")
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise RenderError(
            f"template {name!r} is missing from the installed package",
            hint="reinstall reprobridge; templates are package data",
        ) from exc


def _pin(manifest: Manifest) -> NixpkgsPin:
    pin = manifest.environment.nixpkgs
    if pin is None:
        raise RenderError(
            "no nixpkgs pin: the flake needs environment.nixpkgs (rev and narHash)",
            path=MANIFEST_FILE,
            field="environment.nixpkgs",
            hint="rb init chooses a pin from its pin data; never invent a rev or narHash",
        )
    return pin


def nixpkgs_url(pin: NixpkgsPin) -> str:
    """The flake input URL for ``pin``: by rev. The narHash lives in ``flake.lock``.

    Why not ``?narHash=`` in the URL too: Nix versions disagree on whether that narHash
    belongs in the lock's ``original`` (2.8 drops it, 2.26 keeps it), and a lock whose
    ``original`` differs from the URL is stale, so Nix re-fetches and rewrites it. Without
    it, one lock file is current for every Nix (checked: ``nix flake lock`` with 2.8 and
    2.26 leaves :func:`render_flake_lock`'s bytes unchanged), and the locked narHash is
    still checked when the source is fetched.
    """
    return f"github:NixOS/nixpkgs/{pin.rev}"


def render_flake(manifest: Manifest) -> str:
    """The text of ``flake.nix`` for ``manifest`` (it carries no rb version, so
    ``nix flake init`` and ``rb init`` write the same bytes).

    Raises :class:`RenderError` when the manifest has no nixpkgs pin, or when the template
    lost its one nixpkgs input line.
    """
    pin = _pin(manifest)
    text, count = _URL_LINE.subn(
        lambda m: f'{m.group(1)}"{nixpkgs_url(pin)}";', load_template(TEMPLATE)
    )
    if count != 1:
        raise RenderError(f"{FLAKE_FILE} template: expected one nixpkgs input line, found {count}")
    return text


def render_flake_lock(manifest: Manifest) -> str:
    """The text of ``flake.lock`` locking the nixpkgs input at the manifest's pin.

    Formatted as Nix writes it (2-space indent, sorted keys, trailing newline), so
    ``nix flake lock`` on an unchanged flake leaves the file byte-identical.

    ``original`` must equal what Nix parses from the input URL, otherwise Nix treats the
    lock as stale and re-fetches: for ``github:NixOS/nixpkgs/<rev>`` that is ``{type,
    owner, repo, rev}``. The release branch therefore is not in the lock (a ``ref`` there
    would contradict the URL); ``environment.nixpkgs.release`` in the manifest records it.
    """
    pin = _pin(manifest)
    lock = {
        "nodes": {
            "nixpkgs": {
                "locked": {
                    "lastModified": pin.lastModified,
                    "narHash": pin.narHash,
                    "owner": "NixOS",
                    "repo": "nixpkgs",
                    "rev": pin.rev,
                    "type": "github",
                },
                "original": {
                    "owner": "NixOS",
                    "repo": "nixpkgs",
                    "rev": pin.rev,
                    "type": "github",
                },
            },
            "root": {"inputs": {"nixpkgs": "nixpkgs"}},
        },
        "root": "root",
        "version": 7,
    }
    return json.dumps(lock, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def parse_flake_lock(data: Any) -> dict[str, Any]:
    """The pinning facts of a parsed ``flake.lock``: each input's locked type, narHash and
    rev (and lastModified/owner/repo/url/path when present), which root inputs point at
    which node, and ``unpinned``: inputs without a ``narHash``."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        return {"error": "not a flake.lock: no `nodes` table"}
    nodes: dict[str, Any] = data["nodes"]
    root_name = data.get("root", "root")
    inputs: dict[str, Any] = {}
    unpinned: list[str] = []
    for name in sorted(nodes):
        node = nodes[name]
        if name == root_name or not isinstance(node, dict):
            continue
        locked = node.get("locked")
        if not isinstance(locked, dict):
            unpinned.append(name)
            inputs[name] = {"locked": None}
            continue
        keep = ("type", "narHash", "rev", "lastModified", "owner", "repo", "url", "path", "ref")
        inputs[name] = {k: locked[k] for k in keep if k in locked}
        if not locked.get("narHash"):
            unpinned.append(name)
    root_node = nodes.get(root_name)
    root_inputs = root_node.get("inputs", {}) if isinstance(root_node, dict) else {}
    return {
        "version": data.get("version"),
        "root_inputs": root_inputs if isinstance(root_inputs, dict) else {},
        "inputs": inputs,
        "unpinned": unpinned,
    }
