"""The vocabulary of parameters that bound a run, and the value a smoke run gives each.

A smoke tier must finish in minutes on a CPU. It lowers the one parameter that bounds the
training loop — epochs, steps, iterations, episodes — to :data:`SMOKE_VALUES`' value for
its name, and never to more than about a tenth of the full run (:func:`smoke_of_full`),
but never to fewer than :data:`MIN_COUNT` iterations: one is a degenerate run. Names are
matched on their last component, normalised (``--trainer.max_iters`` -> ``max_iters``,
``--num-epochs`` -> ``num_epochs``), so the vocabulary holds leaf names only. It is data:
add a spelling here (and to its test), not a special case in code.

It lives with the detectors because both sides read it: the merge
(:mod:`reprobridge.recovery.experiments`) lowers a flag or parameter by these names, and the
``bounds`` detector (:mod:`reprobridge.detect.procedure.bounds`) finds literals assigned to them in a
notebook's cells or a script without a command line.
"""

from __future__ import annotations

import re

#: The fewest iterations a smoke run lowers a loop count to (epochs, steps, episodes,
#: repetitions). One iteration is a degenerate run, not a short one: a per-epoch history
#: of one element (``history[::2]`` plotted in ``plt.subplots(1, n)``, where matplotlib
#: returns a bare Axes for n == 1 and ``axes[i]`` fails), ``np.diff`` or a std over one
#: value, a scheduler or a "between epochs" path never taken. A full run of fewer
#: iterations keeps its own count: there is nothing to lower.
MIN_COUNT = 2

EPOCHS = MIN_COUNT  # two passes over the data: the fewest that are not degenerate
STEPS = 20  # a few optimizer steps: enough to see the loss move and the code paths run
_EPISODES = MIN_COUNT
_ENV_STEPS = 2000  # reinforcement learning counts environment steps, not updates

#: A smoke run is at most about 1/SMOKE_SHARE of the full run it checks.
SMOKE_SHARE = 10

#: Leaf names of a count of passes over the data: each of a smoke tier's :data:`EPOCHS`
#: passes is as long as the data, so the dataset sizes beside such a bound are lowered too
#: (:func:`reprobridge.recovery.smoke.epoch_sizes`).
EPOCH_NAMES = frozenset(
    {
        "epochs", "epoch", "num_epochs", "n_epochs", "nepochs", "nepoch", "max_epochs",
        "max_epoch", "num_epoch", "nb_epochs", "num_train_epochs", "train_epochs",
        "total_epochs", "epoch_num", "epochs_num", "n_epoch",
    }
)  # fmt: skip

#: Leaf parameter name -> the value of the smoke tier.
SMOKE_VALUES: dict[str, int] = {
    **dict.fromkeys(sorted(EPOCH_NAMES), EPOCHS),
    **dict.fromkeys(
        (
            "steps", "max_steps", "num_steps", "n_steps", "nsteps", "train_steps",
            "total_steps", "num_train_steps", "max_train_steps", "training_steps",
            "iters", "iterations", "max_iters", "max_iter", "niters", "niter", "n_iters",
            "n_iter", "num_iters", "num_iter", "num_iterations", "max_iterations",
            "total_iters", "train_iters", "training_iters", "iter_max",
            "max_updates", "num_updates", "total_updates", "n_updates",
            "num_batches", "max_batches", "n_batches",
        ),
        STEPS,
    ),
    **dict.fromkeys(
        ("episodes", "num_episodes", "max_episodes", "n_episodes", "train_episodes"),
        _EPISODES,
    ),
    **dict.fromkeys(
        ("timesteps", "total_timesteps", "num_timesteps", "max_timesteps", "max_frames",
         "num_frames", "total_frames", "env_steps", "num_env_steps"),
        _ENV_STEPS,
    ),
}  # fmt: skip


#: Leaf names of a count of repetitions of the whole experiment (``"num_reps": 10`` in a
#: config file): :data:`MIN_COUNT` are enough for a smoke run (one makes a mean over the
#: repetitions of one value, a std of nothing). Kept apart from :data:`SMOKE_VALUES` because
#: a command line's flag is lowered one at a time, and a repetition count is never the one
#: that bounds the training loop; config files' bounds are lowered together
#: (:func:`config_smoke_value`).
REPEAT_VALUES: dict[str, int] = dict.fromkeys(
    ("num_reps", "n_reps", "repeats", "num_repeats", "n_repeats", "n_runs", "num_runs",
     "n_seeds", "num_seeds"),
    MIN_COUNT,
)  # fmt: skip


#: Leaf names of the number of examples a run makes or reads (``num_train = 20000``,
#: ``n_samples``): under an epoch bound, what one epoch's length is made of. Kept apart from
#: :data:`SMOKE_VALUES`: they bound nothing alone (a run bounded by steps does as many
#: steps whatever the data's size), and the smoke tier lowers them only beside an epoch
#: bound (:func:`reprobridge.recovery.smoke.epoch_sizes`).
SIZE_NAMES = frozenset(
    {
        "num_train", "n_train", "num_train_samples", "n_train_samples", "train_samples",
        "num_train_examples", "num_samples", "n_samples", "num_examples", "n_examples",
        "dataset_size", "data_size", "train_size",
    }
)  # fmt: skip

