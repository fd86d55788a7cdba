"""End to end with real Nix: `rb init` on the bundled example, then the generated flake's
apps run each experiment and its threshold check (nixpkgs swapped for the offline stub)."""

from __future__ import annotations

from pathlib import Path

import pytest
from artifacts_helpers import NixRunner

from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository

#: Real Nix evaluations and builds of the example's flake: minutes, not seconds.
pytestmark = pytest.mark.slow


@pytest.fixture
def example(tmp_path: Path) -> Path:
    repo = copy_example(tmp_path / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    return repo


def test_example_reproduces_through_the_generated_flake(nix: NixRunner, example: Path) -> None:
    for exp in ("baseline", "mixup"):
        out = nix("run", f".#reproduce-{exp}", cwd=example)
        assert out.returncode == 0, out.stderr + out.stdout
        assert "PASS test_accuracy" in out.stdout
        assert out.stdout.rstrip().endswith("verdict: PASS")
    smoke = nix("run", ".#reproduce-mixup", "--", "--tier", "smoke", "--seed", "1", cwd=example)
    # The paper's targets describe 400 epochs: after 2 nothing is judged (never a PASS).
    assert smoke.returncode == 20, smoke.stderr + smoke.stdout
    assert smoke.stdout.rstrip().endswith("verdict: INCOMPLETE")
    assert (example / "repro/logs/mixup/smoke-seed1.log").read_text().count("epoch=") == 0


def test_edited_threshold_changes_the_verdict(nix: NixRunner, example: Path) -> None:
    manifest = example / "reprobridge.toml"
    text = manifest.read_text()
    # The baseline cannot reach mixup's accuracy: tighten its band and the app must fail.
    manifest.write_text(
        text.replace("target = 0.79\ntolerance = 0.171", "target = 0.99\ntolerance = 0.001", 1)
    )
    out = nix("run", ".#reproduce-baseline", cwd=example)
    assert out.returncode == 1, out.stderr + out.stdout
    assert "FAIL test_accuracy" in out.stdout
