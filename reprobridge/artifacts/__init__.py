"""The artifacts rb writes into a target repository, rendered from the manifest.

Every renderer is pure and deterministic (same manifest and version, same bytes):

- :mod:`~reprobridge.artifacts.flake`: ``flake.nix`` (a fixed file that reads
  ``reprobridge.toml``) and ``flake.lock``;
- :mod:`~reprobridge.artifacts.launchers`: ``repro/launchers/<exp>.sh`` and
  ``repro/check.py`` (a byte-for-byte copy of :mod:`~reprobridge.artifacts.check`);
- :mod:`~reprobridge.artifacts.pyenv`: the uv project in ``repro/python`` and its lock;
- :mod:`~reprobridge.artifacts.check`: the standalone threshold checker, also imported by
  the auditor.
"""

from __future__ import annotations

from reprobridge.artifacts.flake import render_flake, render_flake_lock
from reprobridge.artifacts.launchers import launcher_path, render_check_script, render_launcher
from reprobridge.artifacts.pyenv import LockResult, lock_python_project, render_python_project

__all__ = [
    "LockResult",
    "launcher_path",
    "lock_python_project",
    "render_check_script",
    "render_flake",
    "render_flake_lock",
    "render_launcher",
    "render_python_project",
]
