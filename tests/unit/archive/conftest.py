"""Archive tests: helpers on sys.path, and the real-Nix fixtures of tests/unit/artifacts
(``nixstub``, ``nix``) re-exported, so the closure test runs the same stub flake."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).parent
ARTIFACTS = HERE.parent / "artifacts"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ARTIFACTS))

# Loaded under another name: both directories have a module called conftest.
_spec = importlib.util.spec_from_file_location("_artifacts_conftest", ARTIFACTS / "conftest.py")
assert _spec is not None and _spec.loader is not None
_artifacts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_artifacts)

nixstub_dir = _artifacts.nixstub_dir
nixstub = _artifacts.nixstub
nix = _artifacts.nix
