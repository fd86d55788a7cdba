"""Long work shows itself: `rb audit --plan` says what would run and for about how long
without running it; the default audit runs the main experiments rb expects to finish and
says what it skipped; progress names each run's phase, and ``-v`` streams the events."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reprobridge._log import sink
from reprobridge.audit import backends
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.preview import preview_audit
from reprobridge.cli import main
from reprobridge.constants import EVIDENCE_DIR
from reprobridge.errors import AuditError
from reprobridge.initializer import init_repository

_PY = f"{sys.version_info.major}.{sys.version_info.minor}"
_MANIFEST = f"""schema = 1
[project]
name = "many"
[environment]
python = "{_PY}"
nixpkgs = {{release = "nixos-25.11", rev = "b6018f87da91d19d0ab4cf979885689b469cdd41", narHash = "sha256-twXPFqFsrrY5r28Zh7Homgcp2gUMBgQ6WDS98Q/3xFI=", lastModified = 1782847189}}
[datasets.cifar]
path = "data/cifar"
url = "https://example.org/cifar.tgz"
[experiments.train]
command = "bash run.sh"
main = true
seeds = [0, 1, 2]
timeout = "10m"
[experiments.train.metrics.acc]
source = {{regex = "acc=([0-9.]+)"}}
min = 0.5
[experiments.serve]
command = "bash loop.sh"
main = true
unbounded = "`while true` in loop.sh; nothing bounds it"
[experiments.eval]
command = "bash run.sh"
main = true
datasets = ["cifar"]
[experiments.tutorial]
command = "bash run.sh"
"""


@pytest.fixture
def many(make_repo: Callable[..., Path]) -> Path:
    """A committed repository after `rb init`: three main experiments (one unbounded, one
    whose dataset is not there) and one that is not main."""
    root = make_repo(
        {
            "run.sh": "echo acc=0.9\n",
            "loop.sh": "while true; do sleep 1; done\n",
            "reprobridge.toml": _MANIFEST,
        }
    )
    init_repository(root, lock="never")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)
    return root


_SKIPPED = {
    "serve": "unbounded: `while true` in loop.sh; nothing bounds it",
    "eval": "dataset cifar is missing: data/cifar not found "
    "(download it from https://example.org/cifar.tgz)",
    "tutorial": "not a main experiment",
}


def _cli(root: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main([*args, "-C", str(root), "--backend", "host", "--sandbox", "off"])
    out = capsys.readouterr()
    return int(exit_.value.code or 0), out.out, out.err


def test_plan_prints_what_would_run_and_runs_nothing(
    many: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(many, "audit", "--plan", capsys=capsys)
    assert code == 0
    assert out.splitlines()[0] == "plan: tier full, backend host, 3 run(s)"
    assert "  train: 3 run(s), seed(s) 0, 1, 2; timeout 10m00s each; estimated time unknown" in out
    for exp_id, why in _SKIPPED.items():
        assert f"  skipped {exp_id}: {why}" in out
    assert "estimated time: unknown" in out and "would refuse" not in out
    assert not (many / EVIDENCE_DIR).exists()  # nothing ran, nothing was written

    code, out, _ = _cli(many, "audit", "--plan", "--json", "--all", capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and doc["runs"] == 12 and doc["skipped"] == {}
    assert [e["id"] for e in doc["experiments"]] == ["train", "serve", "eval", "tutorial"]
    assert doc["experiments"][0] == {
        "id": "train",
        "runs": 3,
        "seeds": [0, 1, 2],
        "timeout_s": 600.0,
        "estimate_s": None,
        "estimate_from": None,
    }


def test_plan_estimates_from_a_recorded_run_and_names_refusals(
    many: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run_audit(many, AuditOptions(runs=1, backend="host", sandbox="off"))
    wall = json.loads((first.path / "runs/train/0/status.json").read_text())["record"]["wall_s"]
    preview = preview_audit(many, experiments=None, runs=3, tier="full", backend="host")
    (train,) = preview.experiments
    assert train.estimate is not None and train.estimate.seconds == pytest.approx(wall)
    assert train.estimate.source == f"repro/evidence/{first.path.name}"
    assert preview.estimate_s == pytest.approx(3 * wall)

    (many / "run.sh").write_text("echo acc=0.1\n")
    code, out, _ = _cli(many, "audit", "--plan", capsys=capsys)
    assert code == 0 and f"as recorded in repro/evidence/{first.path.name}" in out
    assert "would refuse: uncommitted changes (commit them, or --allow-dirty): run.sh" in out


def test_the_default_audit_runs_the_main_experiments_expected_to_finish(
    many: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(many, "audit", "--runs", "1", capsys=capsys)
    assert code == 0
    for exp_id, why in _SKIPPED.items():
        assert f"skipped {exp_id}: {why}" in err
    bundle = next((many / EVIDENCE_DIR).iterdir())
    assert sorted(p.name for p in (bundle / "runs").iterdir()) == ["train"]
    started = json.loads((bundle / "journal.jsonl").read_text().splitlines()[0])
    assert started["event"] == "started" and started["skipped"] == _SKIPPED


def test_nothing_left_to_run_by_default_is_an_error_naming_why(
    make_repo: Callable[..., Path],
) -> None:
    manifest = _MANIFEST.replace(
        'command = "bash run.sh"\nmain = true\nseeds', 'command = "bash run.sh"\nseeds'
    )
    root = make_repo({"run.sh": "echo acc=0.9\n", "loop.sh": "", "reprobridge.toml": manifest})
    with pytest.raises(
        AuditError,
        match="no experiment rb expects to finish: train: not a main experiment; serve: unbounded",
    ) as err:
        preview_audit(root, experiments=None, runs=1, tier="full", backend="host")
    assert "--all" in (err.value.hint or "")


def test_progress_names_each_phase_and_verbose_streams_events(
    many: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    setup_run = backends.HostBackend.setup_run

    def with_a_step(self: Any, *args: Any) -> backends.RunSetup:
        got = setup_run(self, *args)
        step = backends.SetupStep(what="a setup step", argv=("true",), env={}, network=False)
        return backends.RunSetup(got.env, got.ro_binds, steps=(step,))

    monkeypatch.setattr(backends.HostBackend, "setup_run", with_a_step)
    events: list[str] = []
    with sink(lambda event, fields: events.append(event)):
        run_audit(many, AuditOptions(experiments=["train"], runs=1, backend="host", sandbox="off"))
    order = [
        e
        for e in events
        if e
        in {"environment-start", "environment", "setup-step", "run-exec", "run-checks", "run-done"}
    ]
    assert order == [
        "environment-start",
        "environment",
        "setup-step",
        "run-exec",
        "run-checks",
        "run-done",
    ]

    code, _, err = _cli(many, "run", "train", capsys=capsys)
    assert code == 0
    lines = err.splitlines()
    assert any(ln.startswith("environment (host): setting up") for ln in lines)
    assert "[1/1] train/0 (seed 0): environment setup: a setup step" in lines
    # The run before this one left an estimate.
    assert "[1/1] train/0 (seed 0): running (a recorded run took 0s)" in lines
    assert "[1/1] train/0 (seed 0): checks (outputs, packages, metrics)" in lines
    assert not any(ln.startswith("rb: ") for ln in lines)

    code, _, err = _cli(many, "-v", "run", "train", capsys=capsys)
    assert code == 0
    assert any(ln.startswith("rb: run-exec run=train/0") for ln in err.splitlines())
    assert any(
        ln.startswith("rb: setup-step ") and "what=a setup step" in ln for ln in err.splitlines()
    )


def test_a_setup_step_past_the_trial_s_cap_stops_and_says_so(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe trial's budget bounds a source build as it bounds the run (PPO-PyTorch's
    trial compiled pybullet past every limit); the failure says the step ran out of time."""
    setup_run = backends.HostBackend.setup_run

    def with_a_slow_step(self: Any, *args: Any) -> backends.RunSetup:
        got = setup_run(self, *args)
        step = backends.SetupStep(what="a slow build", argv=("sleep", "30"), env={}, network=False)
        return backends.RunSetup(got.env, got.ro_binds, steps=(step,))

    monkeypatch.setattr(backends.HostBackend, "setup_run", with_a_slow_step)
    started = time.monotonic()
    result = run_audit(
        many,
        AuditOptions(
            experiments=["train"],
            runs=1,
            backend="host",
            sandbox="off",
            trial=True,
            max_timeout_s=2,
            evidence_root=many / ".reprobridge" / "probe",
            grace=1,
        ),
    )
    assert time.monotonic() - started < 25
    status = json.loads((result.path / "runs/train/0/status.json").read_text())
    reason = status["record"]["not_started"]["reason"]
    assert reason.startswith("a slow build did not finish within 2s in the sandbox"), reason
