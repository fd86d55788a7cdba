"""Literal run bounds in code (reprobridge.detect.procedure.bounds): what counts and what does not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reprobridge.detect.base import DetectContext
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.bounds import (
    call_signatures,
    imported_definitions,
    literal_bounds,
)
from reprobridge.recovery.smoke import literal_smoke_value


@pytest.mark.parametrize(
    ("code", "name", "was"),
    [
        ("EPOCHS = 500", "EPOCHS", "500"),
        ("C.trainer.max_iters = 2000", "C.trainer.max_iters", "2000"),
        ('cfg["num_epochs"] = 10', "cfg.num_epochs", "10"),
        ("n_steps: int = 10**4", "n_steps", "10**4"),
        ("max_iters = int(1e4)", "max_iters", "int(1e4)"),
        ("niters, lr = 3000, 0.1", "niters", "3000"),
        ('config = {"epochs": 100, "lr": 0.1}', "epochs", "100"),
        ("trainer = Trainer(max_epochs=100)", "max_epochs", "100"),
        ("if __name__ == '__main__':\n    training_steps = 800", "training_steps", "800"),
        ("class Cfg:\n    num_iterations = 300", "num_iterations", "300"),
        (
            "def main():\n    clf.fit(X, y, n_epochs=50)\n\nif __name__ == '__main__':\n    main()",
            "n_epochs",
            "50",
        ),
    ],
)
def test_named_settings_are_bounds(code: str, name: str, was: str) -> None:
    [bound] = literal_bounds(code)
    # A call's keyword is told apart: the smoke tier does not cut it to a tenth.
    site = "keyword" if name in {"max_epochs", "n_epochs"} else "assign"
    assert (bound.name, bound.was, bound.site) == (name, was, site)
    assert code.splitlines()[bound.line - 1][bound.column :].startswith(was)


@pytest.mark.parametrize(
    "code",
    [
        "warmup_steps = 1000",  # a count of something else
        "eval_iters = 200",
        "max_steps = -1",  # "no limit": nothing to lower
        "epochs = 0",
        "max_iters = compute()",
        "max_iters = 2000.5",
        "def train():\n    epochs = 100",  # a function nothing calls: not what runs
        "clf = LinearSVC(max_iter=10000)",  # a solver's cap, not the run's length
        "for i in range(1000):\n    plt.plot(i)",  # a loop with no training step
        "for i in range(n):\n    loss.backward()",  # a bound that is not a literal
        "while True:\n    opt.step()",
    ],
)
def test_what_is_not_a_bound(code: str) -> None:
    assert literal_bounds(code) == []


@pytest.mark.parametrize(
    ("code", "variable", "was", "start"),
    [
        ("for k in range(100):\n    total_loss.backward()", "k", "100", 0),
        ("for epoch in tqdm(range(1, 101)):\n    optimizer.step()", "epoch", "101", 1),
        ("for i, t in enumerate(range(500)):\n    w -= lr * grad_w", "t", "500", 0),
        (
            "def fit():\n    for it in trange(2000):\n        opt_state = opt.update(g, opt_state)",
            "it",
            "2000",
            0,
        ),
        ("for step in range(300):\n    loss = criterion(model(x), y)", "step", "300", 0),
    ],
)
def test_training_loops_over_a_literal_range_are_bounds(
    code: str, variable: str, was: str, start: int
) -> None:
    [bound] = literal_bounds(code)
    assert (bound.name, bound.was, bound.site, bound.start) == (variable, was, "loop", start)


def test_columns_count_characters_not_bytes() -> None:
    [bound] = literal_bounds('note = "é"; EPOCHS = 500')
    assert bound.column == len('note = "é"; EPOCHS = ')


@pytest.mark.parametrize(
    ("name", "site", "value"),
    [
        ("EPOCHS", "assign", 2),
        ("max_iters", "assign", 20),
        ("epoch", "loop", 2),
        ("k", "loop", 20),
        ("num_reps", "assign", 2),  # repetitions of the whole experiment: two, never one
    ],
)
def test_smoke_values_of_literal_bounds(name: str, site: str, value: int) -> None:
    assert literal_smoke_value(name, site) == value


def test_a_print_every_k_iterations_is_the_bounds_floor() -> None:
    """Issue 9 (yunjey/pytorch-tutorial): `num_epochs = 60` lowered to 1 ran one epoch of a
    loop that prints `Loss:` only when `(epoch + 1) % 5 == 0`, so the smoke run printed no
    metric. The bound records the interval; a print on the first iteration sets none."""
    gated = (
        "num_epochs = 60\n"
        "for epoch in range(num_epochs):\n"
        "    optimizer.step()\n"
        "    if (epoch + 1) % 5 == 0:\n"
        "        print('Loss:', 1.0)\n"
    )
    assert [(b.name, b.every) for b in literal_bounds(gated)] == [("num_epochs", 5)]
    literal = (
        "for it in range(300):\n    opt.step()\n    if (it + 1) % 50 == 0:\n        print(it)\n"
    )
    assert [(b.value, b.every) for b in literal_bounds(literal)] == [(300, 50)]
    first = "for it in range(300):\n    opt.step()\n    if it % 50 == 0:\n        print(it)\n"
    assert [b.every for b in literal_bounds(first)] == [0]


def test_a_default_no_call_passes_is_a_setting() -> None:
    """Issue 9 (torchcde): `def main(num_epochs=30)` run as `main()` under the `__main__`
    guard takes its 30 epochs from the default; a default every call overrides does not
    bound the run, and neither does a function nothing calls."""
    code = "def main(num_epochs=30, lr=0.1):\n    pass\n\nif __name__ == '__main__':\n    main()\n"
    assert [(b.name, b.was, b.code) for b in literal_bounds(code)] == [
        ("num_epochs", "30", "def main(num_epochs=30, lr=0.1):")
    ]
    passed = "def main(num_epochs=30):\n    pass\n\nmain(epochs_from_file)\n"
    assert literal_bounds(passed) == []
    # A literal passed instead is the bound, at the call (test_literal_arguments_...).
    passed = "def main(num_epochs=30):\n    pass\n\nmain(3)\n"
    assert [(b.was, b.site, b.code) for b in literal_bounds(passed)] == [
        ("3", "argument", "main(3)")
    ]
    uncalled = "def main(num_epochs=30):\n    pass\n"
    assert literal_bounds(uncalled) == []


def test_a_small_keyword_is_not_cut_to_a_tenth(make_repo) -> None:
    """augmented-neural-odes' notebook calls `trajectory_plt(..., timesteps=10)`: 10 points
    of a plot, named like a bound. A setting under its usual smoke value is cut to a tenth
    (a run already that short), a call's keyword is not: rb does not know the function."""
    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.merge import merge_findings

    root = make_repo(
        {
            "README.md": "```bash\npython fit.py\n```\n",
            "fit.py": (
                "import random\n\nSTEPS = 60\n\n\ndef draw(w, timesteps=1):\n    return w\n\n\n"
                "w = 0.0\nfor step in range(STEPS):\n    loss = (w - 1) ** 2\n"
                "    w -= 0.1 * 2 * (w - 1)\n    print('loss:', loss)\n"
                "draw(w, timesteps=10)\ndraw(w, 10)\ndraw(w, 5000)\n"
            ),
        }
    )
    merged = merge_findings(detect_repo(RepoIndex.from_directory(root)), repo_name="x")
    edits = merged.manifest.experiments["fit"].tiers["smoke"].edits
    # Nor is the same argument passed by position; one above the usual value is lowered.
    assert [(e.code, e.value) for e in edits] == [("STEPS = 60", 6), ("draw(w, 5000)", 2000)]


