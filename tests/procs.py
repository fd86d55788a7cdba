"""Finding processes by their command line, for tests of process supervision and sandboxing.

(tests/ is on sys.path through its conftest.py; import with ``from procs import ...``.)
"""

from __future__ import annotations

import uuid
from pathlib import Path


def alive_with_arg(arg: str) -> list[int]:
    """Live (non-zombie) pids whose command line holds ``arg``."""
    found = []
    for entry in Path("/proc").iterdir():
        name = entry.name
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if arg.encode() in cmdline and state != b"Z":
            found.append(int(name))
    return found


def unique_sleep() -> str:
    """A `sleep` argument no other process has, to find our daemon by its command line."""
    return f"{1000 + uuid.uuid4().int % 10**6 / 10**6:.6f}"
