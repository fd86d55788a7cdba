"""Crash-test hooks: ``RB_FAULT=<point>:<n>`` SIGKILLs this process at the n-th hit of a point.

Read only when ``RB_TESTING=1`` is also set, so a stray ``RB_FAULT`` in a user's
environment can never kill a real audit. Points (in the order a write passes them)::

    before_write               nothing of this file is on disk yet
    after_fsync_before_rename  the temp file is complete and fsynced, the target untouched
    after_rename               the target holds the new bytes (parent dir fsynced, but
                               for a file of an unsealed run: its seal does that)
    mid_journal_append         half a journal line is on disk, without its newline

Hits are counted per process and per point. SIGKILL (not an exception) is the point: no
``finally``, no ``atexit``, no buffered flush runs, exactly like an OOM kill or power cut.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

POINTS = frozenset(
    {"before_write", "after_fsync_before_rename", "after_rename", "mid_journal_append"}
)

_hits: Counter[str] = Counter()


def _armed() -> tuple[str, int] | None:
    if os.environ.get("RB_TESTING") != "1":
        return None
    spec = os.environ.get("RB_FAULT", "")
    point, _, count = spec.partition(":")
    if point not in POINTS:
        return None
    try:
        n = int(count) if count else 1
    except ValueError:
        return None
    return point, n


def fire(point: str) -> bool:
    """Count a hit of ``point``; True when this is the armed n-th hit (caller then crashes)."""
    armed = _armed()
    if armed is None or armed[0] != point:
        return False
    _hits[point] += 1
    return _hits[point] == armed[1]


def crash() -> None:
    """Die now, as a SIGKILL would kill us from outside."""
    os.kill(os.getpid(), signal.SIGKILL)


def hit(point: str) -> None:
    """Count a hit of ``point`` and crash if it is the armed one."""
    if fire(point):
        crash()


def reset() -> None:
    """Forget the hit counts (tests that arm faults in-process)."""
    _hits.clear()
