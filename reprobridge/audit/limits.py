"""A pids cgroup around one run: the process-count limit that also binds root.

Inside bubblewrap the run gets ``RLIMIT_NPROC`` (:mod:`reprobridge.sandbox`), which
the kernel does not apply to root. Where the auditor can write a pids cgroup (cgroup v1's
``pids`` hierarchy, or a v2 group whose ``cgroup.subtree_control`` has ``pids``; usually
only as root), :func:`pids_cgroup` makes one with ``pids.max`` set, and the run's first
process moves itself into it before it execs anything, so every process of the run counts.
Elsewhere it yields nothing: the limit is then ``RLIMIT_NPROC`` alone.

:func:`run_cgroups` also puts the run in a CPU-accounting group where it can make one
(cgroup v1's ``cpuacct`` hierarchy, or a v2 group: ``cpu.stat`` is in every v2 group), and
reads the group's CPU time once its processes are gone: the kernel's account of the whole
tree, bubblewrap's sandbox included, with nothing missed after the sampler's last snapshot.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The shell that joins the cgroups, then becomes the run (the ``cgroup.procs`` files, then
#: ``--``, then the run's argv). A group it cannot join stops the run (exit status non-zero).
_JOIN = 'for f do [ "$f" = -- ] && break; echo "$$" > "$f" || exit; shift; done; shift; exec "$@"'


def _proc_cgroups() -> tuple[dict[str, Path], Path | None] | None:
    """This process's groups from ``/proc/self/cgroup``: each v1 controller's directory
    (under ``CGROUP_ROOT/<controller>``) and the v2 group's (None without one); None when
    the file cannot be read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if line.startswith("0::"):
            v2 = v2 or CGROUP_ROOT / path.lstrip("/")
        for controller in filter(None, controllers.split(",")):
            v1.setdefault(controller, CGROUP_ROOT / controller / path.lstrip("/"))
    return v1, v2


def _own_group(controller: str) -> Path | None:
    """This process's cgroup directory that has ``controller`` (v1, else v2), or None."""
    groups = _proc_cgroups()
    if groups is None:
        return None
    v1, v2 = groups
    if controller in v1:
        return v1[controller]
    if v2 is not None:
        with contextlib.suppress(OSError):
            if controller in (v2 / "cgroup.subtree_control").read_text().split():
                return v2
    return None


def available() -> bool:
    """Whether :func:`pids_cgroup` can make a group here (a writable pids hierarchy)."""
    group = _own_group("pids")
    return group is not None and os.access(group, os.W_OK)


@dataclass
class RunGroups:
    """What :func:`run_cgroups` made: ``join``, the argv prefix that runs a command in the
    groups (empty: none could be made); after the ``with`` block, ``cpu`` = (user, system)
    CPU seconds of every process that was in the accounting group (None: no such group)."""

    join: list[str]
    cpu: tuple[float, float] | None = None


@contextlib.contextmanager
def pids_cgroup(limit: int | None) -> Iterator[list[str]]:
    """Yield the argv prefix that runs a command inside a new pids cgroup limited to
    ``limit`` processes (empty when there is no limit or no writable pids hierarchy); the
    group is removed on exit, once its processes are gone."""
    with run_cgroups(limit, account_cpu=False) as groups:
        yield groups.join


@contextlib.contextmanager
def run_cgroups(limit: int | None, *, account_cpu: bool = True) -> Iterator[RunGroups]:
    """Groups around one run: a pids group limited to ``limit`` processes (as
    :func:`pids_cgroup`), and with ``account_cpu`` a CPU-accounting group. Each is made
    only where this process may; the groups are removed on exit, once their processes are
    gone, and ``cpu`` is read just before."""
    token = secrets.token_hex(6)
    pids = _make_group(_own_group("pids"), token, limit) if limit is not None else None
    cpu_group = None
    if account_cpu:
        if pids is not None and (pids / "cpu.stat").is_file():
            cpu_group = pids  # one cgroup v2 group: pids.max and cpu.stat
        else:
            cpu_group = _make_group(_cpu_parent(), token, None)
    groups = [g for g in dict.fromkeys((pids, cpu_group)) if g is not None]
    out = RunGroups(
        []
        if not groups
        else ["/bin/sh", "-c", _JOIN, "rb-cgroup", *(str(g / "cgroup.procs") for g in groups), "--"]
    )
    try:
        yield out
    finally:
        for group in groups:
            _wait_empty(group)
            if group == cpu_group:
                out.cpu = _group_cpu(group)
            for _ in range(10):  # an exiting process may hold it a moment longer
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


def _make_group(parent: Path | None, token: str, limit: int | None) -> Path | None:
    if parent is None or not os.access(parent, os.W_OK):
        return None
    candidate = parent / f"rb-run-{token}"
    try:
        candidate.mkdir()
        if limit is not None:
            (candidate / "pids.max").write_text(f"{limit}\n")
    except OSError:
        with contextlib.suppress(OSError):
            candidate.rmdir()
        return None
    return candidate


def _cpu_parent() -> Path | None:
    """This process's group in the v1 ``cpuacct`` hierarchy, else its v2 group (on a host
    whose cgroup2 is mounted at :data:`CGROUP_ROOT`)."""
    groups = _proc_cgroups()
    if groups is None:
        return None
    v1, v2 = groups
    if "cpuacct" in v1:
        group = v1["cpuacct"]
        return group if (group / "cpuacct.usage").is_file() else None
    if v2 is not None and (CGROUP_ROOT / "cgroup.controllers").is_file():
        return v2
    return None


def _wait_empty(group: Path) -> None:
    """Up to 1 s for the run's processes (killed or exited) to leave ``group``."""
    for _ in range(50):
        try:
            if not (group / "cgroup.procs").read_text().strip():
                return
        except OSError:
            return
        time.sleep(0.02)


def _group_cpu(group: Path) -> tuple[float, float] | None:
    """(user, system) CPU seconds of ``group``: v2 ``cpu.stat`` (microseconds), v1
    ``cpuacct.usage_user``/``usage_sys`` (nanoseconds), else v1 ``cpuacct.stat`` (ticks)."""
    try:
        if (group / "cpu.stat").is_file():
            stat = dict(
                line.split() for line in (group / "cpu.stat").read_text().splitlines() if line
            )
            return int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6
        if (group / "cpuacct.usage_user").is_file():
            user = int((group / "cpuacct.usage_user").read_text())
            system = int((group / "cpuacct.usage_sys").read_text())
            return user / 1e9, system / 1e9
        ticks = dict(line.split() for line in (group / "cpuacct.stat").read_text().splitlines())
        hz = os.sysconf("SC_CLK_TCK")
        return int(ticks["user"]) / hz, int(ticks["system"]) / hz
    except (OSError, KeyError, ValueError):
        return None
