"""Uncommitted changes a run would not include.

Every run's workspace is ``git archive HEAD`` plus rb's artifacts from the work tree
(:mod:`.workspace`): an edit to the code that is not committed is not part of any run. An
audit therefore refuses a work tree with such changes unless the operator allows it
(``--allow-dirty``); then the evidence records them (:meth:`DirtyTree.record`) and says
that the runs did NOT include them, so the evidence and the runs agree.

What counts: tracked files changed against HEAD (staged or not) and untracked files git
does not ignore, except rb's own files: the artifacts every workspace takes from the work
tree (:func:`.workspace.overlaid`) and the files no run reads (:data:`RB_RECORDS`: the
evidence, logs, the agent's records, REPRODUCE.md, ``repro/.gitignore`` and the probe's
decisions, ``repro/probe.toml``, which `rb init` reads and no run does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobridge import _proc
from reprobridge.audit.workspace import overlaid
from reprobridge.constants import EVIDENCE_DIR, GUIDE_FILE, LOGS_DIR, PROBE_FILE, REPRO_DIR

#: rb's files that no run reads: never a reason to call the tree dirty.
RB_RECORDS = (
    EVIDENCE_DIR,
    LOGS_DIR,
    ".reprobridge",
    GUIDE_FILE,
    f"{REPRO_DIR}/.gitignore",
    PROBE_FILE,
)
#: The most diff bytes stored in the evidence; a larger diff is recorded by its hash only.
MAX_STORED_DIFF = 8 * 2**20
#: What the evidence says about the changes (the runs started from HEAD).
NOT_IN_RUNS = (
    "uncommitted changes NOT part of any run: every run started from the commit "
    "(git archive HEAD) plus rb's own artifacts from the work tree"
)


def rb_own(rel: str) -> bool:
    """Whether the repository-relative path ``rel`` is rb's own (see the module docstring)."""
    return overlaid(rel) or any(rel == top or rel.startswith(f"{top}/") for top in RB_RECORDS)


def listed(paths: Sequence[str], most: int = 10) -> str:
    """At most ``most`` of ``paths`` for a message: ``a.py, b.py (+3 more)``."""
    more = f" (+{len(paths) - most} more)" if len(paths) > most else ""
    return ", ".join(paths[:most]) + more


@dataclass(frozen=True)
class DirtyTree:
    """The work tree's changes the runs would not include (see the module docstring).

    ``diff`` is ``git diff HEAD --binary`` of ``changed``; ``sha256`` is the SHA-256 of
    that diff followed by each untracked path and a NUL byte."""

    changed: tuple[str, ...]
    untracked: tuple[str, ...]
    diff: bytes

    @property
    def dirty(self) -> bool:
        return bool(self.changed or self.untracked)

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(self.diff)
        for path in self.untracked:
            digest.update(path.encode() + b"\0")
        return digest.hexdigest()

    def files(self) -> str:
        """The changed and untracked paths, as :func:`listed` names them."""
        return listed([*self.changed, *(f"{p} (untracked)" for p in self.untracked)])

    def record(self) -> dict[str, Any]:
        """The evidence's ``inputs/dirty.json``."""
        return {
            "sha256": self.sha256,
            "in_runs": False,
            "note": NOT_IN_RUNS,
            "changed": list(self.changed),
            "untracked": list(self.untracked),
            "diff_sha256": hashlib.sha256(self.diff).hexdigest(),
            "diff_bytes": len(self.diff),
            "diff_stored": len(self.diff) <= MAX_STORED_DIFF,
        }


def dirty_tree(root: Path) -> DirtyTree:
    """The uncommitted changes of ``root`` no run would include. Git runs hardened
    (:func:`reprobridge._proc.git`, the repository's filter and textconv drivers off);
    raises CommandFailed when git fails."""
    # The runner neutralises every program the repository's config names; paths are
    # literal (a file named `*` is that file).
    safe = ["--literal-pathspecs"]
    quiet = ["--no-ext-diff", "--no-textconv", "--no-color"]
    names = _proc.git(root, *safe, "diff", "HEAD", "--name-only", "-z", *quiet)
    changed = tuple(sorted(n for n in names.text.split("\0") if n and not rb_own(n)))
    others = _proc.git(root, *safe, "ls-files", "--others", "--exclude-standard", "-z")
    untracked = tuple(sorted(n for n in others.text.split("\0") if n and not rb_own(n)))
    diff = b""
    if changed:
        diff = _proc.git(root, *safe, "diff", "HEAD", "--binary", *quiet, "--", *changed).stdout
    return DirtyTree(changed, untracked, diff)
