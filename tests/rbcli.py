"""``rb(*args, cwd=None)``: the rb command line as a user runs it, for tests.

(tests/ is on sys.path through its conftest.py; import with ``from rbcli import rb``.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def rb(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m reprobridge ARGS``: text output, never raising, PYTHONPATH inherited."""
    return subprocess.run(
        [sys.executable, "-m", "reprobridge", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