_OPTIMIZE = "def optimize(func, num_iter, bounds, workers=0):\n    pass\n\n"


@pytest.mark.parametrize(
    ("code", "name", "was"),
    [
        # Issue 9 (bayesian-optimization): the run's length is a literal argument.
        (_OPTIMIZE + "for w in [1, 2]:\n    res = optimize(rosen, 200, b, w)", "num_iter", "200"),
        (_OPTIMIZE + "optimize(rosen, num_iter=200, bounds=b)", "num_iter", "200"),  # keyword
        (
            "def fit(model, epochs, lr):\n    pass\n\ndef main():\n    fit(net, 30, 0.1)\n\n"
            "if __name__ == '__main__':\n    main()",
            "epochs",
            "30",
        ),
        ("async def run(n_steps):\n    pass\n\nasyncio.run(run(500))", "n_steps", "500"),
        ("def train(*, epochs):\n    pass\n\ntrain(epochs=10)", "epochs", "10"),
    ],
)
def test_literal_arguments_of_own_functions_are_bounds(code: str, name: str, was: str) -> None:
    [bound] = literal_bounds(code)
    assert (bound.name, bound.was) == (name, was)
    assert code.splitlines()[bound.line - 1][bound.column :].startswith(was)


@pytest.mark.parametrize(
    "call",
    [
        "optimize(rosen, 200.0, b)",  # not an int constant
        "optimize(rosen, 2 * 100, b)",
        "optimize(rosen, True, b)",
        "optimize(rosen, -1, b)",
        "optimize(rosen, 0, b)",
        "optimize(200, rosen, b)",  # `func` bounds nothing
        "optimize(*args, 200)",  # positions after *args are unknown
        "opt.optimize(rosen, 200, b)",  # a method of some object, not this function
        "other(rosen, 200, b)",  # a function the file does not define
    ],
)
def test_literal_arguments_that_are_not_bounds(call: str) -> None:
    assert literal_bounds(_OPTIMIZE + call) == []


