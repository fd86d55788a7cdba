"""The renaming edits rb init derives after the lock (reprobridge/recovery/drift.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.detect.base import Evidence, Finding
from reprobridge.detect.findings import DriftValue, Removal
from reprobridge.manifest.io import digest
from reprobridge.manifest.schema import Manifest, SourceEdit
from reprobridge.recovery._common import MergeResult
from reprobridge.recovery.drift import locked_versions, with_drift_edits

REPOS = Path(__file__).resolve().parents[2] / "fixtures/repos"
NB = "demo.ipynb"
COMMAND = f"jupyter nbconvert --to notebook --execute --output demo.executed.ipynb {NB}"


def _manifest(
    smoke_edits: list[dict[str, object]] | None = None, smoke: bool = True, command: str = COMMAND
) -> Manifest:
    exp: dict[str, object] = {"command": command, "kind": "notebook"}
    if smoke:
        exp["tiers"] = {"smoke": {"timeout": "10m", "edits": smoke_edits or []}}
    return Manifest.model_validate({"project": {"name": "demo"}, "experiments": {"demo": exp}})


def _ref(
    was: str = "jax.tree_multimap",
    value: str = "jax.tree_util.tree_map",
    removed_in: str = "0.3.16",
    line: int = 3,
    entry: str = NB,
    file: str | None = None,
) -> Finding[DriftValue]:
    v = DriftValue(
        entry=entry,
        file=file or entry,
        cell=4,
        line=line,
        column=13,
        was=was,
        value=value,
        removal=Removal(
            distribution="jax",
            name=was,
            removed_in=removed_in,
            replacement="jax.tree_util.tree_map",
            source="https://github.com/jax-ml/jax/releases/tag/jax-v0.3.16",
        ),
        code=f"params = {was}(f, params, grads)",
    )
    return Finding("api_drift", f"{entry}::4:{line}:13", v, (Evidence(entry, 41),), "drift")


def _lock(jax: str) -> bytes:
    return (
        'version = 1\nrequires-python = "==3.9.*"\n\n'
        f'[[package]]\nname = "jax"\nversion = "{jax}"\nsource = {{ registry = "https://pypi.org/simple" }}\n\n'
        '[[package]]\nname = "numpy"\nversion = "1.22.1"\nsource = { registry = "https://pypi.org/simple" }\n'
    ).encode()


def test_a_locked_version_past_the_removal_renames_in_every_tier() -> None:
    merged = MergeResult(_manifest())
    out = with_drift_edits(merged, [_ref()], _lock("0.4.13"))
    exp = out.manifest.experiments["demo"]
    for tier in ("full", "smoke"):
        (edit,) = exp.tier(tier).edits  # type: ignore[arg-type]
        assert edit == SourceEdit(
            file=NB,
            cell=4,
            line=3,
            column=13,
            was="jax.tree_multimap",
            value="jax.tree_util.tree_map",
            when="jax>=0.3.16",
            code="params = jax.tree_multimap(f, params, grads)",
        )
        prov = out.manifest.derived[f"experiments.demo.tiers.{tier}.edits"]
        assert (
            "rb rule: jax 0.4.13 (locked) removed jax.tree_multimap in 0.3.16: "
            "https://github.com/jax-ml/jax/releases/tag/jax-v0.3.16" in prov.sources
        )
        assert f"{NB}:41" in prov.sources
        assert prov.digest == digest([edit.model_dump(mode="json", exclude_none=True)])
    # A renaming edit shortens nothing: the smoke tier stays an unbounded one.
    assert not exp.tier("smoke").bounded
    (decision,) = out.notes.decisions
    assert decision.startswith("demo: every tier runs a copy of demo.ipynb")
    assert (
        "`jax.tree_multimap` -> `jax.tree_util.tree_map` at cell 4 line 3 (jax 0.4.13" in decision
    )


def test_a_locked_version_that_still_has_the_name_gets_no_edit() -> None:
    merged = MergeResult(_manifest())
    assert with_drift_edits(merged, [_ref()], _lock("0.3.4")) is merged


def test_without_a_lock_the_edit_waits_for_the_runs_version() -> None:
    out = with_drift_edits(MergeResult(_manifest()), [_ref()], None)
    (edit,) = out.manifest.experiments["demo"].tier("full").edits
    assert edit.when == "jax>=0.3.16"
    prov = out.manifest.derived["experiments.demo.tiers.full.edits"]
    assert any("jax (not locked: the run's version decides)" in s for s in prov.sources)
    assert prov.confidence == "medium"


def test_renames_join_the_smoke_tiers_lowered_bounds_in_place_order() -> None:
    bound = {"file": NB, "cell": 5, "line": 1, "column": 13, "was": "5000", "value": 1}
    out = with_drift_edits(MergeResult(_manifest([bound])), [_ref()], _lock("0.4.13"))
    smoke = out.manifest.experiments["demo"].tier("smoke")
    assert [(e.cell, e.value) for e in smoke.edits] == [(4, "jax.tree_util.tree_map"), (5, 1)]
    assert smoke.bounded  # the lowered bound still bounds it
    assert [e.value for e in out.manifest.experiments["demo"].tier("full").edits] == [
        "jax.tree_util.tree_map"
    ]


def test_a_smoke_tier_that_edits_another_file_keeps_one_file_per_tier() -> None:
    config = {"file": "config.json", "line": 2, "column": 12, "was": "30", "value": 1}
    merged = MergeResult(_manifest([config]))
    out = with_drift_edits(merged, [_ref()], _lock("0.4.13"))
    assert out.manifest.experiments == merged.manifest.experiments
    assert any("a tier already edits config.json" in w for w in out.notes.warnings)


def test_an_experiment_without_a_smoke_tier_gets_the_full_tiers_edits() -> None:
    out = with_drift_edits(MergeResult(_manifest(smoke=False)), [_ref()], _lock("0.4.13"))
    assert set(out.manifest.experiments["demo"].tiers) == {"full"}


def test_a_reference_no_edit_fixes_is_a_warning_not_an_edit() -> None:
    merged = MergeResult(_manifest())
    out = with_drift_edits(merged, [_ref(value="")], _lock("0.4.13"))
    assert out.manifest.experiments == merged.manifest.experiments
    (warning,) = out.notes.warnings
    assert "demo.ipynb cell 4 line 3 `jax.tree_multimap`" in warning
    assert "change them by hand" in warning


def test_references_in_a_file_the_command_does_not_run_are_not_edited() -> None:
    merged = MergeResult(_manifest())
    assert with_drift_edits(merged, [_ref(entry="other.ipynb")], _lock("0.4.13")) is merged


def test_locked_versions_reads_every_version_of_a_lock() -> None:
    assert locked_versions(None) is None
    assert locked_versions(b"not toml [") is None
    versions = locked_versions(_lock("0.4.13"))
    assert versions is not None
    assert [str(v) for v in versions["jax"]] == ["0.4.13"]


def test_a_reference_in_a_module_the_entry_imports_is_named_not_edited() -> None:
    merged = MergeResult(_manifest())
    out = with_drift_edits(merged, [_ref(), _ref(file="helpers.py", line=9)], _lock("0.4.13"))
    assert len(out.manifest.experiments["demo"].tier("full").edits) == 1  # the entry's only
    (warning,) = out.notes.warnings
    assert "helpers.py cell 4 line 9 `jax.tree_multimap`" in warning
    assert "a module the entry imports" in warning


def test_a_shell_syntax_command_gets_a_warning_not_edits() -> None:
    merged = MergeResult(_manifest(command=COMMAND + " | tee log"))
    out = with_drift_edits(merged, [_ref()], _lock("0.4.13"))
    assert out.manifest.experiments == merged.manifest.experiments
    (warning,) = out.notes.warnings
    assert "the command is shell syntax" in warning and "`jax.tree_multimap`" in warning


def test_rb_init_writes_the_renames_and_rb_check_finds_nothing_stale(tmp_path: Path) -> None:
    """The fixture notebook after `rb init` (no lock: the run's version decides), then
    `rb check`, which renders again with the kept lock state: the same bytes."""
    import shutil
    import subprocess

    from reprobridge.initializer import check_artifacts, init_repository

    root = tmp_path / "repo"
    shutil.copytree(REPOS / "zero-notebook-removed-api", root)
    (root / "expected.toml").unlink()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    result = init_repository(root, lock="never")

    exp = result.manifest.experiments["demo"]
    assert [e.was for e in exp.tier("full").edits] == [
        "jax.tree_multimap",
        "tu.tree_multimap",
        "jax.tree_map",
    ]
    assert exp.tier("smoke").edits == exp.tier("full").edits
    assert (root / "repro/derive.py").is_file()
    launcher = (root / "repro/launchers/demo.sh").read_text()
    assert "rb_entry=demo_rb_full.ipynb" in launcher
    assert check_artifacts(root).stale == []


def _stdlib_ref(name: str, was: str, value: str, removed_in: str) -> Finding[DriftValue]:
    v = DriftValue(
        entry="train.py",
        file="train.py",
        cell=None,
        line=5,
        column=6,
        was=was,
        value=value,
        removal=Removal(
            distribution="python",
            name=name,
            removed_in=removed_in,
            replacement=value,
            source="https://docs.python.org/3/whatsnew/3.8.html#api-and-feature-removals",
        ),
        code=f"t0 = {was}()",
    )
    return Finding("api_drift", "train.py::5:6", v, (Evidence("train.py", 5),), "drift")


def test_the_standard_librarys_removals_follow_the_environments_python() -> None:
    def script(python: str) -> MergeResult:
        return MergeResult(
            Manifest.model_validate(
                {
                    "project": {"name": "t"},
                    "environment": {"python": python},
                    "experiments": {"train": {"command": "python train.py"}},
                }
            )
        )

    clock = _stdlib_ref("time.clock", "time.clock", "time.perf_counter", "3.8")
    # Python 3.7 still has time.clock: nothing to rename, lock or no lock.
    merged = script("3.7")
    assert with_drift_edits(merged, [clock], None) is merged
    out = with_drift_edits(script("3.11"), [clock], None)
    (edit,) = out.manifest.experiments["train"].tier("full").edits
    assert (edit.value, edit.when) == ("time.perf_counter", "python>=3.8")
    prov = out.manifest.derived["experiments.train.tiers.full.edits"]
    assert any(
        "Python 3.11 (environment.python) removed time.clock in 3.8" in s for s in prov.sources
    )


def test_a_renamed_method_is_edited_by_its_attribute_name_where_the_lock_lacks_it(
    tmp_path: Path,
) -> None:
    """The zero-removed-method fixture (holdout2's ffjord: `ax.set_axis_bgcolor`, gone in
    matplotlib 2.2) with matplotlib 3.3.4 and pandas 1.1.5 locked: the axes call becomes
    `ax.set_facecolor` in both tiers' copy of the script; pandas 1.1.5 still has
    `iteritems` and matplotlib 3.3.4 `legendHandles`, so those stay; the helper module's
    call is named for a person (a tier edits the script only)."""
    from reprobridge.artifacts import derive
    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.merge import merge_findings

    case = REPOS / "zero-removed-method"
    ctx = detect_repo(RepoIndex.from_directory(case))
    merged = merge_findings(ctx, repo_name="ring")
    lock = (
        b'version = 1\nrequires-python = "==3.8.*"\n\n'
        b'[[package]]\nname = "matplotlib"\nversion = "3.3.4"\n\n'
        b'[[package]]\nname = "pandas"\nversion = "1.1.5"\n'
    )
    out = with_drift_edits(merged, ctx.findings, lock)
    exp = out.manifest.experiments["fit_ring"]
    for tier in ("full", "smoke"):
        assert exp.tier(tier).edits == [
            SourceEdit(
                file="fit_ring.py",
                line=31,
                column=7,
                was="set_axis_bgcolor",
                value="set_facecolor",
                when="matplotlib>=2.2",
                code='ax.set_axis_bgcolor("white")',
            )
        ]
    assert any("viz/panels.py line 7 `set_axis_bgcolor`" in w for w in out.notes.warnings)
    text = (case / "fit_ring.py").read_text()
    (edit,) = exp.tier("full").edits
    copy, _shown = derive.derive_script(
        text, [derive.Edit(None, edit.line, edit.column, edit.value, edit.was)], "fit_ring.py"
    )
    assert '    ax.set_facecolor("white")\n' in copy
    assert copy.replace("set_facecolor", "set_axis_bgcolor") == text


def test_a_commands_parameter_placeholders_are_no_shell_syntax() -> None:
    """The launcher puts a `{name}` placeholder's value in as one quoted word: a README
    command with parameters (ffjord's `python train_toy.py --data {data} ...`) can run the
    renamed copy; `$VAR` still cannot."""
    from reprobridge.manifest.schema import plain_command

    assert plain_command("python train_toy.py --data {data} --niters {niters}")
    assert not plain_command("python train_toy.py --data $DATA")
    assert not plain_command("python train_toy.py --data {data} | tee log")


def _keyword_fixture(requirement: str = "seaborn") -> tuple[MergeResult, list[Finding]]:
    from dataclasses import replace

    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.merge import merge_findings

    ctx = detect_repo(RepoIndex.from_directory(REPOS / "zero-removed-keyword"))
    merged = merge_findings(ctx, repo_name="blobs")
    env = merged.manifest.environment.model_copy(
        update={"python_requirements": ["matplotlib", "numpy", requirement]}
    )
    return replace(merged, manifest=merged.manifest.model_copy(update={"environment": env})), list(
        ctx.findings
    )


def test_a_keyword_no_rename_fixes_bounds_its_package_below_the_release() -> None:
    """Issue 9, self-paced-ensemble: `**look` carries `cmap` to seaborn.scatterplot, which
    fails from seaborn 0.13.0 on: the requirement gets `<0.13.0` so the lock resolves 0.12,
    with the reason in the provenance and the guide's decisions."""
    from reprobridge.recovery.drift import with_drift_ceilings

    merged, findings = _keyword_fixture()
    out = with_drift_ceilings(merged, findings)
    assert out.manifest.environment.python_requirements == [
        "matplotlib",
        "numpy",
        "seaborn<0.13.0",
    ]
    why = (
        "seaborn held below 0.13.0, where seaborn.scatterplot(cmap=...) fails: the code does "
        "so where no rename fixes it (plots/scatter.py line 14 `**look`"
    )
    assert any(why in s for s in out.manifest.derived["environment.python_requirements"].sources)
    assert any(why in d for d in out.notes.decisions)


def test_a_bound_is_not_set_over_the_repositorys_own_pin_or_a_lock_that_dropped_it() -> None:
    from reprobridge.recovery.drift import with_drift_ceilings

    for pinned in ("seaborn==0.13.2", "seaborn>=0.13.1"):
        merged, findings = _keyword_fixture(pinned)
        assert with_drift_ceilings(merged, findings) is merged
    merged, findings = _keyword_fixture("seaborn>=0.11")
    capped = with_drift_ceilings(merged, findings).manifest.environment.python_requirements
    assert capped[-1] == "seaborn<0.13.0,>=0.11"

    def lock(version: str) -> bytes:
        return f'version = 1\n\n[[package]]\nname = "seaborn"\nversion = "{version}"\n'.encode()

    # A kept lock made without the bound (rb init dropped it) keeps it out; one made with it
    # keeps it in: `rb check` renders what `rb init` wrote.
    merged, findings = _keyword_fixture()
    dropped = with_drift_ceilings(merged, findings, lock("0.13.2"))
    assert dropped.manifest == merged.manifest
    assert dropped.notes.warnings[-1].startswith(
        "seaborn 0.13.2 (locked) is past 0.13.0, which the code needs below (plots/scatter.py "
        "line 14 `**look` (seaborn.scatterplot(cmap=...) fails)), and no lock below it resolved"
    )
    kept = with_drift_ceilings(merged, findings, lock("0.12.2")).manifest.environment
    assert kept.python_requirements[-1] == "seaborn<0.13.0"


def test_rb_init_locks_without_the_bounds_when_they_leave_no_resolution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound below what this Python has wheels for (ffjord: matplotlib<2.2 on 3.7) must
    not cost the environment its lock: rb init locks again without the bounds and warns."""
    import shutil
    import subprocess

    from reprobridge import initializer

    root = tmp_path / "repo"
    shutil.copytree(REPOS / "zero-removed-keyword", root)
    (root / "expected.toml").unlink()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    tried: list[list[str]] = []

    def fake_lock(
        root: Path, files: dict[str, str], mode: str, env: object
    ) -> initializer.LockOutcome:
        reqs = list(env.python_requirements)  # type: ignore[attr-defined]
        tried.append(reqs)
        if any("<" in r for r in reqs):
            return initializer.LockOutcome(
                None,
                "not locked",
                "Python packages could not be locked: no seaborn<0.13.0 for 3.13",
            )
        lock = 'version = 1\n\n[[package]]\nname = "seaborn"\nversion = "0.13.2"\n'
        return initializer.LockOutcome(lock.encode(), initializer._LOCKED_NOTE, None)

    monkeypatch.setattr(initializer, "_lock", fake_lock)
    result = initializer.init_repository(root, lock="auto")
    assert [r[-1] for r in tried] == ["seaborn<0.13.0", "seaborn"]
    assert result.manifest.environment.python_requirements[-1] == "seaborn"
    assert any(
        w.startswith("seaborn 0.13.2 (locked) is past 0.13.0") for w in result.merge.notes.warnings
    )
    # rb check renders with the kept lock (made without the bound): nothing stale.
    monkeypatch.undo()
    assert initializer.check_artifacts(root).stale == []


def test_without_any_lock_no_bound_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound only a lock proves: where PyPI cannot be reached (holdout2's ffjord), the
    unlocked requirements stay unbounded (an install of matplotlib<2.2 on Python 3.7 would
    need a build and broke numpy), and `rb check` renders the same."""
    import shutil
    import subprocess

    from reprobridge import initializer

    root = tmp_path / "repo"
    shutil.copytree(REPOS / "zero-removed-keyword", root)
    (root / "expected.toml").unlink()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)

    def no_lock(root: Path, files: dict[str, str], mode: str, env: object) -> object:
        reqs = list(env.python_requirements)  # type: ignore[attr-defined]
        return initializer.LockOutcome(None, initializer._unlocked_note(reqs), "dns error")

    monkeypatch.setattr(initializer, "_lock", no_lock)
    result = initializer.init_repository(root, lock="auto")
    assert result.manifest.environment.python_requirements[-1] == "seaborn"
    monkeypatch.undo()
    assert initializer.check_artifacts(root).stale == []


def test_code_that_uses_a_package_both_before_and_after_a_release_gets_no_bound() -> None:
    """Issue 9, seungeunrho/minimalRL: a2c.py unpacks gym's Env.step into four names (gym
    < 0.26) and REINFORCE.py into five (gym >= 0.26). `gym<0.26.0` made the main experiment
    fail ("too many values to unpack"): where the code also needs the release, no bound is
    written and the guide names both sides. With only the old side, the bound stands
    (rasbt/machine-learning-book's ch19)."""
    from dataclasses import replace

    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.recovery.drift import with_drift_ceilings
    from reprobridge.recovery.merge import merge_findings

    ctx = detect_repo(RepoIndex.from_directory(REPOS / "zero-mixed-step-api"))
    merged = merge_findings(ctx, repo_name="rl")
    assert sorted(merged.manifest.experiments) == ["new_api", "old_api"]
    findings = list(ctx.findings)
    out = with_drift_ceilings(merged, findings)
    assert out.manifest.environment.python_requirements == ["gym", "numpy"]
    assert out.notes.warnings[-1] == (
        "gym: some of the code needs it below 0.26.0 (old_api.py line 12 `s, r, done, info` "
        "(unpacking gym.Env.step() into 4 names fails)) and some at 0.26.0 or later "
        "(new_api.py line 12 `s, r, done, truncated, info`): no release runs both, so none "
        "is held below it; the former fail (https://github.com/openai/gym/releases/tag/0.26.0)"
    )
    only_old = {"old_api": merged.manifest.experiments["old_api"]}
    alone = replace(merged, manifest=merged.manifest.model_copy(update={"experiments": only_old}))
    env = with_drift_ceilings(alone, findings).manifest.environment
    assert env.python_requirements == ["gym<0.26.0", "numpy"]
