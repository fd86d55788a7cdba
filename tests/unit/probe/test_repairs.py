"""The probe's repairs (reprobridge.probe.repairs) and how decisions apply to a draft."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprobridge.errors import ManifestError
from reprobridge.manifest.schema import Manifest
from reprobridge.probe.apply import apply_decisions, settable
from reprobridge.probe.observe import Observation, classify
from reprobridge.probe.record import PROBE_FILE, Decision, load_decisions, render_decisions
from reprobridge.probe.repairs import Context, lock_repairs, repairs_for
from reprobridge.recovery._common import MergeResult


def _manifest(exp: dict[str, Any] | None = None, reqs: list[str] | None = None) -> Manifest:
    return Manifest.model_validate(
        {
            "schema": 1,
            "project": {"name": "p"},
            "environment": {"python": "3.11", "python_requirements": reqs or []},
            "experiments": {"train": {"command": "python train.py", "main": True, **(exp or {})}},
        }
    )


def _ctx(manifest: Manifest, files: set[str], gpu: bool = False, readme: str = "") -> Context:
    return Context(manifest, frozenset(files), {"README.md": readme} if readme else {}, gpu)


def _decide(
    log: str, manifest: Manifest, files: set[str], outcome: str = "failed", **kw: Any
) -> list[Decision]:
    obs = Observation("train", outcome, "exit(1)", log, {})
    return repairs_for(classify(obs), obs, _ctx(manifest, files, **kw))


def test_gpu_not_needed_when_the_trial_ran_without_one() -> None:
    m = _manifest({"hardware": {"gpus": 1}})
    got = _decide("done\n", m, {"train.py"}, outcome="ok")
    assert [(d.target, d.value) for d in got] == [("experiments.train.hardware.gpus", 0)]
    # With a GPU visible the trial proved nothing about running without one.
    assert _decide("done\n", m, {"train.py"}, outcome="ok", gpu=True) == []


def test_gpu_needed_from_the_log_line() -> None:
    got = _decide(
        "RuntimeError: Found no NVIDIA driver on your system.\n", _manifest(), {"train.py"}
    )
    assert [(d.target, d.value) for d in got] == [("experiments.train.hardware.gpus", 1)]
    assert got[0].evidence == "RuntimeError: Found no NVIDIA driver on your system."


def test_entry_found_by_its_bare_name() -> None:
    log = "python: can't open file '/tmp/w/repo/train.py': [Errno 2] No such file or directory\n"
    got = _decide(log, _manifest(), {"pygcn/train.py", "pygcn/models.py", "README.md"})
    assert [(d.target, d.value) for d in got] == [("experiments.train.workdir", "pygcn")]
    # Two files of that name: no guess.
    assert _decide(log, _manifest(), {"a/train.py", "b/train.py"}) == []


def test_workdir_moves_to_the_folder_a_relative_path_resolves_from() -> None:
    m = _manifest({"command": "python src/train.py"})
    log = "FileNotFoundError: [Errno 2] No such file or directory: '../data/penn/train.txt'\n"
    got = _decide(log, m, {"src/train.py", "data/penn/train.txt"})
    assert {d.target: d.value for d in got} == {
        "experiments.train.workdir": "src",
        "experiments.train.command": "python train.py",
    }


def test_a_really_missing_file_is_named_with_the_readme_line() -> None:
    log = "FileNotFoundError: [Errno 2] No such file or directory: 'data/cora/cora.content'\n"
    got = _decide(
        log, _manifest(), {"train.py"}, readme="Unzip dataset.zip into data/cora first.\n"
    )
    by_target = {d.target: d for d in got}
    ds = by_target["datasets.cora-content"].value
    assert isinstance(ds, dict) and ds["path"] == "data/cora/cora.content"
    assert "README.md:1: Unzip dataset.zip into data/cora first." in str(ds["description"])
    assert by_target["experiments.train.datasets"].op == "add"
    # A file that ships is not missing data (its folder resolves from the workdir).
    assert _decide(log, _manifest(), {"train.py", "data/cora/cora.content"}) == []


def test_a_rejected_flag_is_withdrawn_with_its_value() -> None:
    m = _manifest({"command": "python train.py --data-seed {seed} --epochs 3"})
    got = _decide("train.py: error: unrecognized arguments: --data-seed 0\n", m, {"train.py"})
    assert [(d.target, d.value) for d in got] == [
        ("experiments.train.command", "python train.py --epochs 3")
    ]


def test_a_missing_module_is_the_repository_s_own_or_a_requirement() -> None:
    log = "ModuleNotFoundError: No module named 'mylib.layers'\n"
    local = _decide(log, _manifest(), {"train.py", "src/mylib/__init__.py"})
    assert [(d.target, d.op, d.value) for d in local] == [("environment.pythonpath", "add", "src")]
    dist = _decide("ModuleNotFoundError: No module named 'sklearn'\n", _manifest(), {"train.py"})
    assert [(d.target, d.op, d.value) for d in dist] == [
        ("environment.python_requirements", "add", "scikit-learn")
    ]
    # Already required: the run's failure is something else; no repair.
    assert (
        _decide(
            "ModuleNotFoundError: No module named 'sklearn'\n",
            _manifest(reqs=["scikit-learn"]),
            {"train.py"},
        )
        == []
    )


def test_metrics_are_proposed_only_where_none_is_declared() -> None:
    log = "epoch 1 loss 0.5\nTest accuracy: 0.91\n"
    got = _decide(log, _manifest(), {"train.py"}, outcome="ok")
    assert {d.target for d in got} == {
        "experiments.train.metrics.test_accuracy",
        "experiments.train.metrics.loss",
    }
    declared = _manifest({"metrics": {"acc": {"source": {"regex": "acc ([0-9.]+)"}}}})
    assert _decide(log, declared, {"train.py"}, outcome="ok") == []


def test_lock_repairs_read_uv_messages() -> None:
    m = _manifest(reqs=["torch==0.4.1", "brotli-python==1.0.9", "numpy"])
    message = (
        "Python packages could not be locked: No solution found when resolving dependencies: "
        "Because there is no version of torch==0.4.1 and you require torch==0.4.1, we can "
        "conclude that your requirements are unsatisfiable. Because brotli-python was not "
        "found in the package registry and you require brotli-python==1.0.9, ..."
    )
    got = lock_repairs(message, m)
    assert [(d.op, d.value) for d in got] == [
        ("replace-requirement", {"name": "torch", "with": "torch<2"}),
        ("drop-requirement", "brotli-python"),
    ]
    merged = apply_decisions(MergeResult(m), tuple(got))
    assert merged.manifest.environment.python_requirements == ["torch<2", "numpy"]


def test_decisions_apply_with_provenance_and_never_beyond_the_keys_a_run_settles() -> None:
    m = _manifest({"hardware": {"gpus": 1}})
    d = Decision(
        repair="gpu-not-needed",
        target="experiments.train.hardware.gpus",
        value=0,
        why="ran",
        evidence="exit(0)",
    )
    merged = apply_decisions(MergeResult(m), (d,))
    assert merged.manifest.experiments["train"].hardware.gpus == 0
    assert merged.manifest.derived["experiments.train.hardware.gpus"].sources == [
        "probe: gpu-not-needed: exit(0)"
    ]
    assert "probe (gpu-not-needed): ran" in merged.notes.decisions
    # Network, timeouts and indexes are never the probe's to set.
    for key in (
        "experiments.train.network",
        "experiments.train.timeout",
        "environment.python_indexes",
    ):
        assert not settable(key)
        bad = Decision(repair="x-rule", target=key, value=True, why="no")
        out = apply_decisions(MergeResult(m), (bad,))
        assert out.manifest == m.model_copy(update={"derived": {}})
        assert any("not a key the probe may set" in w for w in out.notes.warnings)
    # An experiment the draft no longer has: skipped with a warning.
    gone = Decision(repair="gpu-needed", target="experiments.old.hardware.gpus", value=1, why="x")
    assert any(
        "no longer recovered" in w for w in apply_decisions(MergeResult(m), (gone,)).notes.warnings
    )
    # A value the schema refuses never makes an invalid manifest.
    neg = Decision(repair="gpu-needed", target="experiments.train.hardware.gpus", value=-1, why="x")
    assert apply_decisions(MergeResult(m), (neg,)).manifest.experiments["train"].hardware.gpus == 1


def test_the_probe_file_round_trips_deterministically(tmp_path: Path) -> None:
    a = Decision(
        repair="gpu-needed",
        target="experiments.b.hardware.gpus",
        value=1,
        why='said "x"\n',
        evidence="e",
    )
    b = Decision(
        repair="missing-data",
        target="datasets.d",
        value={"path": "data/x", "description": "m"},
        why="w",
    )
    text = render_decisions([a, b])
    assert text == render_decisions([b, a])
    (tmp_path / "repro").mkdir()
    (tmp_path / PROBE_FILE).write_text(text)
    assert sorted(load_decisions(tmp_path), key=lambda d: d.target) == [b, a]


def test_a_bad_probe_file_is_one_error_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "repro").mkdir()
    (tmp_path / PROBE_FILE).write_text(
        'schema = 1\n[[decisions]]\nrepair = "Bad Name"\ntarget = "x"\nvalue = 1\nwhy = "w"\n'
    )
    with pytest.raises(ManifestError, match=r"repro/probe.toml: decisions.0.repair"):
        load_decisions(tmp_path)


@pytest.mark.parametrize(
    ("message", "pin"),
    [
        # LTSF-Linear's requirements.txt on Python 3.10
        (
            "Because torch==1.9.0 has no wheels with a matching Python ABI tag (e.g., `cp310`) "
            "and you require torch==1.9.0, we can conclude that your requirements are unsatisfiable.",
            "torch==1.9.0",
        ),
        # an environment.yml pin whose PyPI namesake starts later (DUQ's ignite=0.4.4)
        (
            "Because only ignite>=1.0.0 is available and rb-run-environment depends on "
            "ignite==0.4.4.*, we can conclude that your requirements are unsatisfiable.",
            "ignite==0.4.4.*",
        ),
        ("Because there is no version of Torch==0.4.1.post2 and ...", "torch==0.4.1.post2"),
        # TimeGAN: TF 1 code; the relaxed pin must not cross to TF 2
        (
            "Because tensorflow==1.15.0 has no wheels with a matching Python ABI tag and you "
            "require tensorflow==1.15.0, we can conclude that your requirements are unsatisfiable.",
            "tensorflow==1.15.0",
        ),
    ],
)
def test_a_pin_uv_says_cannot_be_had_is_relaxed_within_its_major(message: str, pin: str) -> None:
    m = _manifest(reqs=[pin, "numpy==1.21.0"])
    got = lock_repairs(message, m)
    name = pin.split("==")[0].lower()
    major = int(pin.split("==")[1].split(".")[0])
    within = f"{name}<{max(major + 1, 2)}"
    assert [(d.repair, d.value) for d in got] == [("pin-relaxed", {"name": name, "with": within})]
    # a pin the message does not blame stays
    assert apply_decisions(MergeResult(m), tuple(got)).manifest.environment.python_requirements == [
        within,
        "numpy==1.21.0",
    ]


def test_a_trial_s_install_log_relaxes_a_pin_the_lock_never_reached() -> None:
    """gae-pytorch: the lock failed first on an index out of reach; the trial's install said
    `there is no version of torch==0.4.1`, under rb's own retry note."""
    m = _manifest(reqs=["torch==0.4.1", "networkx"])
    setup = (
        "  x No solution found when resolving dependencies:\n"
        "  Because there is no version of torch==0.4.1 and you require torch==0.4.1, we can "
        "conclude that your requirements are unsatisfiable.\n"
        "rb: uv (building packages without a wheel) failed; retrying: building networkx\n"
    )
    obs = Observation("train", "not-started", "uv failed", "", {}, setup_log=setup)
    failure = classify(obs)
    assert failure.kind == "environment" and "no version of torch==0.4.1" in failure.line
    got = repairs_for(failure, obs, _ctx(m, {"train.py"}))
    assert [(d.repair, d.value) for d in got] == [
        ("pin-relaxed", {"name": "torch", "with": "torch<2"})
    ]


