"""Which experiments `rb audit --tier smoke` runs when none is named (issue 9): the ones
marked ``main``, so a smoke audit is a quick check of *the* experiment instead of every
tutorial of a repository in a row (four smoke runs in a row hit the bench's time limit)."""

from __future__ import annotations

import pytest

from reprobridge.audit.plan import plan_runs, select_experiments
from reprobridge.errors import AuditError
from reprobridge.manifest.schema import Manifest


def _manifest(experiments: dict[str, dict[str, object]]) -> Manifest:
    return Manifest.model_validate(
        {"schema": 1, "project": {"name": "p"}, "experiments": experiments}
    )


SMOKE = {"smoke": {"timeout": "10m"}}


def test_smoke_runs_only_the_main_experiment() -> None:
    m = _manifest(
        {
            "tutorial": {"command": "python a.py", "tiers": SMOKE},
            "train": {"command": "python t.py", "tiers": SMOKE, "main": True},
            "mnist": {"command": "python m.py", "tiers": SMOKE},
        }
    )
    assert select_experiments(m, None, "smoke").ids == ("train",)
    assert [r.experiment for r in plan_runs(m, None, runs=1, tier="smoke")] == ["train"]
    # The full tier too runs the main experiment; --all and a named one are not narrowed.
    assert [r.experiment for r in plan_runs(m, None, runs=1, tier="full")] == ["train"]
    assert select_experiments(m, None, "full", everything=True).ids == (
        "tutorial",
        "train",
        "mnist",
    )
    assert [r.experiment for r in plan_runs(m, ["mnist"], runs=1, tier="smoke")] == ["mnist"]


def test_without_main_every_experiment_with_the_tier_runs() -> None:
    # A hand-written manifest that marks nothing keeps the old meaning.
    m = _manifest(
        {
            "a": {"command": "python a.py", "tiers": SMOKE},
            "b": {"command": "python b.py"},
            "c": {"command": "python c.py", "tiers": SMOKE},
        }
    )
    assert select_experiments(m, None, "smoke").ids == ("a", "c")


def test_a_main_experiment_without_the_tier_does_not_hide_the_others() -> None:
    m = _manifest(
        {
            "a": {"command": "python a.py", "main": True},
            "b": {"command": "python b.py", "tiers": SMOKE},
        }
    )
    assert select_experiments(m, None, "smoke").ids == ("b",)


def test_no_experiment_with_the_tier_is_an_error() -> None:
    m = _manifest({"a": {"command": "python a.py", "main": True}})
    with pytest.raises(AuditError, match="no experiment has a smoke tier"):
        select_experiments(m, None, "smoke")
