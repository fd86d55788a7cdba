"""merge._finalize helpers."""

from __future__ import annotations

import pytest


def test_longest_prefix_key_matches_sorting_every_key() -> None:
    # Issue 14: _finalize sorted every provenance key for every leaf; the prefix walk must
    # pick the same key (the longest that is the path or a dotted prefix of it).
    import random

    from reprobridge.recovery.merge import _longest_prefix_key

    rng = random.Random(7)
    parts = ["a", "b", "ab", "experiments", "x", "x.y", "metrics"]
    keys = {".".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) for _ in range(60)}
    for _ in range(500):
        path = ".".join(rng.choice(parts) for _ in range(rng.randint(1, 6)))
        old = next(
            (
                k
                for k in sorted(keys, key=len, reverse=True)
                if path == k or path.startswith(k + ".")
            ),
            None,
        )
        assert _longest_prefix_key(dict.fromkeys(keys), path) == old, path


def test_a_paper_percentage_stays_in_percent_for_a_metric_printed_in_percent(make_repo) -> None:
    """The paper's 96.5% is the fraction 0.965 for a metric the code prints as a fraction,
    but 96.5 for one it prints as a percentage (``test accuracy: 96.47%``): otherwise a run
    that reproduces the paper exactly fails its threshold by a factor of 100."""

    def target(printed: str) -> object:
        return _paper_metric(make_repo, printed, "96.5").target

    assert target("f'test_accuracy: {test_accuracy:.4f}'") == 0.965
    assert target("f'test_accuracy: {100 * test_accuracy:.2f}%'") == 96.5


def test_a_command_that_names_a_bounded_config_file_ranks_as_bounded(make_repo) -> None:
    """Issue 9 (augmented-neural-odes): `python main.py config.json` whose run length is in
    the config file has a smoke tier (the file's bounds lowered in a copy), so the ranking
    must not handicap it as a run no bound keeps short."""
    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.experiments import MAIN_DECISION
    from reprobridge.recovery.merge import merge_findings

    root = make_repo(
        {
            "main.py": (
                "import json\nimport sys\n\n"
                "cfg = json.load(open(sys.argv[1]))\nloss = 1.0\n"
                "for epoch in range(cfg['epochs']):\n    loss *= 0.9\n"
                "print(f'loss: {loss:.4f}')\n"
            ),
            "config.json": '{\n  "epochs": 50\n}\n',
            "README.md": "```bash\npython main.py config.json\n```\n",
        },
        git=False,
    )
    merged = merge_findings(detect_repo(RepoIndex.from_directory(root)), repo_name="x")
    (why,) = [d for d in merged.notes.decisions if MAIN_DECISION in d]
    assert "no parameter bounds a smoke run" not in why
    (exp,) = merged.manifest.experiments.values()
    assert exp.tiers["smoke"].edits


def test_a_loop_that_ends_at_a_budget_is_not_endless(make_repo) -> None:
    """`while True:` whose only exit tests a step budget (`if step >= max_steps: break`)
    ends on its own, even when no flag sets the budget: it is not ranked as a loop without
    end (only a loop with no exit at all is)."""
    from reprobridge.detect import detect_repo
    from reprobridge.detect.findings import UnboundedValue
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.experiments import MAIN_DECISION
    from reprobridge.recovery.merge import merge_findings

    loop = (
        "import os\n\nmax_steps = int(os.environ.get('MAX_STEPS', '500'))\n"
        "w, step = 0.0, 0\nwhile True:\n    loss = (w - 3.0) ** 2\n    w -= 0.1 * (w - 3.0)\n"
        "    step += 1\n{exit}    if step % 100 == 0:\n        print(f'loss: {{loss:.4f}}')\n"
    )
    files = {
        "examples/fit_once.py": "loss = 0.5\nprint(f'final loss: {loss}')\n",
        "README.md": "```bash\npython train.py\npython examples/fit_once.py\n```\n",
    }
    for exit_, main in (("    if step >= max_steps:\n        break\n", "train"), ("", "fit_once")):
        root = make_repo({**files, "train.py": loop.format(exit=exit_)}, git=False)
        ctx = detect_repo(RepoIndex.from_directory(root))
        (u,) = [f for f in ctx.findings if isinstance(f.value, UnboundedValue)]
        assert u.value.budget == ("max_steps" if exit_ else None)
        merged = merge_findings(ctx, repo_name="x")
        (why,) = [d for d in merged.notes.decisions if MAIN_DECISION in d]
        assert why.startswith(f"{main} "), why


def _paper_metric(make_repo, printed: str, cell: str, column: str = "Test accuracy (%)") -> object:
    """The test_accuracy metric `rb init` recovers from a paper whose table holds ``cell``."""
    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.merge import merge_findings

    root = make_repo(
        {
            "train.py": (
                "import argparse\n\nimport numpy as np\n\n"
                "if __name__ == '__main__':\n"
                "    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('--seed', type=int, default=0)\n"
                "    args = parser.parse_args()\n"
                "    test_accuracy = float(np.float64(0.9647))\n"
                f"    print({printed})\n"
            ),
            "paper.md": (
                "## Results\n\n**Table 1:** Test accuracy.\n\n"
                f"| Model | {column} |\n|---|---|\n| Train | {cell} |\n"
            ),
            "README.md": "```bash\npython train.py\n```\n",
        },
        git=False,
    )
    merged = merge_findings(
        detect_repo(RepoIndex.from_directory(root), paper_path="paper.md"),
        repo_name="x",
        paper_path="paper.md",
    )
    (exp,) = merged.manifest.experiments.values()
    return exp.metrics["test_accuracy"]


FRACTION = "f'test_accuracy: {test_accuracy:.4f}'"
PERCENT = "f'test_accuracy: {100 * test_accuracy:.2f}%'"


@pytest.mark.parametrize(
    ("printed", "cell", "column", "target", "tolerance", "source"),
    [
        # no spread: half a unit of the last printed digit, never a flat 5%
        (FRACTION, "81.0", "Test accuracy (%)", 0.81, 0.0005, "paper-precision"),
        (PERCENT, "81.0", "Test accuracy (%)", 81.0, 0.05, "paper-precision"),
        (FRACTION, "0.99", "Test accuracy", 0.99, 0.005, "paper-precision"),
        (FRACTION, "96", "Test accuracy (%)", 0.96, 0.005, "paper-precision"),
        # a stated spread: 3 x spread, at least 1% of the target
        (FRACTION, "79.0 ± 5.7", "Test accuracy (%)", 0.79, 0.171, "paper-spread"),
        (PERCENT, "79.0 ± 0.1", "Test accuracy (%)", 79.0, 0.79, "paper-spread"),
    ],
)
def test_a_papers_tolerance_follows_what_the_paper_states(
    make_repo, printed: str, cell: str, column: str, target: float, tolerance: float, source: str
) -> None:
    """A paper's 0.99 with no spread was given `relative_tolerance = 0.05`, so 0.9405 (a
    5-point gap) "reproduced" it. The band now follows the paper: the spread it states,
    else the rounding of the number it prints; and says where it came from."""
    metric = _paper_metric(make_repo, printed, cell, column)
    assert metric.target == pytest.approx(target)
    assert metric.tolerance == pytest.approx(tolerance)
    assert metric.relative_tolerance is None
    assert metric.tolerance_source == source
