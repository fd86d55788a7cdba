"""Audited runs have no display (the sandbox binds no X or Wayland socket): drawing code
gets off-screen drivers, so a pygame window (gym's `env.render()` on gym 0.22-0.25) draws
nowhere instead of stopping the run with "No available video device"; the evidence records
the values. The operator's own display settings do not reach a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprobridge.sandbox import headless_env

PRINTS = "".join(f'echo "{k}=${{{k}:-unset}}"\n' for k in headless_env()) + "echo acc=0.9\n"


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_run_draws_off_screen_and_the_evidence_says_so(tiny_repo, sandbox: str) -> None:
    root = tiny_repo(PRINTS)
    host = {**os.environ, "SDL_VIDEODRIVER": "x11", "QT_QPA_PLATFORM": "xcb"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reprobridge",
            "audit",
            "--runs",
            "1",
            "--backend",
            "host",
            "--sandbox",
            sandbox,
            "--json",
        ],
        cwd=root,
        env=host,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    bundle = Path(json.loads(out.stdout)["path"])
    lines = (bundle / "runs/main/0/stdout.log").read_text().splitlines()
    printed = dict(line.split("=", 1) for line in lines if line.split("=", 1)[0] in headless_env())
    assert printed == headless_env()
    env = json.loads((bundle / "runs/main/0/env.json").read_text())
    assert {k: env[k] for k in headless_env()} == headless_env()
