"""The smoke tier rb derives: its time limit, and the value it gives a literal bound.

The vocabulary of names that bound a run (epochs, steps, iterations) and the value a smoke
run gives each is data in :mod:`reprobridge.detect.runbounds`, shared by the flags the
merge lowers and the literals the ``bounds`` detector finds in code.
"""

from __future__ import annotations

from reprobridge.detect.runbounds import REPEAT_VALUES, STEPS, leaf, smoke_value

#: The wall-clock limit of every smoke tier rb derives: "minutes on a CPU".
SMOKE_TIME_LIMIT = "10m"


def literal_smoke_value(name: str, site: str) -> int:
    """The smoke value of a literal bound of the code: its name's (``max_iters``,
    ``num_epochs``; for a ``for`` loop the loop variable's, ``epoch`` -> one epoch), else a
    few steps (:data:`~reprobridge.detect.runbounds.STEPS`) for a training loop over
    ``range(N)`` whose variable says nothing (``for k in range(2000)``). A config file's
    repetition count (``num_reps``: :data:`~reprobridge.detect.runbounds.REPEAT_VALUES`)
    becomes one."""
    value = smoke_value(name)
    if value is None:
        value = REPEAT_VALUES.get(leaf(name))
    if value is None or (site == "loop" and value > STEPS):
        return STEPS
    return value
