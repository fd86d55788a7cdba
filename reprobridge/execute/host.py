"""The host executor: no Nix; the launcher runs in the machine's own shell.

Python comes from a uv venv made from ``repro/python`` when the manifest has requirements,
else from the interpreter running rb. Runs are marked non-hermetic: nothing pins the
system libraries, the compiler or the Python build.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from reprobridge import _proc
from reprobridge.constants import CHECK_SCRIPT, LAUNCHERS_DIR, LOGS_DIR, MANIFEST_FILE, PYTHON_DIR
from reprobridge.execute.base import RunOutcome, RunRequest
from reprobridge.manifest.io import load_manifest


class HostExecutor:
    """Runs ``repro/launchers/<exp>.sh`` with bash, then ``repro/check.py``."""

    name = "host"

    def __init__(self, root: Path) -> None:
        self.root = root

    def unavailable(self) -> str | None:
        return None if _proc.which("bash") else "bash is not installed"

    def _python_bin(self, has_requirements: bool) -> str:
        if not has_requirements:
            return str(Path(sys.executable).parent)
        uv = _proc.which("uv") or str(Path(sys.executable).parent / "uv")
        project = self.root / PYTHON_DIR
        lock = ["--frozen"] if (project / "uv.lock").is_file() else []
        _proc.run([uv, "sync", "--project", str(project), *lock], cwd=self.root, timeout=1800)
        return str(project / ".venv" / "bin")

    def run(self, request: RunRequest, *, echo: bool = False) -> RunOutcome:
        manifest, _ = load_manifest(self.root / MANIFEST_FILE)
        exp = manifest.experiments[request.experiment]
        seed = request.seed if request.seed is not None else exp.seeds[0]
        bindir = self._python_bin(bool(manifest.environment.python_requirements))
        env = dict(os.environ)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        log = self.root / LOGS_DIR / request.experiment / f"{request.tier}-seed{seed}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        launcher = self.root / LAUNCHERS_DIR / f"{request.experiment}.sh"
        result = _proc.run(
            ["bash", str(launcher), "--tier", request.tier, "--seed", str(seed)],
            cwd=self.root,
            env=env,
            timeout=None,
            check=False,
        )
        log.write_bytes(result.stdout + result.stderr)
        if echo:
            sys.stdout.write(result.text)
        spec = log.with_suffix(".spec.json")
        spec.write_text(
            json.dumps(
                exp.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True
            )
        )
        check = _proc.run(
            [
                str(Path(bindir) / "python"),
                str(self.root / CHECK_SCRIPT),
                "--spec",
                str(spec),
                "--experiment",
                request.experiment,
                "--tier",
                request.tier,
                "--log",
                str(log),
                "--workdir",
                str(self.root / exp.workdir),
            ],
            cwd=self.root,
            env=env,
            timeout=600,
            check=False,
        )
        code = result.returncode if result.returncode != 0 else check.returncode
        return RunOutcome(
            self.name, code, log, check.text + check.stderr.decode(errors="replace"), hermetic=False
        )
