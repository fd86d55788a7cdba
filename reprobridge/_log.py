"""Events from the library to whoever renders them (pypa/build's _ctx idea).

The library never prints. It calls :func:`emit` with an event name and fields; the CLI
installs a sink with :func:`sink` that turns events into progress lines (or nothing, for
``--json``/``--quiet``). Without a sink, events are dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

Sink = Callable[[str, dict[str, Any]], None]

_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar(
    "reprobridge_sink", default=None
)


def emit(event: str, **fields: Any) -> None:
    """Send ``event`` with ``fields`` to the installed sink, if any."""
    current = _SINK.get()
    if current is not None:
        current(event, fields)


@contextlib.contextmanager
def sink(fn: Sink) -> Iterator[None]:
    """Install ``fn`` as the event sink for the duration of the ``with`` block."""
    token = _SINK.set(fn)
    try:
        yield
    finally:
        _SINK.reset(token)
