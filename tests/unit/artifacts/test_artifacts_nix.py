"""The generated flake under real Nix, with nixpkgs swapped for tests/nixstub.

What runs for real: the generated flake.nix reading reprobridge.toml, its devShell, one
``reproduce-<exp>`` app per experiment, the launchers, repro/check.py, and (when uv is on
this machine) the uv venv from repro/python. What the stub replaces: nixpkgs itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from artifacts_helpers import (
    PIN,
    VERSION,
    NixRunner,
    git_track,
    host_python,
    host_uv,
    manifest_toml,
    nix_env,
)

from reprobridge.artifacts import (
    lock_python_project,
    render_check_script,
    render_flake,
    render_flake_lock,
    render_launcher,
    render_python_project,
)
from reprobridge.constants import CHECK_SCRIPT, FLAKE_FILE, FLAKE_LOCK_FILE, MANIFEST_FILE
from reprobridge.manifest.schema import Manifest

pytestmark = pytest.mark.nix

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SYSTEM = "x86_64-linux"

TRAIN = """\
import argparse, json, os, time
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--name", default="")
p.add_argument("--acc", type=float, default=0.93)
p.add_argument("--sleep", type=float, default=0)
p.add_argument("--exit", type=int, default=0)
a = p.parse_args()
time.sleep(a.sleep)
print(f"seed={a.seed} epochs={a.epochs} name={a.name!r} hashseed={os.environ['PYTHONHASHSEED']}")
os.makedirs("outputs", exist_ok=True)
with open("outputs/metrics.json", "w") as f:
    json.dump({"eval": {"acc": a.acc}}, f)
for epoch in range(a.epochs):
    print(f"acc={a.acc - 0.1 * (a.epochs - 1 - epoch):.4f}")
