"""The smoke tier rb derives: its time limit, the value it gives a literal bound, and the
dataset sizes it lowers beside an epoch bound.

The vocabulary of names that bound a run (epochs, steps, iterations) and the value a smoke
run gives each is data in :mod:`reprobridge.detect.runbounds`, shared by the flags the
merge lowers and the literals the ``bounds`` detector finds in code.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from reprobridge.detect.base import Finding
from reprobridge.detect.findings import ParamValue
from reprobridge.detect.runbounds import (
    BATCH_NAMES,
    EPOCH_NAMES,
    HELD_OUT_SIZE_NAMES,
    REPEAT_VALUES,
    SIZE_NAMES,
    STEPS,
    bound_name,
    leaf,
    smoke_of_full,
    smoke_value,
)

#: The wall-clock limit of every smoke tier rb derives: "minutes on a CPU".
SMOKE_TIME_LIMIT = "10m"


def literal_smoke_value(name: str, site: str) -> int:
    """The smoke value of a literal bound of the code: its name's (``max_iters``,
    ``num_epochs``; for a ``for`` loop the loop variable's, ``epoch`` -> two epochs), else a
    few steps (:data:`~reprobridge.detect.runbounds.STEPS`) for a training loop over
    ``range(N)`` whose variable says nothing (``for k in range(2000)``). A config file's
    repetition count (``num_reps``: :data:`~reprobridge.detect.runbounds.REPEAT_VALUES`)
    becomes two. Never below :data:`~reprobridge.detect.runbounds.MIN_COUNT`: the caller
    cuts it to a tenth of the full run with
    :func:`~reprobridge.detect.runbounds.smoke_of_full`, which keeps that floor."""
    value = smoke_value(name)
    if value is None:
        value = REPEAT_VALUES.get(leaf(name))
    if value is None or (site == "loop" and value > STEPS):
        return STEPS
    return value


def _count(value: object) -> int | None:
    """A positive whole number (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def is_epoch_bound(name: str) -> bool:
    """Whether the parameter ``name`` counts passes over the data (``epochs``, ``max_epochs``;
    :data:`~reprobridge.detect.runbounds.EPOCH_NAMES`), by name: episodes share the epochs'
    smoke value, not their length."""
    return bound_name(name) in EPOCH_NAMES


def epoch_sizes(
    params: Mapping[str, Finding[ParamValue]], taken: Collection[str]
) -> list[tuple[Finding[ParamValue], int]]:
    """The dataset sizes a smoke tier of a few epochs lowers too, each with its smoke value.

    An epoch is as long as the data: x-transformers' ``train_path_star`` makes 20000
    examples (``num_train``), 625 batches that take longer than the smoke limit on a CPU.
    Each parameter of :data:`~reprobridge.detect.runbounds.SIZE_NAMES` that a flag sets,
    with a positive whole default, not already in the command (``taken``), is lowered to
    about :data:`~reprobridge.detect.runbounds.STEPS` batches (that many times the entry's
    batch-size parameter, :data:`~reprobridge.detect.runbounds.BATCH_NAMES`), and at most a
    tenth of its default (:func:`~reprobridge.detect.runbounds.smoke_of_full`); without a
    batch size, to a tenth. A held-out set's size
    (:data:`~reprobridge.detect.runbounds.HELD_OUT_SIZE_NAMES`) is lowered the same way,
    only together with a training size. Sorted by name; a size already that small is left
    out."""
    batch = next(
        (
            size
            for name, pf in sorted(params.items())
            if leaf(name) in BATCH_NAMES and (size := _count(pf.value.default)) is not None
        ),
        None,
    )
    out: list[tuple[Finding[ParamValue], int]] = []
    for name, pf in sorted(params.items()):
        full = _count(pf.value.default)
        if leaf(name) not in SIZE_NAMES | HELD_OUT_SIZE_NAMES or not pf.value.flag:
            continue
        if full is None or name in taken:
            continue
        small = smoke_of_full(STEPS * batch if batch else full, full)
        if small < full:
            out.append((pf, small))
    if not any(leaf(pf.value.name) in SIZE_NAMES for pf, _ in out):
        return []
    return out
