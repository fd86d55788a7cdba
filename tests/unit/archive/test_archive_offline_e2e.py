"""Issue 13's proof: a supplement reproduces with the network unplugged.

The bundled example gets a real third-party wheel dependency (``six``, imported by
train.py), is initialised with a uv lock and packed with ``rb archive --supplement``; the
wheel is fetched once from PyPI into this module's own rb cache while the fixture is
built. The archive is unpacked into an empty directory and ``rb audit --offline`` runs
there, the whole rb process inside a network namespace with no interface up
(``unshare -n``, root only: CI runs as root), and must PASS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository

pytestmark = [pytest.mark.slow]

GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
SIX = "six==1.17.0"


def _unshare() -> list[str]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a network namespace (CI runs as root)")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"unshare -n does not work here: {probe.stderr.decode().strip()}")
    return ["unshare", "-n"]


def _rb(
    *args: str, cwd: Path, env: dict[str, str], wrap: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(wrap or []), sys.executable, "-m", "reprobridge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
        timeout=900,
    )


@pytest.fixture(scope="module")
def supplement(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("offline")
    env = {"RB_CACHE_DIR": str(base / "rb-cache")}  # this test's own wheel cache
    repo = copy_example(base / "mixup-paper")
    (repo / "requirements.txt").write_text(f"{SIX}\n")
    train = repo / "train.py"
    train.write_text(
        train.read_text().replace(
            "import random\n", "import random\n\nimport six  # noqa: F401  a third-party wheel\n"
        )
    )
    init_repository(repo, paper=repo / "paper.md", lock="always")  # uv lock: PyPI
    subprocess.run(["git", *GIT_ID, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", *GIT_ID, "-C", str(repo), "commit", "-qm", "rb init"], check=True)
    out = base / "supplement.tar.gz"
    proc = _rb("archive", "--supplement", "--evidence", "none", "-o", str(out), cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "before compression" in proc.stderr  # the size, shown before packing
    return out, env


def test_supplement_holds_the_locked_wheel(supplement: tuple[Path, dict[str, str]]) -> None:
    out, env = supplement
    proc = _rb("archive", "--check", str(out), "--json", cwd=out.parent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    items = {i["what"]: i for i in doc["items"]}
    assert doc["host_complete"] is True
    assert items["wheels"]["status"] == "ok"
    assert items["source"]["status"] == "ok"
    assert (
        items["closure"]["status"] == "lacks"
    )  # no --with-closure: the Nix backend would download


def test_unpacked_supplement_audits_to_pass_without_network(
    supplement: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    out, env = supplement
    wrap = _unshare()
    # The namespace really is offline: PyPI cannot be reached from it.
    probe = subprocess.run(
        [
            *wrap,
            sys.executable,
            "-c",
            "import socket; socket.create_connection(('pypi.org', 443), 5)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode != 0
    dest = tmp_path / "paper"
    dest.mkdir()  # an empty directory
    proc = _rb("unpack", str(out), str(dest), cwd=tmp_path, env=env, wrap=wrap)
    assert proc.returncode == 0, proc.stderr
    assert "rb audit --offline" in proc.stdout
    assert (dest / "wheels" / "six-1.17.0-py2.py3-none-any.whl").is_file()
    # An empty uv cache, so nothing can come from an earlier install on this machine.
    env = {**env, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    proc = _rb("audit", "--offline", "--runs", "1", "--json", cwd=dest, env=env, wrap=wrap)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    verdict = json.loads(proc.stdout)
    assert verdict["verdict"] == "PASS"
    bundle = Path(verdict["path"]) if "path" in verdict else None
    if bundle is not None:
        environment = json.loads((bundle / "environment.json").read_text())
        assert environment["fingerprint"]["offline_wheels"].endswith("wheels")


def test_offline_fails_fast_naming_a_missing_wheel(
    supplement: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    out, env = supplement
    dest = tmp_path / "paper"
    assert _rb("unpack", str(out), str(dest), cwd=tmp_path, env=env).returncode == 0
    (dest / "wheels" / "six-1.17.0-py2.py3-none-any.whl").unlink()
    proc = _rb("audit", "--offline", "--runs", "1", cwd=dest, env=env)
    assert proc.returncode == 9
    assert "six 1.17.0 (six-1.17.0-py2.py3-none-any.whl) is not in wheels/" in proc.stderr
    assert not (dest / "repro" / "evidence").exists() or not list(
        (dest / "repro" / "evidence").iterdir()
    )