raise SystemExit(a.exit)
"""


def manifest_data(python_env: str = "uv") -> dict[str, Any]:
    acc = {"source": {"regex": r"acc=([0-9.]+)"}, "target": 0.93, "tolerance": 0.01}
    return {
        "schema": 1,
        "project": {"name": "toy"},
        "environment": {"python": PY, "nixpkgs": PIN, "python_env": python_env},
        "experiments": {
            "main": {
                "description": "The toy experiment",
                "command": "python train.py --seed {seed} --epochs {epochs} --name {name}",
                "params": {"epochs": 3, "name": "it's a run"},
                "seeds": [7],
                "outputs": [{"path": "outputs/metrics.json"}],
                "metrics": {"acc": acc},
                "tiers": {"smoke": {"params": {"epochs": 1}, "seeds": [1]}},
            },
            "viafile": {
                "command": "python train.py --seed {seed} --acc 0.5 | cat",
                "metrics": {
                    "acc": {
                        "source": {"file": "outputs/metrics.json", "key": "eval.acc"},
                        "min": 0.4,
                    }
                },
            },
            "crash": {"command": "python train.py --seed {seed} --exit 3"},
            "slow": {"command": "python train.py --seed {seed} --sleep 20", "timeout": "1s"},
        },
    }


def write_repo(repo: Path, data: dict[str, Any]) -> Manifest:
    """Render every artifact of ``data`` into ``repo`` and git-add it all."""
    manifest = Manifest.model_validate(data)
    files = {
        MANIFEST_FILE: manifest_toml(manifest),
        FLAKE_FILE: render_flake(manifest),
        FLAKE_LOCK_FILE: render_flake_lock(manifest),
        CHECK_SCRIPT: render_check_script(),
        "train.py": TRAIN,
        ".gitignore": "repro/python/.venv/\nrepro/logs/\noutputs/\n",
        **render_python_project(manifest),
    }
    for exp_id in manifest.experiments:
        files[f"repro/launchers/{exp_id}.sh"] = render_launcher(manifest, exp_id, version=VERSION)
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if manifest.environment.python_env == "uv" and host_uv():
        lock_python_project(repo / "repro/python", offline=True, python=host_python())
    git_track(repo)
    return manifest


@pytest.fixture
def repo(tmp_git_repo: Path) -> Path:
    if host_uv() is None:
        pytest.skip("uv is not installed: the uv-mode flake needs it")
    write_repo(tmp_git_repo, manifest_data())
    return tmp_git_repo


def test_app_runs_launcher_and_check(nix: NixRunner, repo: Path) -> None:
    assert (repo / "repro/python/uv.lock").is_file(), "uv lock (offline, no deps) should work"
    out = nix("run", ".#reproduce-main", cwd=repo)
    assert out.returncode == 0, out.stderr + out.stdout
    assert 'seed=7 epochs=3 name="it\'s a run" hashseed=0' in out.stdout
    assert "PASS acc = 0.9300 (target 0.93 ± 0.01)" in out.stdout
    assert "PASS output outputs/metrics.json: exists" in out.stdout
    assert out.stdout.rstrip().endswith("verdict: PASS")
    log = (repo / "repro/logs/main/full-seed7.log").read_text()
    assert "acc=0.9300" in log and "+ python train.py" in log
    # the experiment ran in the uv venv made from repro/python/uv.lock
    assert (repo / "repro/python/.venv/bin/python").exists()


def test_flake_reads_the_manifest(nix: NixRunner, repo: Path) -> None:
    """Only reprobridge.toml changes, and the verdict follows it: nothing was baked in."""
    text = (repo / MANIFEST_FILE).read_text()
    (repo / MANIFEST_FILE).write_text(text.replace("target = 0.93", "target = 0.5"))
    git_track(repo)
    out = nix("run", ".#reproduce-main", cwd=repo)
    assert out.returncode == 1, out.stderr + out.stdout
    assert "FAIL acc = 0.9300 (target 0.5 ± 0.01; off target by 0.4300)" in out.stdout
    assert out.stdout.rstrip().endswith("verdict: FAIL")


def test_smoke_tier_and_seed(nix: NixRunner, repo: Path) -> None:
    out = nix("run", ".#reproduce-main", "--", "--tier", "smoke", cwd=repo)
    # Smoke without thresholds of its own judges nothing: INCOMPLETE (exit 20), not PASS.
    assert out.returncode == 20, out.stderr + out.stdout
    assert "seed=1 epochs=1" in out.stdout
    assert "smoke: exists and is finite" in out.stdout
    assert (repo / "repro/logs/main/smoke-seed1.log").is_file()
    out = nix("run", ".#reproduce-main", "--", "--tier=smoke", "--seed", "5", cwd=repo)
    assert out.returncode == 20, out.stderr + out.stdout
    assert (repo / "repro/logs/main/smoke-seed5.log").is_file()
    bad = nix("run", ".#reproduce-main", "--", "--tier", "huge", cwd=repo)
    assert bad.returncode == 2 and "unknown tier 'huge'" in bad.stderr


def test_shell_command_and_file_metric(nix: NixRunner, repo: Path) -> None:
    out = nix("run", ".#reproduce-viafile", cwd=repo)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "PASS acc = 0.5000 (min 0.4)" in out.stdout


def test_launcher_failure_and_timeout(nix: NixRunner, repo: Path) -> None:
    out = nix("run", ".#reproduce-crash", cwd=repo)
    assert out.returncode == 3
    assert "launcher exited with status 3" in out.stderr
    assert "verdict" not in out.stdout
    out = nix("run", ".#reproduce-slow", cwd=repo)
    assert out.returncode == 124
    assert "timed out" in out.stderr


def test_devshell_has_the_pinned_python(nix: NixRunner, repo: Path) -> None:
    code = "import sys; print(sys.version); print(sys.prefix)"
    out = nix("develop", "-i", "-k", "HOME", "-c", "python", "-c", code, cwd=repo)
    assert out.returncode == 0, out.stderr
    version, prefix = out.stdout.strip().splitlines()[-2:]
    assert version.startswith(PY + ".")
    assert prefix == str(repo / "repro/python/.venv")
    out = nix(
        "develop",
        "-i",
        "-k",
        "HOME",
        "-c",
        "bash",
        "-c",
        "command -v uv; echo $UV_PYTHON",
        cwd=repo,
    )
    uv_path, uv_python = out.stdout.strip().splitlines()[-2:]
    assert uv_path.startswith("/nix/store/") and uv_python.startswith("/nix/store/")


def _eval(nix: NixRunner, repo: Path, attr: str) -> subprocess.CompletedProcess[str]:
    return nix("eval", "--raw", f".#{attr}", cwd=repo)


def test_devshell_is_a_fingerprint_of_the_environment(nix: NixRunner, repo: Path) -> None:
    """Experiments and the flake's own files do not change the devShell; the environment does."""
    attr = f"devShells.{SYSTEM}.default.drvPath"
    before = _eval(nix, repo, attr)
    assert before.returncode == 0, before.stderr
    text = (repo / MANIFEST_FILE).read_text()
    (repo / MANIFEST_FILE).write_text(text.replace("seeds = [7]", "seeds = [8]"))
    (repo / "train.py").write_text(TRAIN + "\n# edited\n")
    git_track(repo)
    assert _eval(nix, repo, attr).stdout == before.stdout
    (repo / MANIFEST_FILE).write_text(text.replace("system = []", 'system = ["zlib"]'))
    git_track(repo)
    changed = _eval(nix, repo, attr)
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout != before.stdout


