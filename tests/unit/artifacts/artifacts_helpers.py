"""Helpers shared by the artifact tests (plain module: test files import it by name)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import tomlkit

from reprobridge.manifest.schema import Manifest

TESTS = Path(__file__).resolve().parents[2]
GOLDEN = TESTS / "golden"
NIXSTUB = TESTS / "nixstub"
#: The real nixpkgs lib (shared/data/nixpkgs-lib.README.md), beside the clone in CI
#: (``../shared``); a worktree further down finds it in an ancestor's ``shared``.
NIXPKGS_LIB_TARBALL = Path("shared/data/nixpkgs-lib.tar.gz")


def nixpkgs_lib_tarball() -> Path | None:
    """``../shared/data/nixpkgs-lib.tar.gz`` from the repository root, else the nearest
    ancestor's ``shared/data/nixpkgs-lib.tar.gz``; None when there is none."""
    for parent in TESTS.parent.parents:
        candidate = parent / NIXPKGS_LIB_TARBALL
        if candidate.is_file():
            return candidate
    return None


def unpack_nixpkgs_lib(dest: Path) -> Path:
    """The real nixpkgs lib unpacked into ``dest``: the directory to ``import`` as ``lib``
    (``dest/nixpkgs-lib/lib``). Call only when :func:`nix_unusable` said None."""
    tarball = nixpkgs_lib_tarball()
    assert tarball is not None, "nix_unusable() checks for the tarball"
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(dest)], check=True)
    return dest / "nixpkgs-lib" / "lib"


#: rb version written into rendered files under test (golden files must not change per release).
VERSION = "0.0.0-test"

PIN = {
    "release": "nixos-24.05",
    "rev": "b134951a4c9f3c995fd7be05f3243f8ecd65d798",
    "narHash": "sha256-OnSAY7XDSx7CtDoqNh8jwVwh4xNL/2HaJxGjryLWzX8=",
    "lastModified": 1735471104,
}

#: Offline single-user settings for Debian's nix 2.8 (and newer). See tests/nixstub/README.md.
NIX_CONFIG = "\n".join(
    [
        "experimental-features = nix-command flakes",
        "sandbox = false",
        "build-users-group =",
        "substituters =",
        "flake-registry =",
        "warn-dirty = false",
        # nix 2.8's evaluation cache mangles string context ("path '...drv !out!...' is not
        # in the Nix store" on `nix eval .#drv.attr`), and the tests want fresh evaluations.
        "eval-cache = false",
        "",
    ]
)
#: Debian 13's nix run from a private prefix cannot re-exec its build hook, so it gets none.
#: Never for 2.8: there an empty build-hook makes every real build fail with "executing '':
#: No such file or directory" (hidden whenever the store already holds the outputs).
NIX_CONFIG_NO_HOOK = NIX_CONFIG + "build-hook =\n"

HOST_COREUTILS = [
    "basename",
    "cat",
    "chmod",
    "cp",
    "date",
    "dirname",
    "env",
    "false",
    "head",
    "id",
    "ln",
    "ls",
    "mkdir",
    "mktemp",
    "mv",
    "printf",
    "pwd",
    "readlink",
    "rm",
    "sleep",
    "sort",
    "tail",
    "tee",
    "timeout",
    "touch",
    "tr",
    "true",
    "uname",
    "wc",
]


