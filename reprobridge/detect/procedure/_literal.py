"""The record of one literal that bounds a run, shared by the code and config-file readers
(:mod:`.bounds`, :mod:`.configbounds`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Where the literal is: a setting (``EPOCHS = 500``, ``{"epochs": 100}``, a parameter's
#: default, a config file's key), a call's keyword (``fit(x, epochs=10)``), a training
#: loop's ``range``, or an argument a call passes by position to a parameter of one of the
#: repository's own functions (``train(model, 100)`` for ``def train(model, epochs)``).
Site = Literal["assign", "keyword", "loop", "argument"]


@dataclass(frozen=True)
class LiteralBound:
    """One literal that bounds a run, in one piece of Python source (a file or a cell) or a
    config file (``name`` its dotted key path there)."""

    line: int
    column: int  # characters, not bytes
    was: str
    value: int
    name: str
    site: Site
    code: str
    start: int = 0
    #: The loop that runs to this bound prints only when ``(i + 1) % every == 0``: a smoke
    #: value below ``every`` would print nothing (0: no such gate).
    every: int = 0