@pytest.mark.parametrize(
    "code",
    [
        "def solve(A, max_iter):\n    pass\n\nsolve(A, 1000)",  # a solver's cap
        "def f(x):\n    pass\n\nf(100)\n\ndef f(n_steps):\n    pass",  # defined twice
        "def f(n_steps):\n    pass\n\nfrom lib import f\nf(100)",  # rebound by an import
        "def f(n_steps):\n    pass\n\nf, g = jit(f), 1\nf(100)",  # rebound by an assignment
        "def f(n_steps):\n    pass\n\ndef g():\n    f(100)",  # in code nothing runs
        "class T:\n    def f(self, n_steps):\n        pass\n\nf(100)",  # a method
    ],
)
def test_arguments_of_unknown_or_ambiguous_functions_are_not_bounds(code: str) -> None:
    assert literal_bounds(code) == []


def _imported(tmp_path: Path, files: dict[str, str], entry: str) -> dict[str, list[str]]:
    """What ``entry``'s calls reach in the repository ``files``: name -> parameters."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    ctx = DetectContext(RepoIndex.from_directory(tmp_path))
    tree = ctx.index.parse_python(entry)
    assert tree is not None
    found = imported_definitions(ctx, entry, [tree])
    return {name: [a.arg for a in args.args] for name, args in found.items()}


def test_functions_of_imported_repository_modules_are_known_by_the_name_called(
    tmp_path: Path,
) -> None:
    helpers = "def descend(w, epochs):\n    pass\n\nclass Model:\n    pass\n"
    files = {
        "lib/helpers.py": helpers,
        "lib/__init__.py": "",
        "lib/run.py": "from .helpers import descend as d\nimport lib.helpers\nimport numpy as np\n",
    }
    assert _imported(tmp_path, files, "lib/run.py") == {
        "d": ["w", "epochs"],
        "lib.helpers.descend": ["w", "epochs"],
    }


def test_an_imported_name_that_reaches_two_functions_is_left_out(tmp_path: Path) -> None:
    files = {
        "a.py": "def fit(x, epochs):\n    pass\n",
        "b.py": "def fit(epochs, x):\n    pass\n",
        "run.py": "from a import fit\nif cond:\n    from b import fit\n",
    }
    assert _imported(tmp_path, files, "run.py") == {}


def test_an_imported_function_the_entry_rebinds_is_not_known(tmp_path: Path) -> None:
    """``train = jit(train)`` may change the signature: the call's positions are unknown.
    Assigning an attribute or an item of the name rebinds nothing."""
    (tmp_path / "utils.py").write_text("def train(model, epochs):\n    pass\n")
    (tmp_path / "run.py").write_text(
        "from utils import train\ntrain, lr = jit(train), 0.1\ntrain(net, 100)\n"
    )
    ctx = DetectContext(RepoIndex.from_directory(tmp_path))
    assert (
        dict(call_signatures(ctx, "run.py", [ast.parse((tmp_path / "run.py").read_text())])) == {}
    )
    (tmp_path / "run.py").write_text("from utils import train\ntrain.x = 1\ntrain(net, 100)\n")
    ctx = DetectContext(RepoIndex.from_directory(tmp_path))
    assert list(call_signatures(ctx, "run.py", [ast.parse((tmp_path / "run.py").read_text())])) == [
        "train"
    ]


def test_a_notebook_cell_calls_a_function_an_earlier_cell_defines(make_repo) -> None:
    """A notebook's cells are one program: `descend(w0, 10000, 0.001)` in one cell reaches
    `def descend(w, n_steps, lr)` of another; the edit is placed in the calling cell."""
    import json

    from reprobridge.detect import detect_repo
    from reprobridge.detect.findings import BoundValue

    def cell(source: str) -> dict[str, object]:
        return {"cell_type": "code", "metadata": {}, "outputs": [], "source": source}

    nb = {
        "cells": [
            cell("def descend(w, n_steps, lr):\n    for _ in range(n_steps):\n        w -= lr\n"),
            cell("w0 = 1.0\npath = descend(w0, 10000, 0.001)\nprint('final loss:', path)\n"),
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    root = make_repo(
        {
            "README.md": "```bash\njupyter nbconvert --to notebook --execute demo.ipynb\n```\n",
            "demo.ipynb": json.dumps(nb, indent=1),
        }
    )
    ctx = detect_repo(RepoIndex.from_directory(root))
    bounds = [f.value for f in ctx.of(BoundValue)]
    assert [(b.cell, b.line, b.name, b.was, b.site) for b in bounds] == [
        (2, 2, "n_steps", "10000", "argument")
    ]
