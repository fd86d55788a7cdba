"""A pids cgroup around one run: the process-count limit that also binds root.

Inside bubblewrap the run gets ``RLIMIT_NPROC`` (:mod:`reprobridge.sandbox`), which
the kernel does not apply to root. Where the auditor can write a pids cgroup (cgroup v1's
``pids`` hierarchy, or a v2 group whose ``cgroup.subtree_control`` has ``pids``; usually
only as root), :func:`pids_cgroup` makes one with ``pids.max`` set, and the run's first
process moves itself into it before it execs anything, so every process of the run counts.
Elsewhere it yields nothing: the limit is then ``RLIMIT_NPROC`` alone.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The shell that joins the cgroup, then becomes the run (``$1``: the ``cgroup.procs`` file).
_JOIN = 'echo "$$" > "$1" && shift && exec "$@"'


def _own_group(controller: str) -> Path | None:
    """This process's cgroup directory that has the ``pids`` controller, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/")
    for line in lines:
        if line.startswith("0::"):
            group = CGROUP_ROOT / line[3:].lstrip("/")
            with contextlib.suppress(OSError):
                if controller in (group / "cgroup.subtree_control").read_text().split():
                    return group
    return None


def available() -> bool:
    """Whether :func:`pids_cgroup` can make a group here (a writable pids hierarchy)."""
    group = _own_group("pids")
    return group is not None and os.access(group, os.W_OK)


@contextlib.contextmanager
def pids_cgroup(limit: int | None) -> Iterator[list[str]]:
    """Yield the argv prefix that runs a command inside a new pids cgroup limited to
    ``limit`` processes (empty when there is no limit or no writable pids hierarchy); the
    group is removed on exit, once its processes are gone."""
    parent = _own_group("pids") if limit is not None else None
    group: Path | None = None
    if parent is not None:
        candidate = parent / f"rb-run-{secrets.token_hex(6)}"
        try:
            candidate.mkdir()
            (candidate / "pids.max").write_text(f"{limit}\n")
            group = candidate
        except OSError:
            with contextlib.suppress(OSError):
                candidate.rmdir()
    try:
        yield (
            []
            if group is None
            else ["/bin/sh", "-c", _JOIN, "rb-cgroup", str(group / "cgroup.procs")]
        )
    finally:
        if group is not None:
            for _ in range(50):  # the run's processes were killed; the kernel reaps them
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