def test_cuda_and_compiler_wiring(nix: NixRunner, tmp_git_repo: Path) -> None:
    data = manifest_data()
    data["environment"].update(cuda="12.1", nvcc=True, compilers={"gcc": "12"}, system=["ffmpeg"])
    write_repo(tmp_git_repo, data)
    shell = f"devShells.{SYSTEM}.default"
    out = _eval(nix, tmp_git_repo, f"{shell}.CUDA_HOME")
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith("-cudatoolkit-12.1")
    out = _eval(nix, tmp_git_repo, f"{shell}.PATH")
    assert out.returncode == 0, out.stderr
    path = out.stdout
    for name in (
        "cuda_nvcc-12.1",
        "gcc-wrapper-12-for-cuda-12.1",
        "ffmpeg",
        f"python{PY.replace('.', '')}",
    ):
        assert f"-{name}/bin" in path, (name, path)
    hook = _eval(nix, tmp_git_repo, f"{shell}.shellHook").stdout
    assert "/run/opengl-driver/lib" in hook


def test_nixpkgs_python_env(nix: NixRunner, tmp_git_repo: Path) -> None:
    data = manifest_data(python_env="nixpkgs")
    data["environment"]["python_requirements"] = ["Typing_Extensions>=4", "numpy==1.26"]
    write_repo(tmp_git_repo, data)
    ok = _eval(nix, tmp_git_repo, f"devShells.{SYSTEM}.default.drvPath")
    assert ok.returncode == 0, ok.stderr
    out = nix("run", ".#reproduce-main", cwd=tmp_git_repo)
    assert out.returncode == 0, out.stderr + out.stdout
    data["environment"]["python_requirements"] = ["numpy", "surely-not-a-package[extra]>=1"]
    write_repo(tmp_git_repo, data)
    bad = _eval(nix, tmp_git_repo, f"devShells.{SYSTEM}.default.drvPath")
    assert bad.returncode != 0
    assert "'surely-not-a-package[extra]>=1' has no nixpkgs package" in bad.stderr


def test_generated_flake_parses_without_the_stub(tmp_path: Path) -> None:
    """The rendered flake (and the raw template) parse with nix-instantiate."""
    if shutil.which("nix-instantiate") is None:
        pytest.skip("nix-instantiate is not installed")
    manifest = Manifest.model_validate(manifest_data())
    path = tmp_path / "flake.nix"
    path.write_text(render_flake(manifest))
    from importlib import resources

    raw = tmp_path / "raw.nix"
    raw.write_text(resources.files("reprobridge").joinpath("templates", "flake.nix").read_text())
    for item in (path, raw):
        out = subprocess.run(
            ["nix-instantiate", "--parse", str(item)],
            env=nix_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr


def test_warns_when_the_lock_leaves_the_manifest_pin(
    nixstub_dir: Path, repo: Path, nix: NixRunner
) -> None:
    """A git input has a rev; it is not the manifest's pin, so the flake says so."""
    argv = [nix.binary, "eval", "--raw", "--no-write-lock-file", "--override-input", "nixpkgs"]
    argv += [f"git+file://{nixstub_dir}", ".#apps.x86_64-linux.reproduce-main.type"]
    out = subprocess.run(
        argv, cwd=repo, env=nix_env(binary=nix.binary), capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "app"
    assert f"but reprobridge.toml pins {PIN['rev']}" in out.stderr


@pytest.mark.parametrize("gpus", [1, 0])
def test_gpu_experiment_gets_the_driver_directory_without_cuda(
    nix: NixRunner, tmp_git_repo: Path, gpus: int
) -> None:
    """A GPU experiment needs the host driver even when the flake pins no CUDA toolkit (a
    PyPI torch wheel brings its own runtime); a CPU-only flake gets no driver path."""
    data = manifest_data()
    data["experiments"]["main"]["hardware"] = {"gpus": gpus}
    write_repo(tmp_git_repo, data)
    out = _eval(nix, tmp_git_repo, f"devShells.{SYSTEM}.default.shellHook")
    assert out.returncode == 0, out.stderr
    assert ("/run/opengl-driver/lib" in out.stdout) is (gpus > 0)


def test_the_stub_evaluates_with_the_real_nixpkgs_lib(nix: NixRunner, tmp_path: Path) -> None:
    """The stub's `lib` is nixpkgs' own (shared/data/nixpkgs-lib.tar.gz), not a stand-in:
    every lib call the generated flake makes runs nixpkgs' code, under 2.8 and 2.26."""
    out = subprocess.run(
        [
            nix.binary,
            "eval",
            "--json",
            f"path:{nix.stub}#lib",
            "--apply",
            "l: [ l.version "
            '(l ? modules && l ? systems && l ? fixedPoints) (l.strings.toUpper "ok") ]',
        ],
        cwd=tmp_path,
        env=nix_env(binary=nix.binary),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    version, big, upper = json.loads(out.stdout)
    assert version.split(".")[0].isdigit() and big is True and upper == "OK"