#: Leaf names of the size of a held-out set (``num_val = 1000``). Lowered only together
#: with a size of :data:`SIZE_NAMES`: alone, it is often carved out of a fixed dataset
#: (``--valid_size 5000`` of CIFAR's training images), and a smaller one makes the
#: training part, and the epoch, longer.
HELD_OUT_SIZE_NAMES = frozenset(
    {
        "num_val", "n_val", "num_valid", "num_val_samples", "n_val_samples", "val_samples",
        "val_size", "valid_size", "num_test", "n_test", "num_test_samples", "n_test_samples",
        "test_samples", "test_size",
    }
)  # fmt: skip

#: Leaf names of a batch size: how many examples one step takes.
BATCH_NAMES = frozenset({"batch_size", "batchsize", "bs", "train_batch_size", "batch"})

#: Words that, before a count, make it something other than the run's length.
NOT_BOUNDS = frozenset(
    {
        "warmup", "eval", "evaluation", "val", "valid", "validation", "test", "log", "logging",
        "save", "saving", "ckpt", "checkpoint", "print", "display", "report", "sample",
        "decay", "patience", "accum", "accumulation", "gradient", "grad", "lr", "scheduler",
        "snapshot", "plot", "viz", "early", "stop", "burnin", "burn", "cooldown", "per",
        "anneal", "annealing", "kl", "pause",
    }
)  # fmt: skip


#: Words after a bound's name that say it counts the whole run (``max_steps_total``:
#: lweitkamp/option-critic-pytorch and the forks of it in the public code index, beside
#: ``max_steps_ep``, a per-episode cap that bounds nothing).
WHOLE_RUN_WORDS = frozenset({"total", "all", "global", "overall"})


def leaf(name: str) -> str:
    """The normalised last component of a parameter name or flag (``--trainer.max-iters``
    -> ``max_iters``; ``trainer_max_iters`` stays itself: underscores do not split)."""
    return re.split(r"[./]", name.strip().lstrip("-").rstrip("="))[-1].replace("-", "_").lower()


def bound_name(name: str) -> str | None:
    """The vocabulary's leaf name (a key of :data:`SMOKE_VALUES`) that the parameter
    ``name`` (a flag, a dotted override key or a parameter name) is, or None when the name
    does not bound a run.

    A parameter name that joins a section with ``_`` (``trainer_max_iters``) matches on
    its longest vocabulary suffix, unless a word before it says the count is about
    something else (``warmup_steps``, ``eval_iters``, ``save_epochs``: :data:`NOT_BOUNDS`);
    a vocabulary name followed only by words of :data:`WHOLE_RUN_WORDS` is that name
    (``max_steps_total`` -> ``max_steps``; ``max_steps_ep`` bounds nothing).
    """
    key = leaf(name)
    if key in SMOKE_VALUES:
        return key
    parts = key.split("_")
    for i in range(1, len(parts)):
        suffix = "_".join(parts[i:])
        if suffix in SMOKE_VALUES:
            return None if set(parts[:i]) & NOT_BOUNDS else suffix
    for i in range(len(parts) - 1, 0, -1):
        prefix = "_".join(parts[:i])
        if prefix in SMOKE_VALUES and set(parts[i:]) <= WHOLE_RUN_WORDS:
            return prefix
    return None


def smoke_value(name: str) -> int | None:
    """The smoke tier's value for a parameter named ``name`` (:func:`bound_name`), or None
    when the name does not bound a run."""
    key = bound_name(name)
    return None if key is None else SMOKE_VALUES[key]


def smoke_of_full(usual: int, full: int) -> int:
    """The smoke value of a bound whose full run counts ``full`` (epochs, steps...): its
    name's ``usual`` smoke value, but at most a tenth of ``full``, and at least
    :data:`MIN_COUNT`.

    The usual value is sized for long runs; a run that is already short by that measure
    (``--steps`` default 15, each step a minute of LBFGS) would otherwise get a "smoke"
    tier as long as itself, so the tier is cut to a tenth, but not below two iterations
    (15 -> 2, 30 epochs -> 2): one is a degenerate run (:data:`MIN_COUNT`). A caller that
    must keep a print interval (a loop that prints only every K iterations) raises the
    result to K itself. The result is never above ``full`` (a full run of one or two
    iterations keeps its count: nothing to lower), never above ``usual`` unless ``usual``
    is below the floor, and below ``full`` whenever ``full`` is above :data:`MIN_COUNT`."""
    if full <= MIN_COUNT:
        return max(1, full)
    return max(MIN_COUNT, min(usual, full // SMOKE_SHARE))


def config_smoke_value(path: list[str]) -> int | None:
    """The smoke value of a config file's key at ``path`` (``["train", "epochs"]``): the
    run-bounds vocabulary's (:func:`smoke_value` of the path joined, so ``eval.steps`` is no
    bound) or a repetition count's (:data:`REPEAT_VALUES`), else None."""
    if not path:
        return None
    joined = "_".join(leaf(p) for p in path)
    if leaf(path[-1]) in REPEAT_VALUES:
        return None if set(joined.split("_")[:-1]) & NOT_BOUNDS else REPEAT_VALUES[leaf(path[-1])]
    return smoke_value(joined)
