"""A problem of the auditor's machine is never the paper's FAIL.

No GPU for a GPU experiment, no Python of the manifest's version, a Nix that is missing
(or too old, or offline: tests/unit/artifacts/test_artifacts_audit_nix.py): the bundle is
sealed NOT JUDGED, the level that could not be judged says ``not-judged: <reason>``,
`rb audit` exits 11 (MachineError's code), `rb verify` re-derives NOT JUDGED and
`rb report` shows it. On the old main these were FAIL (exit 1), or an environment PASS
under another Python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rbcli import rb

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.judge import ExperimentVerdict, Verdict
from reprobridge.audit.nixcalls import machine_cause
from reprobridge.audit.verdicts import overall_verdict
from reprobridge.audit.verify import verify_audit
from reprobridge.errors import EXIT_MACHINE, CommandFailed, MachineError
from reprobridge.initializer import init_repository


def _edit(root: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the manifest, render the artifacts from it again (an
    audit refuses stale ones), and commit."""
    manifest = root / "reprobridge.toml"
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new, 1))
    init_repository(root, lock="never")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "edit"], check=True)


def _audit_cli(
    root: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    out = rb(
        "audit",
        "--runs",
        "1",
        "--backend",
        "host",
        "--json",
        "-q",
        "-C",
        str(root),
        *extra,
        env=env,
    )
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def _without_python(version: str, tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with no Python ``version``: PATH without a
    ``python<version>``, and empty pyenv and uv install directories (where
    :func:`reprobridge._machine.interpreter_candidates` also looks)."""
    path = os.environ.get("PATH", "")
    kept = [d for d in path.split(":") if d and not (Path(d) / f"python{version}").exists()]
    (tmp_path / "none").mkdir()
    return {
        "PATH": ":".join(kept),
        "PYENV_ROOT": str(tmp_path / "none"),
        "UV_PYTHON_INSTALL_DIR": str(tmp_path / "none"),
    }


def test_a_gpu_experiment_on_a_machine_without_gpu_is_not_judged(
    tiny_repo: Callable[..., Path],
) -> None:
    """This machine has no GPU (NVML): the old main sealed the run as a procedure failure
    and the audit FAILed with exit 1."""
    root = tiny_repo("echo acc=0.9\n", timeout="1h")
    _edit(root, 'timeout = "1h"', 'timeout = "1h"\nhardware = {gpus = 1}')
    code, summary = _audit_cli(root)
    assert code == EXIT_MACHINE == MachineError.exit_code == 11, summary
    assert summary["verdict"] == "NOT JUDGED" and summary["passed"] is False
    levels = summary["experiments"]["main"]
    assert levels["procedure"]["status"] == "not-judged"
    assert levels["procedure"]["reason"].startswith("hw-unavailable: needs 1 GPU(s)")
    assert levels["metric"]["status"] == "skipped"
    assert summary["incomplete"] == [f"main: procedure not-judged: {levels['procedure']['reason']}"]
    bundle = Path(summary["path"])
    status = json.loads((bundle / "runs/main/0/status.json").read_text())
    assert status["record"]["not_started"]["machine"] is True
    again = verify_audit(bundle)
    assert again.ok and again.verdict == "NOT JUDGED", again.problems
    # The terminal, rb verify and the report say it, never FAIL.
    human = rb("audit", "--runs", "1", "--backend", "host", "-q", "-C", str(root))
    assert human.returncode == 11
    assert "verdict: NOT JUDGED" in human.stdout and "FAIL" not in human.stdout
    verified = rb("verify", str(bundle))
    assert verified.returncode == 0 and "re-derived verdict: NOT JUDGED" in verified.stdout
    report = rb("report", str(bundle), "-o", "-", "--format", "md", "-C", str(root))
    assert report.returncode == 0, report.stderr
    assert "NOT JUDGED" in report.stdout and "FAIL" not in report.stdout
    html = rb("report", str(bundle), "-o", "-", "-C", str(root))
    assert 'class="banner not-judged"' in html.stdout
    assert "not judged at procedure (this machine)" in html.stdout


def test_a_python_the_host_lacks_is_not_an_environment_pass(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    """The manifest asks for Python 3.8; this machine has only its own (3.11): the old main
    warned and passed the environment."""
    root = tiny_repo("echo acc=0.9\n")
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert mine != "3.8"
    _edit(root, f'python = "{mine}"', 'python = "3.8"')
    machine = _without_python("3.8", tmp_path)
    code, summary = _audit_cli(root, env=machine)
    assert code == 11, summary
    assert summary["verdict"] == "NOT JUDGED"
    env = summary["experiments"]["main"]["environment"]
    assert env["status"] == "not-judged"
    assert f"the manifest asks for Python 3.8; this machine has {mine} only" in env["reason"]
    assert "--python-mismatch-ok" in env["reason"]
    assert summary["experiments"]["main"]["procedure"]["status"] == "skipped"
    assert verify_audit(Path(summary["path"])).verdict == "NOT JUDGED"

    # With the operator's leave the runs are judged under rb's Python, and the verdict says so.
    code, summary = _audit_cli(root, "--python-mismatch-ok", env=machine)
    env = summary["experiments"]["main"]["environment"]
    assert (code, summary["verdict"]) == (20, "INCOMPLETE"), summary
    assert env["status"] == "incomplete"
    assert f"runs use {mine} (--python-mismatch-ok)" in env["reason"]
    assert summary["experiments"]["main"]["procedure"]["status"] == "pass"
    again = verify_audit(Path(summary["path"]))
    assert again.ok and again.verdict == "INCOMPLETE", again.problems


def test_nix_missing_seals_a_not_judged_bundle(tiny_repo: Callable[..., Path]) -> None:
    """``--backend nix`` where that nix does not exist: the old main raised after the bundle
    was created, leaving an unfinished bundle behind."""
    root = tiny_repo("echo acc=0.9\n")
    result = run_audit(
        root, AuditOptions(runs=1, backend="nix", nix_binary=str(root / "no-such-nix"))
    )
    env = result.summary["experiments"]["main"]["environment"]
    assert result.verdict == "NOT JUDGED", result.summary
    assert env["status"] == "not-judged" and "no-such-nix is not installed" in env["reason"]
    assert verify_audit(result.path).ok


def test_machine_cause_tells_the_network_and_an_old_nix_from_the_pin() -> None:
    def failed(stderr: str) -> CommandFailed:
        return CommandFailed("nix failed", returncode=1, stderr_tail=stderr)

    offline = failed("error: unable to download 'https://x': Couldn't resolve host name (6)")
    assert machine_cause(offline, (2, 26)) == "no network to fetch the pinned inputs"
    # A server's answer is about the pin: a pinned URL that is gone is the paper's problem.
    gone = failed("error: unable to download 'https://x': HTTP error 404")
    assert machine_cause(gone, (2, 26)) is None
    assert "nix 2.8 is older than 2.18" in str(machine_cause(gone, (2, 8)))
    assert machine_cause(failed("error: attribute 'foo' missing"), None) is None


def test_not_judged_is_below_fail_and_above_incomplete() -> None:
    ok = Verdict("pass", "")
    exp = ExperimentVerdict("e", ok, ok, ok, {}, 1)
    skipped = Verdict("skipped", "not run")
    machine = replace(exp, environment=Verdict("not-judged", "no nix"), procedure=skipped)
    got = overall_verdict({"e": machine}, [])
    # The skipped levels it caused are not listed again.
    assert (got.verdict, got.incomplete) == ("NOT JUDGED", ["e: environment not-judged: no nix"])
    assert not got.passed
    gap = replace(exp, metric=Verdict("incomplete", "no threshold"))
    assert overall_verdict({"e": machine, "g": gap}, []).verdict == "NOT JUDGED"
    # What was judged and failed is the paper's FAIL, whatever else this machine lacked.
    failed = replace(exp, metric=Verdict("fail", "out of band"))
    assert overall_verdict({"e": machine, "f": failed}, []).verdict == "FAIL"
