"""Literal run bounds in code (reprobridge.detect.procedure.bounds): what counts and what does not."""

from __future__ import annotations

import pytest

from reprobridge.detect.procedure.bounds import literal_bounds
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
    [("EPOCHS", "assign", 1), ("max_iters", "assign", 20), ("epoch", "loop", 1), ("k", "loop", 20)],
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
    passed = "def main(num_epochs=30):\n    pass\n\nmain(3)\n"
    assert literal_bounds(passed) == []
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
                "draw(w, timesteps=10)\n"
            ),
        }
    )
    merged = merge_findings(detect_repo(RepoIndex.from_directory(root)), repo_name="x")
    edits = merged.manifest.experiments["fit"].tiers["smoke"].edits
    assert [(e.code, e.value) for e in edits] == [("STEPS = 60", 6)]
