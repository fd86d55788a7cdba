"""The smoke tier's vocabulary of run-bounding parameters (reprobridge.detect.runbounds)."""

from __future__ import annotations

import pytest

from reprobridge.detect.base import Evidence, Finding
from reprobridge.detect.findings import ParamValue
from reprobridge.detect.runbounds import (
    NOT_BOUNDS,
    SMOKE_VALUES,
    leaf,
    smoke_of_full,
    smoke_value,
)
from reprobridge.recovery.smoke import epoch_sizes


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("--epochs", 1),
        ("--num_epochs", 1),
        ("--num-epochs", 1),
        ("max_epochs", 1),
        ("trainer.max_epochs", 1),
        ("--niters", 20),
        ("--max-steps", 20),
        ("--trainer.max_iters=", 20),
        ("trainer_max_iters", 20),  # a section joined with "_"
        ("num_train_epochs", 1),
        ("total_timesteps", 2000),
        ("--num-episodes", 2),
    ],
)
def test_names_that_bound_a_run(name: str, value: int) -> None:
    assert smoke_value(name) == value


@pytest.mark.parametrize(
    "name",
    ["warmup_steps", "eval_iters", "--save-epochs", "log_steps", "lr", "batch_size",
     "block_size", "gradient_accumulation_steps", "epoch_time", "steps_per_epoch",
     # torchsde's latent_sde: a KL-annealing schedule length, the loop is --train-iters
     "--kl-anneal-iters", "anneal_steps", "--pause-iters"],
)  # fmt: skip
def test_names_that_do_not(name: str) -> None:
    assert smoke_value(name) is None


@pytest.mark.parametrize(
    ("usual", "full", "smoke"),
    [
        (20, 15, 1),  # time_sequence_prediction: 15 LBFGS steps; 20 is no smoke run
        (20, 50, 5),
        (20, 199, 19),
        (20, 5000, 20),  # a long run keeps the usual value
        (1, 30, 1),  # epochs
        (1, 1, 1),  # one epoch: nothing to lower
        (20, 3, 1),
    ],
)
def test_a_smoke_bound_is_at_most_a_tenth_of_the_full_run(
    usual: int, full: int, smoke: int
) -> None:
    assert smoke_of_full(usual, full) == smoke


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
    assert got == {"num_train": 2000, "n_val": 1}


def test_a_held_out_size_alone_is_left_alone() -> None:
    """temperature_scaling's --valid_size 5000 is carved out of CIFAR's training images: a
    smaller one would make the training part, and the epoch, longer."""
    params = {"valid_size": _param("valid_size", 5000), "batch_size": _param("batch_size", 64)}
    assert epoch_sizes(params, taken=()) == []
