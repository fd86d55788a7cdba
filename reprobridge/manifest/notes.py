"""What a person should know about how a manifest was made, beyond its values and their
``[derived]`` provenance: the merge's decisions, conflicts and leftovers.

One record, below both its writer and its readers: the merge (``recovery/``) appends to it
while it builds the manifest, and the guide (``artifacts/guide.py``), ``rb init``'s summary
and ``rb init --json`` read it. It lives here rather than in ``recovery/`` so that the
renderers need not import the merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Conflict:
    """Sources that disagree about one value, and which one won and why."""

    path: str
    chosen: str
    others: list[str]
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: chose {self.chosen} over {'; '.join(self.others)} ({self.rule})"


@dataclass(frozen=True)
class RecoveryNotes:
    """The merge's account of its choices, in the order it made them.

    Frozen as a record (its lists are never swapped), filled by appending: each merge rule
    appends what it decided, and every reader sees the same lists. Each entry is one line of
    plain text (the guide escapes it)."""

    #: Choices and why (the main experiment, the pin's reasons, scoping).
    decisions: list[str] = field(default_factory=list)
    #: Sources that disagreed, and which one won.
    conflicts: list[Conflict] = field(default_factory=list)
    #: Distributions imported by the code but declared nowhere (added unpinned).
    flagged_imports: list[str] = field(default_factory=list)
    #: Paper values no experiment metric matched.
    unmatched_targets: list[str] = field(default_factory=list)
    #: Candidate experiments not made experiments, with why.
    dropped_experiments: list[str] = field(default_factory=list)
    #: What a person must check or fix (the detectors' warnings included).
    warnings: list[str] = field(default_factory=list)
