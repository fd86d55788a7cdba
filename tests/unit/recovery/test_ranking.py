"""Ranking experiment candidates (reprobridge.recovery.ranking)."""

from __future__ import annotations

from reprobridge.detect.base import Evidence, Finding
from reprobridge.detect.findings import ExperimentValue, MentionValue, TargetValue
from reprobridge.recovery.ranking import FALLBACK_KEPT, main_reason, rank


def cand(entry: str, detector: str, confidence: str = "medium") -> Finding:
    key = entry.rsplit("/", 1)[-1].split(".")[0]
    return Finding(
        "experiment",
        key,
        ExperimentValue(f"run {entry}", "script", "", entry, "."),
        (Evidence(entry, 1),),
        detector,
        confidence,  # type: ignore[arg-type]
    )


def test_many_tutorial_notebooks_keep_only_a_few() -> None:
    notebooks = [cand(f"tutorials/{i:02d}_topic.ipynb", "notebooks") for i in range(96)]
    kept, others = rank(notebooks, [], [])
    assert 1 <= len(kept) <= FALLBACK_KEPT
    assert len(kept) + len(others) == 96


def test_a_plain_train_script_beats_notebooks() -> None:
    cands = [
        cand("tutorials/intro.ipynb", "notebooks"),
        cand("demo.ipynb", "notebooks"),
        cand("train.py", "entrypoints", "low"),
    ]
    kept, others = rank(cands, [], [])
    assert [r.finding.value.entry for r in kept] == ["train.py"]
    assert "experiment-like name" in kept[0].why()
    assert {r.finding.value.entry for r in others} == {"tutorials/intro.ipynb", "demo.ipynb"}


def test_readme_commands_are_kept_and_mentions_and_tables_raise_a_candidate() -> None:
    mention = Finding("mention", "nb/result.ipynb", MentionValue("nb/result.ipynb"), (), "readme")
    row = TargetValue("Logistic baseline", "acc", 0.9, "Table 1", "", None, False)
    target = Finding("target", "r::c", row, (), "paper")
    cands = [
        cand("scripts/plot_figures.py", "readme", "high"),  # declared: kept whatever its name
        cand("nb/result.ipynb", "notebooks"),
        cand("logistic.py", "entrypoints", "low"),
        cand("other.ipynb", "notebooks"),
    ]
    kept, others = rank(cands, [mention], [target])
    assert {r.finding.value.entry for r in kept} == {
        "scripts/plot_figures.py",
        "nb/result.ipynb",
        "logistic.py",
    }
    assert [r.finding.value.entry for r in others] == ["other.ipynb"]


def test_a_candidate_that_prints_a_result_goes_first() -> None:
    """Issue 9 (ML-From-Scratch, pytorch/examples): of undistinguished example scripts, the
    main experiment is one whose result rb can read, not an apriori demo or a data
    generator that prints nothing a smoke audit could extract."""
    cands = [
        cand("examples/apriori.py", "entrypoints"),
        cand("examples/decision_tree.py", "entrypoints"),
        cand("examples/generate_data.py", "entrypoints"),
    ]
    kept, _ = rank(cands, [], [], reporting=frozenset({"examples/decision_tree.py"}))
    assert kept[0].finding.value.entry == "examples/decision_tree.py"
    assert "prints a result rb can read" in kept[0].why()
    kept, _ = rank(cands, [], [])
    assert kept[0].finding.value.entry != "examples/decision_tree.py"  # only by that signal


def test_main_runs_here_and_reports_even_when_not_kept_otherwise() -> None:
    """Issue 9 (yunjey/pytorch-tutorial): every README command reads COCO, which the
    repository lacks; the synthetic-data script beside them scores too low to be kept, yet
    it is the main experiment (kept, first), and the README commands stay kept."""
    cands = [
        cand("tutorials/captioning/train.py", "readme", "high"),
        cand("tutorials/captioning/sample.py", "readme", "high"),
        cand("tutorials/basics/linear_regression/main.py", "entrypoints", "low"),
    ]
    fetching = frozenset({"tutorials/captioning/train.py", "tutorials/captioning/sample.py"})
    reporting = frozenset(
        {"tutorials/captioning/train.py", "tutorials/basics/linear_regression/main.py"}
    )
    kept, others = rank(cands, [], [], fetching, reporting=reporting)
    assert kept[0].finding.value.entry == "tutorials/basics/linear_regression/main.py"
    assert {r.finding.value.entry for r in kept[1:]} == fetching
    assert others == []
    # Without the handicap, the README's command is the main one.
    kept, _ = rank(cands, [], [], reporting=reporting)
    assert kept[0].finding.value.entry == "tutorials/captioning/train.py"


def test_a_readme_command_without_a_metric_is_not_main() -> None:
    """Issue 9 (HIPS/autograd): the README's `python3 tanh.py` plots and prints nothing rb
    can read; a lower-scored example that prints a metric is the main experiment."""
    cands = [cand("examples/tanh.py", "readme", "high"), cand("examples/fit.py", "entrypoints")]
    kept, _ = rank(cands, [], [], reporting=frozenset({"examples/fit.py"}))
    assert kept[0].finding.value.entry == "examples/fit.py"
    passed = [r for r in kept if r.finding.value.entry == "examples/tanh.py"]
    assert "prints no result rb can read" in main_reason(kept[0], passed)


def test_of_equals_a_bounded_run_beats_an_unbounded_one_and_the_first_mention_breaks_ties() -> None:
    mention = [
        Finding("mention", "b.py", MentionValue("b.py"), (Evidence("README.md", 3),), "readme"),
        Finding("mention", "a.py", MentionValue("a.py"), (Evidence("README.md", 9),), "readme"),
    ]
    cands = [cand("a.py", "entrypoints"), cand("b.py", "entrypoints")]
    kept, _ = rank(cands, mention, [])
    assert kept[0].finding.value.entry == "b.py"  # mentioned first
    kept, _ = rank(cands, mention, [], bounded=frozenset({"a.py"}))
    assert kept[0].finding.value.entry == "a.py"
    assert "no parameter bounds a smoke run" in next(r for r in kept if r.finding.key == "b").why()
