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


def _at(f: Finding, *places: str) -> Finding:
    """``f`` found at ``places`` (``path:line``) instead."""
    evidence = tuple(Evidence(p.split(":")[0], int(p.split(":")[1])) for p in places)
    return Finding(f.kind, f.key, f.value, evidence, f.detector, f.confidence)


def test_a_readme_command_outranks_one_found_only_in_docs_pages() -> None:
    """Issue 9 (a held-out RL repository): a docs/ page documents variants; the README's
    own command comes first even when the docs command has a slight edge (confidence)."""
    docs = _at(cand("algos/ppo_pixels.py", "readme", "high"), "docs/algos/ppo.md:40")
    front = _at(cand("algos/ppo_chain.py", "readme", "medium"), "README.md:12")
    kept, _ = rank([docs, front], [], [])
    assert [r.finding.value.entry for r in kept] == ["algos/ppo_chain.py", "algos/ppo_pixels.py"]
    assert "found only in docs/ pages" in kept[1].why()
    # Also in the README: not a docs-only command.
    both = _at(docs, "README.md:30", "docs/algos/ppo.md:40")
    kept, _ = rank([both, front], [], [])
    assert kept[0].finding.value.entry == "algos/ppo_pixels.py"


def test_a_command_that_needs_an_optional_requirement_set_is_not_main() -> None:
    """Issue 9 (cleanrl): the README installs `.[atari]` before the Atari command; the
    environment rb builds holds no optional set, so a plain command is the main one."""
    atari = _at(cand("algos/ppo_atari.py", "readme", "high"), "README.md:5")
    plain = _at(cand("algos/ppo.py", "readme", "high"), "README.md:9")
    reporting = frozenset({"algos/ppo_atari.py", "algos/ppo.py"})
    kept, _ = rank([atari, plain], [], [], reporting=reporting)
    assert kept[0].finding.value.entry == "algos/ppo_atari.py"  # the README's first
    kept, _ = rank([atari, plain], [], [], reporting=reporting, needs_extra=lambda f: f is atari)
    assert kept[0].finding.value.entry == "algos/ppo.py"
    passed = [r for r in kept if r.finding is atari]
    assert passed[0].blocked
    assert "cannot run in the environment rb builds (needs an optional requirement set)" in (
        main_reason(kept[0], passed)
    )


def test_a_run_that_never_ends_is_not_main_even_when_it_reports() -> None:
    """A loop with no exit and no bound: its smoke run can only be stopped at the time
    limit (a failed run); a finite run is main even if it prints no metric."""
    stream = cand("train.py", "readme", "high")
    finite = cand("examples/fit.py", "entrypoints")
    reporting = frozenset({"train.py"})
    kept, _ = rank([stream, finite], [], [], reporting=reporting, bounded=frozenset())
    assert kept[0].finding.value.entry == "train.py"
    kept, _ = rank(
        [stream, finite], [], [], reporting=reporting, bounded=frozenset(),
        endless=frozenset({"train.py"}),
    )  # fmt: skip
    assert kept[0].finding.value.entry == "examples/fit.py"
    passed = [r for r in kept if r.finding is stream]
    assert "loops without end" in passed[0].why()
    assert "could only fail at its time limit" in main_reason(kept[0], passed)
    # A bound the smoke tier sets ends it: not endless.
    kept, _ = rank(
        [stream, finite], [], [], reporting=reporting, bounded=frozenset({"train.py"}),
        endless=frozenset({"train.py"}),
    )  # fmt: skip
    assert kept[0].finding.value.entry == "train.py"


def test_a_bound_tips_the_main_choice_only_among_about_equal_runs() -> None:
    """No bound found is not "never ends": a README-named example whose smoke tier is the
    full command (it finishes in seconds) stays main over a bounded example scoring lower;
    the handicap only tips candidates that are about equal."""
    named = cand("examples/gaussian_process.py", "readme", "high")
    other = cand("examples/mixture.py", "entrypoints")
    reporting = frozenset({"examples/gaussian_process.py", "examples/mixture.py"})
    bounded = frozenset({"examples/mixture.py"})
    kept, _ = rank([named, other], [], [], reporting=reporting, bounded=bounded)
    assert kept[0].finding is named
    assert "no parameter bounds a smoke run" in kept[0].why()
