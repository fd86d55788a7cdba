"""Shared helpers of the procedure detectors: ids, names, number regex, shell parsing."""

from __future__ import annotations

import re

import pytest

from reprobridge.detect._text import (
    NUMBER,
    continued_lines,
    key_line,
    label_regex,
    metric_name,
    normalize_path,
    param_name,
    parse_run,
    slugify,
    split_shell,
    tidy_path,
    unique_id,
)
from reprobridge.manifest.schema import ID_PATTERN, METRIC_PATTERN, PARAM_PATTERN


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Training on CIFAR-10", "training-on-cifar-10"),
        ("Überblick: Résumé", "uberblick-resume"),
        ("  --Quick   start!!  ", "quick-start"),
        ("train_cifar", "train_cifar"),
        ("训练", None),
        ("", None),
        ("x" * 100, "x" * 64),
    ],
)
def test_slugify(text: str, slug: str | None) -> None:
    assert slugify(text) == slug
    if slug is not None:
        assert re.match(ID_PATTERN, slug)


def test_unique_id_is_deterministic_and_bounded() -> None:
    taken: set[str] = set()
    assert [unique_id("train", taken) for _ in range(3)] == ["train", "train-2", "train-3"]
    long = "a" * 64
    assert unique_id(long, {long}) == "a" * 62 + "-2"


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("Test Acc@1", "test_acc_1"),
        ("1st place", "m_1st_place"),
        ("val/loss", "val_loss"),
        ("é", "e"),
        ("@@", None),
    ],
)
def test_metric_name(label: str, name: str | None) -> None:
    assert metric_name(label) == name
    if name is not None:
        assert re.match(METRIC_PATTERN, name)


def test_param_name() -> None:
    assert param_name("--learning-rate") == "learning_rate"
    assert param_name("SOLVER.BASE_LR") == "SOLVER_BASE_LR"
    assert re.match(PARAM_PATTERN, param_name("--2d") or "")


@pytest.mark.parametrize("text", ["0.91", "-0.5", "+3", "1e-4", "-2.5E+03", ".5", "7.", "42"])
def test_number_matches_signs_and_exponents(text: str) -> None:
    match = re.fullmatch(NUMBER, text)
    assert match is not None and float(match.group(1)) == float(text)


def test_label_regex_matches_reformatted_output_but_not_inside_words() -> None:
    regex = label_regex("test acc", ":")
    assert re.search(regex, "epoch 3 test   acc :-1.5e-3").group(1) == "-1.5e-3"  # type: ignore[union-attr]
    assert re.search(label_regex("acc", "="), "top1_acc=0.9") is None
    assert re.search(label_regex("acc", "="), "acc=0.9").group(1) == "0.9"  # type: ignore[union-attr]


def test_split_shell_respects_quotes_comments_and_pipes() -> None:
    assert split_shell("cd src && python a.py 'x && y' | tee log; echo done # c") == [
        "cd src",
        "python a.py 'x && y'",
        "echo done",
    ]
    assert split_shell("python a.py > out.log 2>&1 &") == ["python a.py > out.log 2>&1"]


@pytest.mark.parametrize(
    ("line", "kind", "entry"),
    [
        ("python train.py --lr 0.1", "script", "train.py"),
        ("python3 -u ./src/train.py", "script", "src/train.py"),
        ("python -W ignore -m pkg.run x=1", "module", "pkg.run"),
        ("OMP_NUM_THREADS=4 nohup python train.py", "script", "train.py"),
        ("python -m torch.distributed.launch --nproc_per_node 2 train.py", "script", "train.py"),
        ("deepspeed --num_gpus 4 main.py --deepspeed ds.json", "script", "main.py"),
        ("sh scripts/run.sh", "shell", "scripts/run.sh"),
        ("./scripts/run.sh 3", "shell", "scripts/run.sh"),
        ("make -j4 train", "make", "train"),
        ("papermill nb.ipynb out.ipynb", "notebook", "nb.ipynb"),
        ("jupyter nbconvert --execute --to notebook nb.ipynb", "notebook", "nb.ipynb"),
    ],
)
def test_parse_run_recognises_runs(line: str, kind: str, entry: str) -> None:
    run = parse_run(line)
    assert run is not None and (run.kind, run.entry) == (kind, entry)


@pytest.mark.parametrize(
    "line",
    [
        "pip install -r requirements.txt",
        "python -m pip install -e .",
        "python setup.py install",
        "python -m pytest tests",
        "python -c 'import torch'",
        "conda activate env",
        "git clone https://x/y.git",
        "python",
        "echo 'unbalanced",
        "make",
    ],
)
def test_parse_run_ignores_installs_and_tools(line: str) -> None:
    assert parse_run(line) is None


def test_parse_run_keeps_env_but_drops_cuda_visible_devices_and_redirects() -> None:
    run = parse_run(
        "CUDA_VISIBLE_DEVICES=0,1 WANDB_MODE=offline torchrun --nproc-per-node=2 t.py > log 2>&1"
    )
    assert run is not None
    assert run.command == "WANDB_MODE=offline torchrun --nproc-per-node=2 t.py"
    assert run.env == ("WANDB_MODE=offline",)
    assert run.gpus == 2


def test_key_line_follows_the_nesting() -> None:
    lines = ["model:", "  lr: 1", "train:", "  lr: 2", '{"x": {"lr": 3}}']
    assert key_line(lines, "train.lr") == 4
    assert key_line(lines, "model.lr") == 2
    assert key_line(lines, "x.lr") == 5
    assert key_line(lines, "nothing.here") is None


def test_normalize_path_never_climbs_above_the_root() -> None:
    assert normalize_path("a/./b/../c") == "a/c"
    assert normalize_path("../x") == "x"
    assert normalize_path("./") == ""


def test_tidy_path_strips_dot_prefixes_and_trailing_slashes() -> None:
    assert tidy_path("  ././data/cifar/ ") == "data/cifar"
    assert tidy_path("/abs/") == "/abs"


def test_continued_lines_join_at_backslashes() -> None:
    lines = [(1, "python a.py \\"), (2, "  --lr 1 \\"), (3, "  --x"), (4, "echo"), (5, "tail \\")]
    assert continued_lines(lines) == [
        (1, ["python a.py ", "  --lr 1 ", "  --x"]),
        (4, ["echo"]),
        (5, ["tail "]),
    ]
