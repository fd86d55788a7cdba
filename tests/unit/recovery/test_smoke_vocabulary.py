"""The smoke tier's vocabulary of run-bounding parameters (reprobridge.detect.runbounds)."""

from __future__ import annotations

import pytest

from reprobridge.detect.base import Evidence, Finding
from reprobridge.detect.findings import ParamValue
from reprobridge.detect.runbounds import (
    MIN_COUNT,
    NOT_BOUNDS,
    REPEAT_VALUES,
    SMOKE_VALUES,
    leaf,
    smoke_of_full,
    smoke_value,
)
from reprobridge.recovery.smoke import epoch_sizes, is_epoch_bound


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("--epochs", 2),
        ("--num_epochs", 2),
        ("--num-epochs", 2),
        ("max_epochs", 2),
        ("trainer.max_epochs", 2),
        ("--niters", 20),
        ("--max-steps", 20),
        ("--trainer.max_iters=", 20),
        ("trainer_max_iters", 20),  # a section joined with "_"
        ("num_train_epochs", 2),
        ("total_timesteps", 2000),
        ("--num-episodes", 2),
        ("--max_steps_total", 20),  # option-critic: the whole run's steps
    ],
)
def test_names_that_bound_a_run(name: str, value: int) -> None:
    assert smoke_value(name) == value


@pytest.mark.parametrize(
    "name",
    ["warmup_steps", "eval_iters", "--save-epochs", "log_steps", "lr", "batch_size",
     "block_size", "gradient_accumulation_steps", "epoch_time", "steps_per_epoch",
     # torchsde's latent_sde: a KL-annealing schedule length, the loop is --train-iters
     "--kl-anneal-iters", "anneal_steps", "--pause-iters",
     # option-critic: a per-episode cap beside --max_steps_total
     "--max_steps_ep"],
)  # fmt: skip
def test_names_that_do_not(name: str) -> None:
    assert smoke_value(name) is None


@pytest.mark.parametrize(
    ("usual", "full", "smoke"),
    [
        # time_sequence_prediction: 15 LBFGS steps; 20 is no smoke run, a tenth is one
        # step, and one is a degenerate run: two
        (20, 15, 2),
        (20, 50, 5),
        (20, 199, 19),
        (20, 5000, 20),  # a long run keeps the usual value
        (2, 30, 2),  # epochs
        (2, 12, 2),  # augmented-neural-odes' num_epochs = 12: two, not one
        (1, 1, 1),  # one epoch: nothing to lower
        (20, 2, 2),  # two steps: nothing to lower (never one)
        (20, 3, 2),
    ],
)
def test_a_smoke_bound_is_at_most_a_tenth_of_the_full_run(
    usual: int, full: int, smoke: int
) -> None:
    assert smoke_of_full(usual, full) == smoke


def test_a_smoke_loop_count_is_at_least_two_and_never_above_the_full_run() -> None:
    """Issue 9 (augmented-neural-odes): a smoke run of one epoch is degenerate, not short
    (a per-epoch history of one element, `plt.subplots(1, 1)` returning a bare Axes). Every
    vocabulary value, cut to the full run, is at least two iterations, never more than the
    full run, and below it whenever the full run is longer than two."""
    assert MIN_COUNT == 2
    for usual in sorted({*SMOKE_VALUES.values(), *REPEAT_VALUES.values()}):
        assert usual >= MIN_COUNT
        for full in range(1, 30000):
            small = smoke_of_full(usual, full)
            assert min(full, MIN_COUNT) <= small <= full, (usual, full, small)
            assert small < full or full <= MIN_COUNT, (usual, full, small)


def test_episodes_share_the_epochs_value_but_are_no_epoch_bound() -> None:
    """An epoch bound lowers the dataset sizes beside it; an episode count, whose smoke value
    is the same number, must not be taken for one."""
    assert smoke_value("num_episodes") == smoke_value("num_epochs") == MIN_COUNT
    assert is_epoch_bound("--trainer.max_epochs") and is_epoch_bound("trainer_num_epochs")
    assert not is_epoch_bound("num_episodes") and not is_epoch_bound("max_steps")


def test_vocabulary_is_normalised_data() -> None:
    assert all(k == leaf(k) and v > 0 for k, v in SMOKE_VALUES.items())
    assert not set(SMOKE_VALUES) & NOT_BOUNDS


def test_a_shell_syntax_command_gets_no_edits_and_its_launcher_renders(make_repo) -> None:
    """A README command with shell syntax (``OMP_NUM_THREADS=1 python train.py``, seen on a
    held-out repository) names a file with literal run bounds: a launcher runs such a command
    with ``bash -c`` and cannot swap the file for its lowered copy, so the merge must not
    write edits (rb init used to fail rendering its own manifest)."""
    from reprobridge.artifacts.launchers import render_launcher
    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.merge import merge_findings

    root = make_repo(
        {
            "README.md": "```bash\nOMP_NUM_THREADS=1 python train.py\n```\n",
            "train.py": (
                "import numpy as np\n\nEPOCHS = 500\nw = 0.0\n"
                "for epoch in range(EPOCHS):\n    w -= 0.1 * (w - 1.0)\n"
                "    print(f'epoch {epoch} loss {float(np.square(w - 1.0)):.4f}')\n"
            ),
        },
        git=False,
    )
    merged = merge_findings(detect_repo(RepoIndex.from_directory(root)), repo_name="x")
    (exp_id,) = list(merged.manifest.experiments)
    assert merged.manifest.experiments[exp_id].tier("smoke").edits == []
    assert any("shell syntax" in d for d in merged.notes.decisions)
    assert "OMP_NUM_THREADS=1" in render_launcher(merged.manifest, exp_id, version="0")


def _param(name: str, default: float, flagged: bool = True) -> Finding[ParamValue]:
    value = ParamValue("train.py", name, f"--{name}" if flagged else None, default, "int")
    return Finding("param", f"train.py::{name}", value, (Evidence("train.py", 3),), "params")


def test_epoch_sizes_are_about_twenty_batches_and_at_most_a_tenth() -> None:
    params = {
        p.value.name: p
        for p in (
            _param("num_train", 20000),
            _param("num_val", 1000),
            _param("n_samples", 50),  # a tenth: 5
            _param("batch_size", 32),
            _param("num_test", 4.5),  # not a count
            _param("train_size", True),  # not a count
            _param("dataset_size", 100000, flagged=False),  # no flag sets it
            _param("num_samples", 30000),  # already in the command
            _param("hidden_size", 5000),  # not a dataset size
        )
    }
    got = {pf.value.name: small for pf, small in epoch_sizes(params, taken={"num_samples"})}
    assert got == {"num_train": 640, "num_val": 100, "n_samples": 5}


def test_epoch_sizes_without_a_batch_size_are_a_tenth() -> None:
    params = {"num_train": _param("num_train", 20000), "n_val": _param("n_val", 5)}
    got = {pf.value.name: small for pf, small in epoch_sizes(params, taken=())}
    assert got == {"num_train": 2000, "n_val": 2}  # a tenth of 5, but never one example


def test_a_held_out_size_alone_is_left_alone() -> None:
    """temperature_scaling's --valid_size 5000 is carved out of CIFAR's training images: a
    smaller one would make the training part, and the epoch, longer."""
    params = {"valid_size": _param("valid_size", 5000), "batch_size": _param("batch_size", 64)}
    assert epoch_sizes(params, taken=()) == []
