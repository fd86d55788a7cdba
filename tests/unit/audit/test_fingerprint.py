"""Fingerprints: host, GPUs through a fake NVML (case 35), nix with a fake runner and a real
flake.lock, git on real repositories with hostile config (case 34), Python packages, env."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pynvml
import pytest
from fakenvml import FakeNvml as BaseFakeNvml

from reprobridge import _proc
from reprobridge.audit import fingerprint as fp
from reprobridge.errors import CommandFailed, MachineError
from tests.conftest import write_tree

# -- host ---------------------------------------------------------------------------------


def test_host_fingerprint_reads_the_files(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Fake CPU @ 3.0GHz\n\nprocessor\t: 1\n")
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n')
    out = fp.host_fingerprint(cpuinfo=cpuinfo, os_release=release)
    assert out["cpu"]["model"] == "Fake CPU @ 3.0GHz"
    assert out["cpu"]["logical_cores"] >= 1
    assert out["memory_bytes"] > 0
    assert out["os"] == {
        "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)",
        "ID": "debian",
        "VERSION_ID": "12",
    }
    assert out["kernel"]["release"] == os.uname().release
    assert out["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    json.dumps(out)


def test_host_fingerprint_without_the_files(tmp_path: Path) -> None:
    out = fp.host_fingerprint(cpuinfo=tmp_path / "none", os_release=tmp_path / "none")
    assert "model" in out["cpu"] and out["os"]
    json.dumps(out)


# -- GPUs (case 35) -----------------------------------------------------------------------

H100 = ("NVIDIA H100 80GB HBM3", 85_899_345_920, (9, 0), "GPU-1111")
A10 = ("NVIDIA A10", 24_146_608_128, (8, 6), "GPU-2222")


class FakeNvml(BaseFakeNvml):
    """With ``extras`` per GPU index: MIG/ECC/power answers, or an error class to raise
    (NotSupported)."""

    def __init__(
        self,
        gpus: Sequence[tuple[str, int, tuple[int, int], str]] = (),
        *,
        init_error: BaseException | None = None,
        fail_on_gpu: int | None = None,
        extras: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__(gpus, init_error=init_error, fail_on_gpu=fail_on_gpu)
        self.extras = extras or {}

    def _extra(self, handle: int, key: str) -> Any:
        value = self.extras.get(handle, {}).get(key, pynvml.NVMLError_NotSupported)
        if isinstance(value, type) and issubclass(value, BaseException):
            raise value()
        return value

    def nvmlDeviceGetMigMode(self, handle: int) -> Any:
        return self._extra(handle, "mig")

    def nvmlDeviceGetEccMode(self, handle: int) -> Any:
        return self._extra(handle, "ecc")

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> Any:
        return self._extra(handle, "power")


def test_gpus_with_optional_fields() -> None:
    nvml = FakeNvml([H100, A10], extras={0: {"mig": [1, 1], "ecc": (1, 0), "power": 700000}})
    out = fp.gpu_fingerprint(nvml)
    assert out["state"] == "ok" and out["error"] is None
    assert (out["driver_version"], out["cuda_driver_version"]) == ("550.54.15", "12.4")
    h100, a10 = out["gpus"]
    assert h100 == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "memory_bytes": 85_899_345_920,
        "compute_capability": "9.0",
        "uuid": "GPU-1111",
        "mig_mode": {"current": 1, "pending": 1},
        "ecc_mode": {"current": 1, "pending": 0},
        "power_limit_mw": 700000,
    }
    # not supported on this GPU: recorded as None, not an error
    assert (a10["mig_mode"], a10["ecc_mode"], a10["power_limit_mw"]) == (None, None, None)
    assert nvml.shut_down
    json.dumps(out)


@pytest.mark.parametrize(
    ("error", "state", "message"),
    [
        (pynvml.NVMLError_LibraryNotFound(), "no-driver", "no NVIDIA driver"),
        (pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED), "no-driver", "no NVIDIA driver"),
        (
            pynvml.NVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH),
            "driver-library-mismatch",
            "Driver/library version mismatch",
        ),
        (pynvml.NVMLError_NoPermission(), "no-permission", ""),
        (pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN), "error", "NVML failed to start"),
    ],
)
def test_case35_nvml_failures_are_recorded_states(
    error: BaseException, state: str, message: str
) -> None:
    out = fp.gpu_fingerprint(FakeNvml(init_error=error))
    assert out["state"] == state
    assert message in out["error"]
    assert out["gpus"] == []
    json.dumps(out)


def test_nvml_failing_midway_keeps_what_was_read() -> None:
    nvml = FakeNvml([H100, A10, A10], fail_on_gpu=1)
    out = fp.gpu_fingerprint(nvml)
    assert out["state"] == "partial" and "after 1 GPU(s)" in out["error"]
    assert [g["uuid"] for g in out["gpus"]] == ["GPU-1111"]
    assert nvml.shut_down


def test_driver_without_gpus() -> None:
    assert fp.gpu_fingerprint(FakeNvml([]))["state"] == "no-gpu"


def test_pynvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    out = fp.gpu_fingerprint()
    assert out["state"] == "no-pynvml"


def test_real_nvml_never_raises() -> None:
    out = fp.gpu_fingerprint()  # on a machine without a GPU: a state, not an exception
    assert out["state"] in {
        "ok",
        "no-gpu",
        "no-driver",
        "driver-library-mismatch",
        "no-permission",
        "error",
        "partial",
    }


# -- nix ----------------------------------------------------------------------------------

FLAKE_LOCK = {
    "nodes": {
        "nixpkgs": {
            "locked": {
                "lastModified": 1700000000,
                "narHash": "sha256-" + "A" * 43 + "=",
                "owner": "NixOS",
                "repo": "nixpkgs",
                "rev": "b" * 40,
                "type": "github",
            },
            "original": {
                "owner": "NixOS",
                "ref": "nixos-25.05",
                "repo": "nixpkgs",
                "type": "github",
            },
        },
        "helper": {"locked": {"type": "path", "path": "/nix/store/x-helper"}},
        "loose": {"original": {"type": "indirect", "id": "flake-utils"}},
        "root": {"inputs": {"nixpkgs": "nixpkgs", "helper": "helper", "utils": ["nixpkgs", "x"]}},
    },
    "root": "root",
    "version": 7,
}


class FakeRunner:
    """Answers argv containing given words (in order; longest key first) with
    (returncode, stdout, stderr), or raises the answer; records every call."""

    def __init__(self, answers: Mapping[tuple[str, ...], Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], Path | None]] = []

    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> _proc.Result:
        self.calls.append((list(argv), cwd))
        for prefix, answer in sorted(self.answers.items(), key=lambda kv: -len(kv[0])):
            if _has(argv, prefix):
                if isinstance(answer, BaseException):
                    raise answer
                code, out, err = answer
                return _proc.Result(tuple(argv), code, out.encode(), err.encode())
        raise MachineError(f"{argv[0]} is not installed or not on PATH")


def _has(argv: Sequence[str], words: Sequence[str]) -> bool:
    """``words`` appear in ``argv`` in order (not necessarily adjacent)."""
    it = iter(argv)
    return all(any(a == w for a in it) for w in words)


def write_lock(root: Path) -> bytes:
    raw = json.dumps(FLAKE_LOCK, indent=2).encode()
    (root / "flake.lock").write_bytes(raw)
    return raw


def test_nix_missing_still_reads_flake_lock(tmp_path: Path) -> None:
    raw = write_lock(tmp_path)
    runner = FakeRunner({})
    out = fp.nix_fingerprint(tmp_path, runner, devshell=True)
    assert out["available"] is False and "not installed" in out["error"]
    assert len(runner.calls) == 1  # `nix --version` only; nothing else is tried
    lock = out["flake_lock"]
    assert lock["sha256"] == hashlib.sha256(raw).hexdigest()
    assert lock["inputs"]["nixpkgs"] == {
        "type": "github",
        "narHash": "sha256-" + "A" * 43 + "=",
        "rev": "b" * 40,
        "lastModified": 1700000000,
        "owner": "NixOS",
        "repo": "nixpkgs",
    }
    assert lock["root_inputs"]["utils"] == ["nixpkgs", "x"]
    assert lock["unpinned"] == ["helper", "loose"]  # no narHash / no locked table
    json.dumps(out)


def test_flake_lock_missing_or_broken(tmp_path: Path) -> None:
    runner = FakeRunner({})
    assert fp.nix_fingerprint(tmp_path, runner)["flake_lock"] == {
        "sha256": None,
        "error": "no flake.lock",
    }
    (tmp_path / "flake.lock").write_text("{")
    assert "not valid JSON" in fp.nix_fingerprint(tmp_path, runner)["flake_lock"]["error"]
    (tmp_path / "flake.lock").write_text("[]")
    assert "no `nodes`" in fp.nix_fingerprint(tmp_path, runner)["flake_lock"]["error"]


CONFIG = """\
allowed-users = *
experimental-features = nix-command flakes
sandbox = true
substituters = https://cache.nixos.org/
system-features = benchmark big-parallel kvm nixos-test
trusted-public-keys = cache.nixos.org-1:6NCHdD59X431o0gWypbMrAURkbJ16ZPMQFGspcDShjY=
"""


def test_nix_version_config_and_devshell(tmp_path: Path) -> None:
    write_lock(tmp_path)
    runner = FakeRunner(
        {
            ("nix", "--version"): (0, "nix (Nix) 2.26.3\n", ""),
            ("nix", "config", "show"): (0, CONFIG, ""),
            ("nix", "builtins.currentSystem"): (0, "x86_64-linux", ""),
            ("nix", "eval", "--raw", ".#devShells.x86_64-linux.default.drvPath"): (
                0,
                "/nix/store/abc-nix-shell.drv",
                "",
            ),
        }
    )
    out = fp.nix_fingerprint(tmp_path, runner)
    assert out["available"] and out["version"] == "2.26.3"
    assert out["config"] == {
        "sandbox": "true",
        "substituters": "https://cache.nixos.org/",
        "trusted-public-keys": "cache.nixos.org-1:6NCHdD59X431o0gWypbMrAURkbJ16ZPMQFGspcDShjY=",
        "system-features": "benchmark big-parallel kvm nixos-test",
        "experimental-features": "nix-command flakes",
    }
    assert "devshell" not in out  # only when asked: it can be slow
    assert not any("eval" in argv for argv, _ in runner.calls if ".#" in " ".join(argv))
    out = fp.nix_fingerprint(tmp_path, runner, devshell=True)
    assert out["devshell"] == {"system": "x86_64-linux", "drv_path": "/nix/store/abc-nix-shell.drv"}
    [(argv, cwd)] = [
        (a, c) for a, c in runner.calls if ".#devShells.x86_64-linux.default.drvPath" in a
    ]
    assert cwd == tmp_path
    assert "--accept-flake-config" not in argv
    assert argv[argv.index("accept-flake-config") + 1] == "false"


def test_old_nix_uses_show_config_and_devshell_errors_are_recorded(tmp_path: Path) -> None:
    runner = FakeRunner(
        {
            ("nix", "--version"): (0, "nix (Nix) 2.8.0\n", ""),
            ("nix", "show-config"): (0, CONFIG, ""),
            ("nix", "eval", "--raw", ".#devShells.aarch64-linux.default.drvPath"): (
                1,
                "",
                "warning: Git tree is dirty\nerror: unable to download 'https://x'\n(use '--show-trace' to show detailed location information)\n",
            ),
        }
    )
    out = fp.nix_fingerprint(tmp_path, runner, devshell=True, system="aarch64-linux")
    assert out["config"]["sandbox"] == "true"
    assert out["devshell"] == {
        "system": "aarch64-linux",
        "drv_path": None,
        "error": "error: unable to download 'https://x'",
    }
    slow = FakeRunner(
        {
            ("nix", "--version"): (0, "nix (Nix) 2.8.0\n", ""),
            ("nix", "show-config"): (0, CONFIG, ""),
            ("nix", "eval", "--raw"): CommandFailed("`nix eval` did not finish within 300s"),
        }
    )
    out = fp.nix_fingerprint(tmp_path, slow, devshell=True, system="x86_64-linux")
    assert "did not finish" in out["devshell"]["error"]


@pytest.mark.nix
def test_real_nix(tmp_path: Path) -> None:
    if shutil.which("nix") is None:
        pytest.skip("nix is not installed")
    write_lock(tmp_path)
    out = fp.nix_fingerprint(tmp_path)
    assert out["available"] and out["version"]
    assert "sandbox" in out["config"]


# -- git (case 34) ------------------------------------------------------------------------


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text("print('acc=0.9')\n")
    (root / "data.bin").write_bytes(bytes(range(256)))
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def test_clean_repository(repo: Path) -> None:
    out = fp.git_fingerprint(repo)
    assert out["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert out["branch"] == "main"
    assert out["dirty"] is False and out["diff_sha256"] is None
    assert out["untracked"] == [] and out["changed"] == []


def test_dirty_repository(repo: Path) -> None:
    (repo / "train.py").write_text("print('acc=0.99')\n")
    (repo / "data.bin").write_bytes(bytes(range(255, -1, -1)))
    (repo / "new.py").write_text("x = 1\n")
    (repo / "run.log").write_text("ignored\n")
    out = fp.git_fingerprint(repo)
    diff = subprocess.run(
        ["git", "-C", str(repo), "diff", "HEAD", "--binary"], check=True, capture_output=True
    ).stdout
    assert out["dirty"] is True
    assert out["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    assert out["changed"] == ["data.bin", "train.py"]
    assert out["untracked"] == ["new.py"] and out["untracked_count"] == 1  # run.log is ignored


def test_detached_head_and_no_commit(tmp_path: Path, repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    assert fp.git_fingerprint(repo)["branch"] is None
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "a.py").write_text("x\n")
    git(empty, "add", "a.py")
    out = fp.git_fingerprint(empty)
    assert out["commit"] is None and out["dirty"] is True and out["changed"] == ["a.py"]


def test_not_a_repository(tmp_path: Path) -> None:
    out = fp.git_fingerprint(tmp_path)
    assert out["commit"] is None and "not a git work tree" in out["error"]


def test_case34_hostile_git_config_runs_nothing(tmp_path: Path, repo: Path) -> None:
    marks = {
        name: tmp_path / f"pwned-{name}" for name in ("fsmonitor", "filter", "textconv", "hook")
    }
    git(repo, "config", "core.fsmonitor", f"touch {marks['fsmonitor']}")
    git(repo, "config", "filter.evil.clean", f"touch {marks['filter']}; cat")
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "diff.evil2.textconv", f"touch {marks['textconv']}; cat")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "pre-commit", "post-index-change"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marks['hook']}\n")
        (hooks / hook).chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    (repo / ".gitattributes").write_text("* filter=evil diff=evil2\n")
    (repo / "train.py").write_text("print('changed')\n")
    out = fp.git_fingerprint(repo)
    assert out["dirty"] is True and "train.py" in out["changed"]
    assert out["diff_sha256"]
    assert [p.name for p in marks.values() if p.exists()] == []
    # the same repository does run them under plain git: the test's traps are real
    subprocess.run(["git", "-C", str(repo), "diff", "HEAD"], capture_output=True, check=False)
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, check=False)
    assert marks["filter"].exists() and marks["fsmonitor"].exists()


def test_git_missing(monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    def no_git(*args: Any, **kwargs: Any) -> Any:
        raise MachineError("git is not installed or not on PATH")

    monkeypatch.setattr(fp._proc, "git", no_git)
    out = fp.git_fingerprint(repo)
    assert out["error"] == "git is not installed or not on PATH"


# -- Python packages and the environment ----------------------------------------------------


def test_python_packages_of_a_real_interpreter() -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin")}
    out = fp.python_packages(sys.executable, env)
    assert "error" not in out, out
    names = [p["name"] for p in out["packages"]]
    assert "pydantic" in names
    assert names == sorted(names, key=str.lower)
    assert out["python"] == ".".join(map(str, sys.version_info[:3]))


def test_python_packages_read_only_the_headers_and_agree_with_importlib(tmp_path: Path) -> None:
    """The listing parses each distribution's metadata only up to the blank line that ends
    its headers (the long description after it made the listing 2-3x slower); what it
    reports is still what importlib.metadata's own ``metadata["Name"]`` and ``version``
    say, for every distribution the interpreter sees and for odd ones written here."""
    site = tmp_path / "site"
    body = "\n".join(["Name: not-the-name", "Version: 0.0", *(["x" * 80] * 2000)])
    dists = {
        "plain-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: Plain\nVersion: 1.0\n\n{body}\n",
        "old_egg-2.0.egg-info/PKG-INFO": "Metadata-Version: 1.0\nName: old-egg\nVersion: 2.0\n",
        "first-3.dist-info/METADATA": "Name: first\nName: second\nVersion: 3\n",
        "noname-4.dist-info/METADATA": "Version: 4\n\nName: in-the-body\n",
        "folded-5.dist-info/METADATA": "Name: folded\nSummary: a\n  Version: 9\nVersion: 5\n",
        "flat-6.egg-info": "Metadata-Version: 1.0\nName: flat\nVersion: 6\n",
    }
    write_tree(site, dists)
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONPATH": str(site)}
    out = fp.python_packages(sys.executable, env)
    assert "error" not in out, out
    listed = {(p["name"], p["version"]) for p in out["packages"]}
    own = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from importlib import metadata as m; print(json.dumps(sorted("
            "{(d.metadata['Name'], d.version or '') for d in m.distributions()"
            " if d.metadata['Name']})))",
        ],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed == {tuple(p) for p in json.loads(own.stdout)}
    assert {("Plain", "1.0"), ("old-egg", "2.0"), ("first", "3"), ("flat", "6")} <= listed
    assert ("folded", "5") in listed
    assert not any(name in {"not-the-name", "in-the-body"} for name, _ in listed)


def test_python_packages_without_importlib_metadata_read_the_same_files(tmp_path: Path) -> None:
    """A Python older than 3.8 (date-bounded environments of 2018-2019 code run 3.7) has
    no importlib.metadata: the listing then reads each path entry's ``*.dist-info`` and
    ``*.egg-info`` itself, and lists what importlib.metadata would (it said "unavailable"
    and listed nothing). Simulated here by a sitecustomize that makes the import fail."""
    site = tmp_path / "site"
    dists = {
        "plain-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: Plain\nVersion: 1.0\n\nx\n",
        "old_egg-2.0.egg-info/PKG-INFO": "Metadata-Version: 1.0\nName: old-egg\nVersion: 2.0\n",
        "flat-6.egg-info": "Metadata-Version: 1.0\nName: flat\nVersion: 6\n",
        "noname-4.dist-info/METADATA": "Version: 4\n",
    }
    write_tree(site, dists)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['importlib.metadata'] = None\n"
    )
    path = os.environ.get("PATH", "/usr/bin")
    modern = fp.python_packages(sys.executable, {"PATH": path, "PYTHONPATH": str(site)})
    old = fp.python_packages(sys.executable, {"PATH": path, "PYTHONPATH": f"{blocker}:{site}"})
    assert "error" not in old, old
    assert {("Plain", "1.0"), ("old-egg", "2.0"), ("flat", "6")} <= {
        (p["name"], p["version"]) for p in old["packages"]
    }
    assert old["packages"] == modern["packages"]


def test_python_packages_failures_are_recorded() -> None:
    out = fp.python_packages("no-such-python-here", {"PATH": "/nonexistent"})
    assert out["packages"] == [] and "not installed" in out["error"]
    crash = FakeRunner({("python",): (1, "", "Traceback...\nSyntaxError: boom\n")})
    out = fp.python_packages("python", {}, run=crash)
    assert out["error"] == "python exited 1: SyntaxError: boom"
    garbage = FakeRunner({("python",): (0, "not json", "")})
    assert "unexpected output" in fp.python_packages("python", {}, run=garbage)["error"]


def test_python_packages_run_in_the_given_env_from_root() -> None:
    runner = FakeRunner({("python",): (0, '{"python": "3.8.18", "packages": []}', "")})
    out = fp.python_packages("python", {"A": "1"}, run=runner)
    assert out["python"] == "3.8.18"
    [(argv, cwd)] = runner.calls
    assert argv[:2] == ["python", "-c"] and cwd == Path("/")


def test_env_snapshot_scrubs(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "tok" + "en-" + "x" * 20
    env = {"PATH": "/usr/bin", "FAKE_TOKEN": token, "LC_ALL": "C", "OTHER": "value"}
    out = fp.env_snapshot(env, ["PATH", "LC_*", "FAKE_TOKEN"])
    text = json.dumps(out)
    assert token not in text
    assert out["variables"]["PATH"] == "/usr/bin" and out["variables"]["LC_ALL"] == "C"
    assert out["variables"]["OTHER"] != "value"  # not allowlisted: value not stored
    assert set(out["variables"]) == set(env)  # every name is kept
