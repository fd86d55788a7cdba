"""Fixed names of the files ReproBridge writes into a target repository (dvc's PROJECT_FILE idea)."""

from __future__ import annotations

MANIFEST_FILE = "reprobridge.toml"
FLAKE_FILE = "flake.nix"
FLAKE_LOCK_FILE = "flake.lock"
GUIDE_FILE = "REPRODUCE.md"
REPRO_DIR = "repro"
LAUNCHERS_DIR = "repro/launchers"
PYTHON_DIR = "repro/python"
PATCHES_DIR = "repro/patches"
CHECK_SCRIPT = "repro/check.py"
#: Writes a tier's copy of a notebook or script with literals replaced (tiers with ``edits``).
DERIVE_SCRIPT = "repro/derive.py"
EVIDENCE_DIR = "repro/evidence"
#: What `rb init`'s probe decided by running (an input of `rb init`; no run reads it).
PROBE_FILE = "repro/probe.toml"
LOGS_DIR = "repro/logs"
#: An archive's wheels (``rb archive --with-wheels``), a find-links directory for uv/pip.
WHEELS_DIR = "wheels"
#: A run's stdout and stderr as one stream in arrival order (what regex metrics search).
COMBINED_LOG = "output.log"

#: The command that regenerates every derived artifact; generated files name it in their header.
REGENERATE_COMMAND = "rb init"
