"""How a verdict reads to people: one vocabulary for the terminal, Markdown and HTML.

Contract: a bundle's statuses (``pass``, ``fail``, ``skipped``, ``not-applicable``,
``incomplete``, ``not-judged``) are shown as they are (the overall NOT JUDGED as
``not-judged``), except that a ``pass`` of an audit whose
environment was not hermetic (the host backend: Python packages pinned, the system not)
shows as :data:`PASS_NOT_HERMETIC`, in amber rather than green. Such a pass means the
numbers held on this machine; it does not say what the environment was made of. Only the
display changes: the bundle's verdicts are never rewritten.
"""

from __future__ import annotations

#: The display state of a pass in a non-hermetic environment.
PASS_NOT_HERMETIC = "pass-not-hermetic"
#: Words for each display state (lower case; the overall verdict is shown upper case).
LABELS = {
    "pass": "pass",
    PASS_NOT_HERMETIC: "pass, not hermetic",
    "fail": "fail",
    "incomplete": "incomplete",
    "skipped": "skipped",
    "not-applicable": "n/a",
    "not-judged": "not judged",
}


def shown_status(status: str | None, hermetic: bool | None) -> str | None:
    """The display state of ``status`` in an audit whose environment was ``hermetic``
    (None: not recorded, shown as the status)."""
    return PASS_NOT_HERMETIC if status == "pass" and hermetic is False else status


def overall_state(passed: bool | None, hermetic: bool | None, verdict: str | None = None) -> str:
    """The overall display state: ``verdict`` when the bundle states one (``incomplete``,
    ``not-judged``), else from ``passed``; ``unknown`` without either."""
    if verdict:
        status: str | None = verdict.lower().replace(" ", "-")
    else:
        status = "pass" if passed is True else "fail" if passed is False else None
    return shown_status(status, hermetic) or "unknown"


def label(state: str | None) -> str:
    """The words for a display state (an unknown one as it is)."""
    return LABELS.get(state or "", state or "—")
