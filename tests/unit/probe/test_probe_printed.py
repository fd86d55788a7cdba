"""Metrics proposed from what a run printed (reprobridge.probe.printed)."""

from __future__ import annotations

import re

import pytest

from reprobridge.detect._text import metric_name
from reprobridge.manifest.schema import MetricSource
from reprobridge.probe.printed import printed_metrics


def _names(log: str) -> dict[str, float]:
    return {m.name: m.value for m in printed_metrics(log, limit=10)}


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        # hamiltonian-nn's shape: a summary after the progress lines
        (
            "step 200, train_loss 3.7e-02, test_loss 4.1e-02\n"
            "Final train loss 3.1e-02 +/- 1.0e-03\nFinal test loss 3.6e-02 +/- 2.0e-03\n",
            {
                "final_test_loss": 0.036,
                "final_train_loss": 0.031,
                "test_loss": 0.041,
                "train_loss": 0.037,
            },
        ),
        # makemore's shape: `name value` between bars
        ("step 10 | loss 2.9 | step time 9.2ms\n", {"loss": 2.9}),
        # logging records: the level is not part of the name
        ("2026-01-01 10:00:00,1 INFO nll: 1.400000\n", {"nll": 1.4}),
        # a tqdm postfix
        (
            "100%|####| 10/10 [00:01<00:00,  9.1it/s, loss=0.123, acc=0.91]\n",
            {"loss": 0.123, "acc": 0.91},
        ),
        # pygcn's final line
        ("Test set results: loss= 0.6 accuracy= 0.815\n", {"loss": 0.6, "accuracy": 0.815}),
        ("Test acc.:85.5\n", {"test_acc": 85.5}),
    ],
)
def test_printed_metrics_read_the_shapes_seen(log: str, expected: dict[str, float]) -> None:
    assert _names(log) == expected


def test_counters_and_settings_are_not_metrics() -> None:
    assert _names("epoch 3 step 200 lr 0.001 batch_size 64 seed 1 time 3.2\n") == {}


def test_a_longer_name_is_never_read_as_its_last_word() -> None:
    """`train loss 2.8` must not be the value of `loss` (red without the left bound)."""
    log = "step 10 | loss 2.9\nstep 20 train loss 2.8 test loss 2.85\n"
    found = {m.name: m for m in printed_metrics(log, limit=10)}
    assert found["loss"].value == 2.9
    values = re.findall(found["loss"].regex, log, re.MULTILINE)
    assert values == ["2.9"]


def test_every_proposal_is_a_valid_source_that_reads_its_value() -> None:
    log = "Epoch: 0001 loss_train: 0.9\nEpoch: 0002 loss_train: 0.5 acc_val: 0.7\nval/acc = 0.75\n"
    proposals = printed_metrics(log, limit=10)
    assert proposals
    for m in proposals:
        MetricSource(regex=m.regex)  # compiles, one group: the manifest accepts it
        assert float(re.findall(m.regex, log, re.MULTILINE)[-1]) == m.value
        assert m.line in log


def test_results_printed_last_come_first_and_the_limit_holds() -> None:
    log = "acc_train: 0.9\nloss: 0.5\nfinal accuracy: 0.8\n"
    assert [m.name for m in printed_metrics(log, limit=2)] == ["final_accuracy", "loss"]


def test_metric_names_are_manifest_names() -> None:
    assert metric_name("Test acc.") == "test_acc"
    assert metric_name("val/acc") == "val_acc"
    assert metric_name("1st loss") == "m_1st_loss"