def test_conda_s_ignite_is_pypi_s_pytorch_ignite() -> None:
    from reprobridge.detect._pkgmap import CONDA_TO_PYPI

    assert CONDA_TO_PYPI["ignite"] == "pytorch-ignite"


def test_a_dataset_the_trial_did_without_is_no_longer_required() -> None:
    m = Manifest.model_validate(
        {
            "schema": 1,
            "project": {"name": "p"},
            "environment": {"python": "3.11"},
            "datasets": {"periodic": {"path": "periodic"}, "cifar": {"path": "data/cifar"}},
            "experiments": {
                "train": {
                    "command": "python train.py",
                    "main": True,
                    "datasets": ["periodic", "cifar"],
                }
            },
        }
    )
    ran = Observation(
        "train", "ok", "exit(0)", "done\n", {}, missing_datasets={"periodic": "periodic"}
    )
    ctx = _ctx(m, {"train.py"})
    got = repairs_for(classify(ran), ran, ctx)
    assert [(d.repair, d.target, d.value) for d in got] == [
        ("dataset-not-needed", "experiments.train.datasets", ["cifar"])
    ]
    # latent_ode: stopped at the time limit after printing results: past its data
    slow = Observation(
        "train",
        "timeout",
        "timeout after 420s",
        "Test MSE: 0.41\n",
        {},
        missing_datasets={"periodic": "periodic"},
    )
    assert [d.value for d in repairs_for(classify(slow), slow, ctx)] == [["cifar"]]
    # a run that failed opening the declared path itself: the declaration was right
    log = "FileNotFoundError: [Errno 2] No such file or directory: 'periodic/x.npz'\n"
    failed = Observation(
        "train", "failed", "exit(1)", log, {}, missing_datasets={"periodic": "periodic"}
    )
    assert [d.repair for d in repairs_for(classify(failed), failed, ctx)] == []


