"""What a judged audit of the bundled example (examples/mixup-paper) concludes with two or
more runs: every experiment passes every level, and the paper's claim `mixup >
baseline` holds on the means but is not significant by Welch's t test at alpha 0.05 (seed
to seed, test accuracy varies by about 5 points against a 9-point gain; with 3 seeds one-sided
p = 0.056), so the overall verdict is INCOMPLETE, exit 20, never a plain PASS."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLAIM = "mixup.test_accuracy > baseline.test_accuracy"


def assert_example_judged(summary: Mapping[str, Any]) -> None:
    """``summary`` (audit.json's judged part, or `rb audit --json`) is the example's outcome
    over several runs: every level passes, and the one gap is the claim's significance."""
    for exp_id, v in summary["experiments"].items():
        levels = tuple(v[level]["status"] for level in ("environment", "procedure", "metric"))
        assert levels == ("pass",) * 3, (exp_id, v)
    (claim,) = summary["claims"]
    assert (claim["expr"], claim["outcome"], claim["holds"]) == (
        CLAIM,
        "holds-not-significant",
        None,
    ), claim
    assert (summary["verdict"], summary["passed"]) == ("INCOMPLETE", False), summary
    (gap,) = summary["incomplete"]
    assert gap.startswith(f"claim {CLAIM}: holds on the means, not significant"), gap
