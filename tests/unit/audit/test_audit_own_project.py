"""The repository's own project is installed for each run, in the run's sandbox (issue 9,
item 4): code that reads its installed metadata (``importlib.metadata.version``, as
BayesianOptimization's notebooks do) fails with the project on PYTHONPATH alone.

The project here has an in-tree PEP 660 build backend (so nothing comes from the network)
that tries to write a file on the host and reads a secret from the environment: it must run
only in the sandbox, see no secret, and a failed or refused install must leave the run on
PYTHONPATH, not fail it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reprobridge import sandbox
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.initializer import init_repository

_REASON = sandbox.sandbox_unusable() if sandbox.bwrap_path() else "no bwrap"
needs_sandbox = pytest.mark.skipif(_REASON is not None, reason=f"sandbox unusable: {_REASON}")

SECRET = "s3cr3t-own-project-0123456789"

BACKEND = r"""
import base64, hashlib, os, pathlib, zipfile

ESCAPE = {escape!r}


def get_requires_for_build_editable(config_settings=None):
    return []


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    seen = os.environ.get("RB_TEST_SECRET", "absent")
    try:
        pathlib.Path(ESCAPE).write_text(seen)
    except OSError:
        pass
    {fail}
    name = "tinyproj-0.7-py3-none-any.whl"
    files = {{
        "tinyproj-0.7.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinyproj\nVersion: 0.7\nSummary: %s\n" % seen,
        "tinyproj-0.7.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }}
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
        record.append("tinyproj-0.7.dist-info/RECORD,,")
        z.writestr("tinyproj-0.7.dist-info/RECORD", "\n".join(record) + "\n")
    return name
"""

SHOW = """from importlib import metadata

import tinyproj

try:
    print("version=" + metadata.version("tinyproj"))
    print("summary=" + metadata.metadata("tinyproj")["Summary"])
except metadata.PackageNotFoundError:
    print("version=missing")
print("acc=%s" % tinyproj.ACC)
"""


def _repo(make_repo, escape: Path, *, fail: bool = False) -> Path:
    manifest = f"""schema = 1
[project]
name = "tinyproj"
[environment]
python = "{sys.version_info.major}.{sys.version_info.minor}"
pythonpath = ["."]
install_project = true
[experiments.show]
command = "python show.py"
workdir = "examples"
timeout = "5m"
[experiments.show.metrics.acc]
source = {{regex = "acc=([0-9.]+)"}}
min = 0.5
"""
    root = make_repo(
        {
            "reprobridge.toml": manifest,
            "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
            'backend-path = ["."]\n\n[project]\nname = "tinyproj"\nversion = "0.7"\n',
            "backend.py": BACKEND.format(
                escape=str(escape), fail='raise RuntimeError("no")' if fail else ""
            ),
            "tinyproj/__init__.py": "ACC = 0.9\n",
            "examples/show.py": SHOW,
        }
    )
    init_repository(root, lock="never")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "rb init"], check=True)
    return root


def _stdout(result, exp: str = "show") -> str:
    return (result.path / f"runs/{exp}/0/stdout.log").read_text()


@needs_sandbox
def test_the_project_is_installed_in_the_runs_sandbox(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    escape = tmp_path / "escaped-from-build"
    root = _repo(make_repo, escape)
    monkeypatch.setenv("RB_TEST_SECRET", SECRET)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    out = _stdout(result)
    assert result.passed, out
    assert "version=0.7" in out  # its metadata is found from examples/
    assert "summary=absent" in out  # the build saw no secret
    assert not escape.exists(), f"the build backend ran on the host: {escape.read_text()!r}"
    env = json.loads((result.path / "environment.json").read_text())
    assert "installed editable" in json.dumps(env)


@needs_sandbox
def test_a_failed_install_leaves_the_run_on_pythonpath(make_repo, tmp_path: Path) -> None:
    root = _repo(make_repo, tmp_path / "escape", fail=True)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    out = _stdout(result)
    assert result.passed, out  # imports still work from environment.pythonpath
    assert "version=missing" in out
    log = (result.path / "runs/show/0/setup-0.stderr.log").read_text()
    assert "optional: the run goes on without it" in log


def test_with_no_build_the_project_is_not_built(make_repo, tmp_path: Path) -> None:
    escape = tmp_path / "escaped-from-build"
    root = _repo(make_repo, escape)
    result = run_audit(root, AuditOptions(runs=1, backend="host", no_build=True))
    assert not escape.exists()
    assert "version=missing" in _stdout(result)
    env = json.loads((result.path / "environment.json").read_text())
    assert "on PYTHONPATH only" in json.dumps(env)
