"""OutputsMetricsDetector: printed metrics, json-dumped metrics, output paths."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from reprobridge.artifacts import check
from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure._printed import line_metrics, printed_line
from reprobridge.detect.registry import detectors
from reprobridge.manifest.schema import METRIC_PATTERN, MetricSource


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"outputs"}))


def metrics_of(src: str) -> list[tuple[str, str, bool]]:
    """(name, regex, labelled) of what the one call in ``src`` prints."""
    call = ast.parse(src).body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    printed = printed_line(call.value, {})
    return [(m.name, m.regex, m.labelled) for m in (line_metrics(printed) if printed else [])]


def test_printed_regexes_match_what_the_program_prints() -> None:
    cases = {
        'print(f"[eval] Top-1 Acc: {a:.2f}%")': "[eval] Top-1 Acc: -12.50%",
        'print("mIoU", miou, sep="=")': "mIoU=3e-2",
        'logging.getLogger().info("step %d: val loss %.4f", s, l)': "step 3: val loss 0.1234",
        'print(f"Épreuve top1={p}")': "Épreuve top1=0.5",
    }
    for src, printed in cases.items():
        found = metrics_of(src)
        assert found, src
        _label, regex, _ = found[-1]
        match = re.search(regex, printed)
        assert match is not None, (src, regex)
        float(match.group(1))


def test_settings_printed_with_a_separator_are_not_metrics() -> None:
    """Issue 9: block_size and vocab_size were taken as metrics."""
    assert metrics_of('print(f"block_size: {b} vocab_size: {v} n_embd={n}")') == []
    assert metrics_of('print(f"loss_weight={w} score_threshold: {t}")') == []
    assert [m[0] for m in metrics_of('print(f"vocab size {v} val loss: {l:.4f}")')] == ["val_loss"]


def test_counters_and_unlabelled_values_are_not_metrics() -> None:
    assert metrics_of('print(f"Epoch: {e} step={s} lr: {lr} time {t:.1f}s")') == []
    assert metrics_of("print(value)") == []
    assert metrics_of('print("x", "y")') == []


def test_metric_names_are_valid_and_sources_validate(make_repo) -> None:
    src = (
        "import json\n"
        'print(f"Naïve Bayes acc: {a}")\n'
        'print(f"1-shot accuracy = {b}")\n'
        "with open(f'out/{run}/m.json', 'w') as f:\n    json.dump({'acc': 1}, f)\n"
        "with open('out/m.json', 'w') as g:\n    json.dump(metrics, g)\n"
    )
    ctx = run(make_repo, {"e.py": src})
    metrics = [f for f in ctx.findings if f.kind == "metric"]
    assert [m.key for m in metrics] == ["naive_bayes_acc", "m_1_shot_accuracy"]
    for m in metrics:
        assert re.match(METRIC_PATTERN, m.key)
        MetricSource(**m.value.source.to_json())
    outputs = [f.value.path for f in ctx.findings if f.kind == "output"]
    assert outputs == ["out", "out/m.json"]


def test_handles_are_matched_to_the_nearest_open(make_repo) -> None:
    src = (
        "import json\n"
        "def a():\n    with open('r/a.json', 'w') as f:\n        json.dump({'f1': 1}, f)\n"
        "def b():\n    with open('r/b.json', 'w') as f:\n        json.dump({'recall': 1}, f)\n"
    )
    ctx = run(make_repo, {"e.py": src})
    sources = {f.key: f.value.source.to_json() for f in ctx.findings if f.kind == "metric"}
    assert sources == {
        "f1": {"file": "r/a.json", "key": "f1"},
        "recall": {"file": "r/b.json", "key": "recall"},
    }


def test_unparsable_and_test_files_are_skipped(make_repo) -> None:
    ctx = run(
        make_repo,
        {"bad.py": "print(f'acc: {a}'\n", "tests/test_x.py": "print(f'acc: {a}')\n"},
    )
    assert ctx.findings == []


#: tqdm's postfix as tqdm writes it (``set_postfix`` formats a number with ``{:.3g}`` and
#: joins ``key=value`` with ", " after the bar, on a line ended by ``\r``): a stand-in,
#: since tqdm is not a test dependency.
_TQDM = (
    "import sys\n"
    "class tqdm:\n"
    "    def __init__(self, total=None):\n"
    "        self.n = 0\n"
    "    def update(self, n=1):\n"
    "        self.n += n\n"
    "    def set_description(self, desc):\n"
    "        self.desc = desc\n"
    "    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):\n"
    "        items = dict(ordered_dict or {}, **kwargs)\n"
    "        shown = ', '.join(\n"
    "            f'{k}={v:.3g}' if isinstance(v, float) else f'{k}={v}' for k, v in items.items()\n"
    "        )\n"
    "        sys.stderr.write(f'\\r{self.desc}: {self.n}it [00:00, 9.99it/s, {shown}]')\n"
)


@pytest.mark.parametrize(
    "call",
    [
        "progress_bar.set_postfix(**logs)",
        'progress_bar.set_postfix({"loss": loss, "step": global_step})',
        "progress_bar.set_postfix(dict(loss=loss, step=global_step), refresh=False)",
    ],
)
def test_a_progress_bar_postfix_of_a_dict_is_a_metric(make_repo, tmp_path, call: str) -> None:
    """tiny-diffusion's loop: the loss reaches the log only through ``set_postfix(**logs)``."""
    program = (
        "from tqdm import tqdm\n"
        "def train():\n"
        "    global_step = 0\n"
        "    for epoch in range(2):\n"
        "        progress_bar = tqdm(total=5)\n"
        '        progress_bar.set_description(f"Epoch {epoch}")\n'
        "        for step in range(5):\n"
        "            loss = 1.0 / (global_step + 3)\n"
        "            progress_bar.update(1)\n"
        '            logs = {"loss": loss, "step": global_step}\n'
        f"            {call}\n"
        "            global_step += 1\n"
        "        progress_bar.close = None\n"
        "train()\n"
    )
    found = run(make_repo, {"ddpm.py": program, "tqdm.py": _TQDM})
    metrics = {f.key: f.value for f in found.findings if f.kind == "metric"}
    assert "step" not in metrics  # a counter, never a metric
    source = metrics["loss"].source
    (tmp_path / "ddpm.py").write_text(program)
    (tmp_path / "tqdm.py").write_text(_TQDM)
    done = subprocess.run(
        [sys.executable, "ddpm.py"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    value = check.extract_metric({"regex": source.regex}, done.stderr, str(tmp_path))
    assert value == pytest.approx(1.0 / 12, rel=1e-2)  # the last loss, as tqdm printed it
