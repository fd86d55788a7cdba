"""``rb(*args, cwd=None, env=None)``: the rb command line as a user runs it, for tests.

(tests/ is on sys.path through its conftest.py; import with ``from rbcli import rb``.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def rb(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m reprobridge ARGS``: text output, never raising, the environment (and so
    PYTHONPATH) inherited with ``env`` on top; stopped after 10 minutes."""
    return subprocess.run(
        [sys.executable, "-m", "reprobridge", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=600,
    )
