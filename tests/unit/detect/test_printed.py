"""Printed metrics (reprobridge.detect.procedure._printed): the regex recovered from a print call
reads the LAST value the real program prints, through check.py's own extraction."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from reprobridge.artifacts import check
from reprobridge.detect.procedure._printed import (
    PrintedMetric,
    expression_name,
    keep_metrics,
    last_expression_metric,
    line_metrics,
    printed_line,
    shows_info_logs,
)


def candidates(program: str) -> list[PrintedMetric]:
    tree = ast.parse(program)
    found: list[PrintedMetric] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            printed = printed_line(node, {})
            if printed is not None:
                found.extend(line_metrics(printed))
    return keep_metrics(sorted(found, key=lambda m: (m.line, m.name)))


def run(program: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        timeout=60,
    )
    return done.stdout + done.stderr


# (program, metric name, labelled, the value the program prints last)
CASES = [
    # jcjohnson-style: step and loss, no label
    ("for t in range(3):\n    loss = 1.5 / (t + 1)\n    print(t, loss)\n", "loss", False, 0.5),
    # HIPS/autograd-style str.format with a two-word label
    (
        "for i in range(3):\n    print('Iteration {} lower bound {}'.format(i, -10.0 + i))\n",
        "lower_bound",
        True,
        -8.0,
    ),
    # mlflow-example-style %-format with an indented label
    ("rmse = 0.75\nprint('  RMSE: %s' % rmse)\n", "rmse", True, 0.75),
    # ML-From-Scratch-style label and value as two arguments
    ("accuracy = 0.9\nprint ('Accuracy:', accuracy)\n", "accuracy", True, 0.9),
    # torchdiffeq-style counter, bar, label
    (
        "for itr in range(1, 3):\n"
        "    print('Iter {:04d} | Total Loss {:.6f}'.format(itr, 1.0 / itr))\n",
        "total_loss",
        True,
        0.5,
    ),
    # ng-video-lecture-style f-string of dict entries
    (
        "losses = {'train': 2.5, 'val': 2.4}\n"
        "print(f\"step 0: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}\")\n",
        "val_loss",
        True,
        2.4,
    ),
    # a label-less line whose value comes from a metric function, padded by the format
    (
        "accs = {'Adaboost': 0.8, 'Naive Bayes': 0.9}\n"
        "for clf in accs:\n    print('\\t%-23s: %.5f' % (clf, accs[clf]))\n",
        "acc",
        False,
        0.9,
    ),
    # a counter label, then the value: named after the expression
    (
        "for epoch in range(2):\n"
        "    avg_loss = 0.5 - epoch * 0.1\n"
        "    print('Epoch {}: {:.3f}'.format(epoch + 1, avg_loss))\n",
        "avg_loss",
        False,
        0.4,
    ),
    # a tensor-like object printed with str()
    (
        "class T:\n"
        "    def __init__(self, v):\n        self.v = v\n"
        "    def __str__(self):\n        return f'tensor({self.v}, grad_fn=<MseBackward0>)'\n"
        "for t in range(2):\n    loss = T(0.25 * (t + 1))\n    print(t, loss)\n",
        "loss",
        False,
        0.5,
    ),
    # a label qualified in parentheses
    (
        "print(f'Step:  10 Loss (averaged): {0.1234:.4f}')\n",
        "loss_averaged",
        True,
        0.1234,
    ),
    # logging with its record prefix, to stdout
    (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.INFO)\n"
        "logger = logging.getLogger('train')\n"
        "for e in range(2):\n    logger.info('epoch %d loss %.3f', e, 0.5 / (e + 1))\n",
        "loss",
        True,
        0.25,
    ),
    # a count out of a total with its percentage (minGPT's demo): the percentage, not 967
    (
        "results = [1] * 967 + [0] * 1033\n"
        "print('%s final score: %d/%d = %.2f%% correct'"
        " % ('test', sum(results), len(results), 100 * sum(results) / len(results)))\n",
        "final_score",
        True,
        48.35,
    ),
    # pytorch/examples' mnist shape: the percentage in parentheses
    (
        "correct, n = 9800, 10000\n"
        "print('\\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\\n'"
        ".format(0.1, correct, n, 100. * correct / n))\n",
        "accuracy",
        True,
        98.0,
    ),
    # a percentage format spec after the total
    (
        "correct, total = 3, 8\nprint(f'acc: {correct}/{total} ({correct / total:.1%})')\n",
        "acc",
        True,
        37.5,
    ),
    # a count out of a total and no percentage: the count, named as one
    (
        "correct, total = 30, 40\nfor k in (1, 2):\n"
        "    print(f'accuracy: {correct + k}/{total}')\n",
        "accuracy_count",
        True,
        32.0,
    ),
    # two decimals around a slash are two values (train/val), not a count: the first
    (
        "train_loss, val_loss = 0.5, 0.625\n"
        "print(f'train/val loss: {train_loss:.3f}/{val_loss:.3f}')\n",
        "train_val_loss",
        True,
        0.5,
    ),
]


# cleanrl-style: a vectorised environment's return, a one-element array, printed bare
CASES.append(
    (
        "for r in ([9.0], [11.0]):\n    print(f'global_step=5, episodic_return={r}')\n",
        "episodic_return",
        True,
        11.0,
    )
)


def test_an_array_of_several_values_is_not_read_as_one(tmp_path: Path) -> None:
    program = "r = [1.0, 2.0]\nprint(f'episodic_return={r}')\n"
    (metric,) = [m for m in candidates(program) if m.name == "episodic_return"]
    log = run(program, tmp_path)
    with pytest.raises(check.MetricMissing):
        check.extract_metric({"regex": metric.regex}, log, str(tmp_path))


@pytest.mark.parametrize(("program", "name", "labelled", "last"), CASES)
def test_the_regex_reads_the_last_printed_value(
    program: str, name: str, labelled: bool, last: float, tmp_path: Path
) -> None:
    found = {m.name: m for m in candidates(program)}
    assert name in found, (program, sorted(found))
    metric = found[name]
    assert metric.labelled is labelled
    log = run(program, tmp_path)
    value = check.extract_metric({"regex": metric.regex}, log, str(tmp_path))
    assert value == pytest.approx(last)


def test_settings_counters_and_gradients_are_never_metrics() -> None:
    program = (
        "print('block_size:', block_size)\n"
        "print(f'vocab_size={vocab_size}')\n"
        "print(grad_loss)\n"
        "print(t, loss_weight)\n"
        "print('epoch', epoch)\n"
        "print(step, lr)\n"
    )
    assert candidates(program) == []


def test_a_labelled_metric_hides_the_unlabelled_ones() -> None:
    """A label is better evidence than a line of numbers: ``print(t, loss)`` only counts
    when nothing in the file prints a labelled result."""
    program = "print(t, loss.item())\nprint(f'val acc: {a}')\n"
    assert [(m.name, m.labelled) for m in candidates(program)] == [("val_acc", True)]
    assert [m.name for m in candidates("print(t, loss.item())\n")] == ["loss"]


def test_the_unlabelled_regex_is_anchored_to_the_printed_line() -> None:
    (metric,) = candidates("print(t, loss.item())\n")
    assert check.extract_metric({"regex": metric.regex}, "3 0.5\n", ".") == 0.5
    # A line of another shape (three fields, or a value in a sentence) does not match.
    with pytest.raises(check.MetricMissing):
        check.extract_metric({"regex": metric.regex}, "3 0.5 extra\nloss is 0.5 now\n", ".")


def test_expression_names() -> None:
    def name(src: str) -> str | None:
        return expression_name(ast.parse(src, mode="eval").body)

    assert name("loss.item()") == "loss"
    assert name("loss.data[0]") == "loss"
    assert name("accuracy_score(y, p)") == "accuracy"
    assert name("losses['val']") == "val_loss"
    assert name("np.mean(accs)") == "acc"
    assert name("acc * 100") == "acc"
    assert name("losses.avg") == "loss"
    assert name("meter.avg") is None
    assert name("block_size") is None
    assert name("epoch") is None
    assert name("t") is None


def test_a_cells_last_expression() -> None:
    def last(src: str) -> str | None:
        metric = last_expression_metric(ast.parse(src))
        return metric.name if metric else None

    assert last("x = 1\nloss.item()\n") == "loss"
    assert last("accuracy_score(y, p)\n") == "accuracy"
    assert last("split_loss('val')\n") is None  # a helper that prints: shows None
    assert last("plt.plot(losses)\n") is None
    assert last("loss = 1\n") is None


def test_a_multi_line_print_reads_the_line_of_the_value(tmp_path: Path) -> None:
    program = "acc = 0.875\nprint('Results\\n  model: mlp')\nprint('summary:\\n', acc)\n"
    (metric,) = candidates(program)
    assert metric.name == "acc" and not metric.labelled
    log = run(program, tmp_path)
    assert check.extract_metric({"regex": metric.regex}, log, str(tmp_path)) == 0.875


def test_a_count_out_of_a_total_is_never_the_metric_itself() -> None:
    """``accuracy: 967/2000`` read as ``accuracy`` = 967 is neither a fraction nor
    comparable across tiers (a smoke tier evaluates fewer examples): the name says count."""
    found = {m.name: m for m in candidates("print(f'accuracy: {correct}/{len(test_set)}')\n")}
    assert sorted(found) == ["accuracy_count"]
    assert "count out of `len(test_set)`" in found["accuracy_count"].note
    with_pct = candidates("print('Accuracy: %d/%d (%.1f%%)' % (c, n, 100 * c / n))\n")
    assert [(m.name, bool(m.note)) for m in with_pct] == [("accuracy", True)]
    # the regex wants the total and the percentage after the count: a bare count is no match
    with pytest.raises(check.MetricMissing):
        check.extract_metric({"regex": with_pct[0].regex}, "Accuracy: 12.5\n", ".")


LOG_LOSS = (
    "import logging\nfor t in range(2):\n    logging.info(f'step {t} loss: {0.5 / (t + 1):.3f}')\n"
)


@pytest.mark.parametrize(
    ("config", "shown"),
    [
        ("", False),  # the root logger's default level, WARNING, drops INFO
        ("logging.basicConfig(level=logging.INFO)\n", True),
        ("logging.basicConfig(format='%(message)s')\n", False),  # no level: still WARNING
        ("logging.getLogger().setLevel(logging.WARNING)\n", False),
        ("if DEBUG:\n    logging.getLogger().setLevel(logging.INFO)\n", False),
        ("def main():\n    logging.basicConfig(level='DEBUG')\n", True),
    ],
)
def test_root_logging_info_is_read_only_where_the_level_shows_it(
    config: str, shown: bool, tmp_path: Path
) -> None:
    """torchsde's latent_sde.py logs its loss with ``logging.info`` and sets INFO only with
    ``--debug``: a default run prints no loss, so the line is no readable result."""
    program = "import logging\nDEBUG = False\n" + config + LOG_LOSS
    tree = ast.parse(program)
    assert shows_info_logs([tree]) is shown
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    printed = [p for c in calls if (p := printed_line(c, {}, info_logs=shown)) is not None]
    assert [m.name for p in printed for m in line_metrics(p)] == (["loss"] if shown else [])
    if shown and "def main" not in config:  # the line really is in the run's log
        assert "loss: 0.250" in run(program, tmp_path)
