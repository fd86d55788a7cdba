"""The transcript of one agent run: every request, response and tool result, redacted.

Contract: events are redacted when they are recorded (a secret never sits in memory in a
form that could be stored), with :class:`~reprobridge.evidence.redact.Redactor` (known
secret values from the environment plus the regex rules). :meth:`Transcript.to_jsonl` gives
the bytes the caller stores in ``.reprobridge/transcripts/<timestamp>.jsonl``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reprobridge.evidence.redact import Redactor


def _redact(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact_text(value)
    if isinstance(value, dict):
        return {str(k): _redact(v, redactor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, redactor) for v in value]
    return value


@dataclass
class Transcript:
    """Ordered, redacted events (``{"t": seconds since start, "event": ..., ...}``)."""

    redactor: Redactor
    events: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: str, t: float, **data: Any) -> None:
        """Record ``event`` at ``t`` seconds; every string in ``data`` is redacted first."""
        self.events.append({"t": round(t, 3), "event": event, **_redact(data, self.redactor)})

    def to_jsonl(self) -> bytes:
        """The events as JSON lines."""
        return "".join(
            json.dumps(e, sort_keys=True, ensure_ascii=False, default=str) + "\n"
            for e in self.events
        ).encode()
