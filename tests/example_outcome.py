"""What a judged audit of the bundled example (examples/mixup-paper) concludes with two or
more runs: every experiment passes every level, and the paper's claim `mixup > baseline`
holds on the means. Both experiments run the same seeds, so the runs pair by seed and the
claim is judged by the paired t test: with 3 seeds (`rb demo`'s default) t = 4.97, df = 2,
one-sided p = 0.019 < 0.05, so the audit PASSes; with 2 seeds t = 3, df = 1, p = 0.10, not
significant, so it is INCOMPLETE (exit 20), never a plain PASS. (Welch's unpaired test
would not show it even at 3 seeds, p = 0.056: most of the seed-to-seed variation is the
seed's, shared by both methods.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLAIM = "mixup.test_accuracy > baseline.test_accuracy"


def example_runs(summary: Mapping[str, Any]) -> int:
    """How many runs of each experiment the summary judged."""
    return int(summary["experiments"]["mixup"]["per_metric"]["test_accuracy"]["stats"]["n"])


def assert_example_judged(summary: Mapping[str, Any]) -> None:
    """``summary`` (audit.json's judged part, or `rb audit --json`) is the example's outcome
    over several runs: every level passes, and the claim is judged by the paired test,
    significant at 3 runs, not at 2."""
    for exp_id, v in summary["experiments"].items():
        levels = tuple(v[level]["status"] for level in ("environment", "procedure", "metric"))
        assert levels == ("pass",) * 3, (exp_id, v)
    (claim,) = summary["claims"]
    assert claim["test"].startswith("paired t test over the seeds both sides ran"), claim
    if example_runs(summary) >= 3:
        assert (claim["expr"], claim["outcome"], claim["holds"]) == (CLAIM, "holds", True), claim
        assert (summary["verdict"], summary["passed"]) == ("PASS", True), summary
        return
    assert (claim["expr"], claim["outcome"], claim["holds"]) == (
        CLAIM,
        "holds-not-significant",
        None,
    ), claim
    assert (summary["verdict"], summary["passed"]) == ("INCOMPLETE", False), summary
    (gap,) = summary["incomplete"]
    assert gap.startswith(f"claim {CLAIM}: holds on the means, not significant"), gap
