"""The smoke tier's vocabulary of run-bounding parameters (reprobridge.detect.runbounds)."""

from __future__ import annotations

import pytest

from reprobridge.detect.runbounds import NOT_BOUNDS, SMOKE_VALUES, leaf, smoke_value


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


def test_vocabulary_is_normalised_data() -> None:
    assert all(k == leaf(k) and v > 0 for k, v in SMOKE_VALUES.items())
    assert not set(SMOKE_VALUES) & NOT_BOUNDS
