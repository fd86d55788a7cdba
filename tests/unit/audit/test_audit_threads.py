"""The operator's CPU thread share of a run (`rb audit --threads N`, RB_THREADS, the user
config): it reaches the run's environment, wins over the host's and the backend's values,
and is recorded in the evidence. Before it, parallel runs each started a thread pool as
large as the machine (torch's OpenMP pool) and ran 10-20x slower than alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobridge.audit import auditor
from reprobridge.audit.auditor import AuditOptions
from reprobridge.audit.plan import PlannedRun
from reprobridge.audit.threads import THREAD_VARS, share_per_job, thread_env
from reprobridge.errors import EXIT_USAGE, ConfigError
from reprobridge.settings import parse_threads

#: The run prints what it was given (one line per variable) and a metric.
PRINTS_THREADS = (
    "for v in " + " ".join(THREAD_VARS) + '; do eval "echo $v=\\${$v:-unset}"; done\necho acc=0.9\n'
)


def _rb(root: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`rb ARGS` in ``root`` with no user config and no RB_THREADS but ``env``."""
    base = {k: v for k, v in os.environ.items() if k != "RB_THREADS" and k not in THREAD_VARS}
    return subprocess.run(
        [sys.executable, "-m", "reprobridge", *args],
        cwd=root,
        env={**base, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _audit(root: Path, tmp_path: Path, *args: str, **env: str) -> tuple[dict[str, Any], Path]:
    """`rb audit --runs 1 --backend host ARGS --json`: its document and bundle (exit 0)."""
    out = _rb(root, tmp_path, "audit", "--runs", "1", "--backend", "host", *args, "--json", **env)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc, Path(doc["path"])


def _printed(bundle: Path) -> dict[str, str]:
    lines = (bundle / "runs/main/0/stdout.log").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.split("=", 1)[0] in THREAD_VARS)


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_the_flag_reaches_the_run_and_the_evidence(tiny_repo, tmp_path: Path, sandbox: str) -> None:
    root = tiny_repo(PRINTS_THREADS)
    # The host's own value would pass through without the flag; the flag replaces it.
    doc, bundle = _audit(
        root, tmp_path, "--sandbox", sandbox, "--threads", "3", OMP_NUM_THREADS="7"
    )
    assert _printed(bundle) == dict.fromkeys(THREAD_VARS, "3")
    env = json.loads((bundle / "runs/main/0/env.json").read_text())
    assert {v: env[v] for v in THREAD_VARS} == dict.fromkeys(THREAD_VARS, "3")  # values kept
    record = json.loads((bundle / "runs/main/0/status.json").read_text())["record"]
    assert record["threads"] == 3
    assert doc["threads"] == 3
    assert json.loads((bundle / "audit.json").read_text())["threads"] == 3
    report = _rb(root, tmp_path, "report", "--format", "md", "-o", "-")
    assert "3 CPU thread(s) per run" in report.stdout, report.stderr
    html = _rb(root, tmp_path, "report", "--format", "html", "-o", "-")
    assert "<dt>threads</dt><dd>3 CPU thread(s) per run</dd>" in html.stdout, html.stderr


def test_without_a_setting_the_hosts_values_pass_and_nothing_is_recorded(
    tiny_repo, tmp_path: Path
) -> None:
    root = tiny_repo(PRINTS_THREADS)
    doc, bundle = _audit(root, tmp_path, OPENBLAS_NUM_THREADS="5")
    printed = _printed(bundle)
    assert printed["OPENBLAS_NUM_THREADS"] == "5"  # passed through, as OMP/MKL always were
    assert printed["OMP_NUM_THREADS"] == "unset"
    record = json.loads((bundle / "runs/main/0/status.json").read_text())["record"]
    assert record["threads"] is None
    assert doc["threads"] is None


def test_rb_threads_applies_and_the_flag_wins(tiny_repo, tmp_path: Path) -> None:
    root = tiny_repo(PRINTS_THREADS)
    _, by_env = _audit(root, tmp_path, "--sandbox", "off", RB_THREADS="2")
    assert _printed(by_env)["MKL_NUM_THREADS"] == "2"
    _, by_flag = _audit(root, tmp_path, "--sandbox", "off", "--threads", "1", RB_THREADS="2")
    assert _printed(by_flag)["MKL_NUM_THREADS"] == "1"


@pytest.mark.parametrize("bad", ["0", "abc"])
def test_a_bad_thread_count_is_one_error_line_exit_2(tmp_path: Path, bad: str) -> None:
    for verb in (("audit",), ("run", "main"), ("bench", "suite.toml")):
        out = _rb(tmp_path, tmp_path, *verb, "--threads", bad)
        assert out.returncode == EXIT_USAGE == 2, (verb, out.stderr)
        lines = out.stderr.splitlines()
        assert lines[0] == (
            f"error: --threads: expected a whole number of CPU threads from 1 to 4096; got {bad!r}"
        )
        assert [ln for ln in lines[1:] if not ln.startswith("hint: ")] == []


def test_bad_thread_counts_from_every_source(tmp_path: Path) -> None:
    for bad in ("-1", "2.5", "4097", "", "٣"):
        with pytest.raises(ConfigError, match=r"^--threads: expected a whole number"):
            parse_threads(bad, "--threads")
    assert parse_threads(" 4 ", "--threads") == 4
    env = _rb(tmp_path, tmp_path, "audit", RB_THREADS="abc")
    assert env.returncode == 2
    assert env.stderr.startswith("error: RB_THREADS: expected a whole number")
    (tmp_path / "xdg/rb").mkdir(parents=True)
    (tmp_path / "xdg/rb/config.toml").write_text("threads = 0\n")
    conf = _rb(tmp_path, tmp_path, "audit")
    assert conf.returncode == 2
    assert conf.stderr.startswith(f"error: {tmp_path}/xdg/rb/config.toml: threads: ")


def test_the_setting_wins_over_the_backends_environment(tmp_path: Path) -> None:
    """Every backend's environment (a Nix devShell's, the host's venv) is set first; the
    operator's share is set over it, so no backend can undo it."""
    run_dir = tmp_path / "bundle/runs/main/0"
    run_dir.mkdir(parents=True)
    request, env = auditor._run_request(
        tmp_path,
        PlannedRun("main", 0, 1, 60.0),
        _experiment(),
        AuditOptions(threads=2),
        {"OMP_NUM_THREADS": "16", "PATH": "/nix/store/x/bin"},
        (),
        run_dir,
        auditor._Interrupt(),
    )
    assert {v: env[v] for v in THREAD_VARS} == dict.fromkeys(THREAD_VARS, "2")
    assert request.env is env and env["PATH"] == "/nix/store/x/bin"
    unset, _ = auditor._run_request(
        tmp_path,
        PlannedRun("main", 0, 1, 60.0),
        _experiment(),
        AuditOptions(),
        {"OMP_NUM_THREADS": "16"},
        (),
        run_dir,
        auditor._Interrupt(),
    )
    assert unset.env["OMP_NUM_THREADS"] == "16"  # no setting: nothing is changed


def _experiment():  # type: ignore[no-untyped-def]
    from reprobridge.manifest.schema import Experiment

    return Experiment(command="bash run.sh")


def test_the_share_per_job_and_the_variables() -> None:
    assert share_per_job(3, cpus=2) == 1
    assert share_per_job(2, cpus=8) == 4
    assert share_per_job(3, cpus=8) == 2
    assert share_per_job(1, cpus=1) == 1
    assert thread_env(4)["OMP_NUM_THREADS"] == "4"
    with pytest.raises(ValueError):
        thread_env(0)
