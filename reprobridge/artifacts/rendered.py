"""The artifacts a run uses, rendered from the manifest alone: what `rb init` writes for
them and what `rb audit` compares the work tree's copies with before it runs anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reprobridge.artifacts.flake import render_flake, render_flake_lock
from reprobridge.artifacts.launchers import (
    launcher_path,
    needs_derive_script,
    render_check_script,
    render_derive_script,
    render_launcher,
)
from reprobridge.artifacts.pyenv import render_python_project
from reprobridge.constants import CHECK_SCRIPT, DERIVE_SCRIPT, FLAKE_FILE, FLAKE_LOCK_FILE
from reprobridge.manifest.schema import Manifest


def run_artifacts(
    manifest: Manifest,
    *,
    version: str,
    experiments: Iterable[str] | None = None,
    project_files: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Repository-relative path -> text of ``flake.nix``, ``flake.lock``, the Python
    project (``project_files`` when the caller rendered it already, else
    :func:`render_python_project`'s), the launchers of ``experiments`` (default: all, in
    the manifest's order; written by rb ``version``), ``repro/check.py`` and, when a
    launcher calls it, ``repro/derive.py``. Raises the renderers' RenderError."""
    out = {FLAKE_FILE: render_flake(manifest), FLAKE_LOCK_FILE: render_flake_lock(manifest)}
    out.update(render_python_project(manifest) if project_files is None else project_files)
    for exp_id in manifest.experiments if experiments is None else experiments:
        out[launcher_path(exp_id)] = render_launcher(manifest, exp_id, version=version)
    out[CHECK_SCRIPT] = render_check_script()
    if needs_derive_script(manifest):
        out[DERIVE_SCRIPT] = render_derive_script()
    return out