def sample_manifest_data() -> dict[str, Any]:
    """The manifest (dict form) behind the golden files; every renderer feature appears."""
    return {
        "schema": 1,
        "project": {"name": "FastMix", "paper": {"title": "FastMix: mixing, fast"}},
        "environment": {
            "python": "3.10",
            "cuda": "12.1",
            "nvcc": True,
            "compilers": {"gcc": "12"},
            "system": ["libsndfile", "ffmpeg"],
            "nixpkgs": PIN,
            "python_requirements": ["torch==2.1.2", "hydra-core>=1.3", "numpy<2"],
            "python_indexes": ["https://download.pytorch.org/whl/cu121"],
            "python_lock": "repro/python/uv.lock",
        },
        "datasets": {"cifar10": {"path": "data/cifar10", "name": "torchvision CIFAR10"}},
        "experiments": {
            "exp3": {
                "description": "FastMix with fused kernel (Table 3, row 4)\nsecond line",
                "command": "python -m src.train experiment=exp3 seed={seed} lr={lr} "
                "--run-name {name} --tag 'it''s {name}'",
                "params": {"lr": 0.0005, "name": "fused run", "epochs": 20, "amp": True},
                "seeds": [42, 43],
                "timeout": "2h",
                "network": False,
                "datasets": ["cifar10"],
                "outputs": [{"path": "outputs/exp3/model.pt"}],
                "metrics": {
                    "top1_acc": {
                        "source": {"regex": "top1_acc=([0-9.]+)"},
                        "target": 0.912,
                        "tolerance": 0.005,
                        "provenance": "paper.pdf: Table 3, row 4",
                    }
                },
                "tiers": {
                    "smoke": {
                        "params": {"epochs": 1, "name": "smoke run"},
                        "seeds": [0],
                        "timeout": "10m",
                    }
                },
            },
            "baseline": {
                "command": "python train.py --seed {seed} 2>&1 | tee out.log",
                "workdir": "baselines/v1",
                "network": True,
                "metrics": {
                    "acc": {
                        "source": {"file": "results/metrics.json", "key": "eval.acc"},
                        "min": 0.8,
                    }
                },
            },
        },
    }


def manifest_toml(manifest: Manifest) -> str:
    """reprobridge.toml text for ``manifest`` (what rb would write, minus comments)."""
    return tomlkit.dumps(manifest.model_dump(mode="json", by_alias=True, exclude_none=True))


def nix_env(extra: dict[str, str] | None = None, *, binary: str = "nix") -> dict[str, str]:
    """The host environment minus any NIX_* settings, plus the offline NIX_CONFIG for ``binary``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIX_")}
    env["NIX_CONFIG"] = NIX_CONFIG_NO_HOOK if binary == "nix-trixie" else NIX_CONFIG
    if os.geteuid() != 0:
        env["NIX_REMOTE"] = "daemon"  # only reached when a daemon socket exists (see below)
    env.update(extra or {})
    return env


#: Nix binaries the flake tests run under, when installed: Debian 12's nix 2.8, and Debian
#: 13's 2.26 as installed by nix-trixie-install.sh (closer to what users run, >= 2.18).
NIX_BINARIES = ("nix", "nix-trixie")


def nix_unusable(binary: str = "nix") -> str | None:
    """Why the nix tests cannot run here with ``binary``, or None."""
    if shutil.which(binary) is None:
        return f"{binary} is not installed" + (
            " (apt-get install nix-bin)" if binary == "nix" else ""
        )
    if not (Path("/bin/bash-static").exists() and Path("/bin/busybox").exists()):
        return "the nix stub needs /bin/bash-static and /bin/busybox (bash-static, busybox-static)"
    if nixpkgs_lib_tarball() is None:
        return f"the nix stub needs the real nixpkgs lib: no ../{NIXPKGS_LIB_TARBALL}"
    if os.geteuid() != 0 and not Path("/nix/var/nix/daemon-socket/socket").exists():
        return "nix needs root (single-user store) or a running nix-daemon"
    return None


def host_python() -> str:
    """The real interpreter running the tests (not a venv's launcher), for the stub's python."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def host_uv() -> str | None:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    return found if Path(found).is_file() else None


def git_track(repo: Path) -> None:
    """``git add -A`` in ``repo`` (flakes only see tracked files)."""
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)


class NixRunner:
    """Runs ``BINARY SUB --no-write-lock-file --override-input nixpkgs path:STUB ARGS``."""

    def __init__(self, binary: str, stub: str) -> None:
        self.binary = binary
        self.stub = stub

    def __call__(
        self, sub: str, *args: str, cwd: Path, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.binary, sub, "--no-write-lock-file", "--override-input", "nixpkgs"]
        return subprocess.run(
            [*argv, f"path:{self.stub}", *args],
            cwd=cwd,
            env=nix_env(binary=self.binary),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