# uv 0.9's words for TimeGAN's pin on Python 3.10 (the hint lists the ABI tags it found).
TF115 = (
    "Because tensorflow==1.15.0 has no wheels with a matching Python ABI tag (e.g., `cp310`) "
    "and you require tensorflow==1.15.0, we can conclude that your requirements are "
    "unsatisfiable. hint: You require CPython 3.10 (`cp310`), but we only found wheels for "
    "`tensorflow` (v1.15.0) with the following Python ABI tags: `cp27m`, `cp27mu`, `cp35m`, "
    "`cp36m`, `cp37m`"
)


def test_an_older_python_that_keeps_the_pin_comes_before_relaxing_it() -> None:
    m = _manifest(reqs=["tensorflow==1.15.0", "numpy"]).model_copy(deep=True)
    m.environment.python = "3.10"
    got = lock_repairs(TF115, m)
    assert [(d.repair, d.target, d.value) for d in got] == [
        ("python-lowered", "environment.python", "3.7")
    ]
    # With the pin's newest wheel below every Python a nixpkgs release carries (3.6, for
    # TF 1.12), the pin is relaxed within its major version instead.
    tf112 = TF115.replace("1.15.0", "1.12.0").replace(", `cp37m`", "")
    m112 = _manifest(reqs=["tensorflow==1.12.0"]).model_copy(deep=True)
    m112.environment.python = "3.10"
    assert [(d.repair, d.value) for d in lock_repairs(tf112, m112)] == [
        ("pin-relaxed", {"name": "tensorflow", "with": "tensorflow<2"})
    ]


def test_a_python_decision_merges_again_with_a_release_that_carries_it(
    make_repo: Any, tmp_path: Path
) -> None:
    """The nixpkgs pin follows the probe's Python: init merges again with it."""
    from reprobridge.initializer import init_repository
    from reprobridge.probe.record import render_decisions

    root = make_repo({"train.py": "print('acc=0.9')\n", "requirements.txt": "numpy\n"})
    decision = Decision(
        repair="python-lowered", target="environment.python", value="3.7", why="w", evidence="e"
    )
    (root / "repro").mkdir()
    (root / PROBE_FILE).write_text(render_decisions([decision]))
    m = init_repository(root, lock="never").manifest
    assert m.environment.python == "3.7"
    assert m.environment.nixpkgs is not None
    from reprobridge.recovery import pins

    carried = pins._releases()[m.environment.nixpkgs.release].get("pythons", [])
    assert pins.python_attr("3.7") in carried
