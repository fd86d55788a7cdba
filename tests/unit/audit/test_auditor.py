"""`rb audit` end to end on the bundled example and on small hostile repositories (host
backend, real processes, real bubblewrap when it works here, real files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from example_outcome import assert_example_judged
from rbcli import rb

from reprobridge._machine import MIN_NIX
from reprobridge.audit import auditor, backends
from reprobridge.audit.auditor import AuditOptions, hardware_missing, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.errors import AuditError
from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository
from reprobridge.manifest.schema import Hardware, Manifest


def _commit(root: Path) -> None:
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "rb init"], check=True)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    repo = copy_example(tmp_path / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    _commit(repo)
    return repo


@pytest.mark.slow
def test_example_audit_passes_and_verifies(example: Path) -> None:
    result = run_audit(example, AuditOptions(runs=2, backend="host"))
    # Two seeds show mixup's gain on the means, not significantly (example_outcome).
    assert_example_judged(result.summary)
    s = result.summary
    for exp in ("baseline", "mixup"):
        v = s["experiments"][exp]
        assert (v["environment"]["status"], v["procedure"]["status"], v["metric"]["status"]) == (
            "pass",
        ) * 3
        assert v["per_metric"]["test_accuracy"]["stats"]["n"] == 2
    assert "paired t test" in s["claims"][0]["test"]
    assert s["hermetic"] is False
    bundle = result.path
    for rel in (
        "audit.json",
        "plan.json",
        "SHA256SUMS",
        "journal.jsonl",
        "inputs/reprobridge.toml",
        "fingerprint/host.json",
        "runs/baseline/0/stdout.log",
        "runs/baseline/0/status.json",
        "runs/mixup/1/metrics.json",
        "runs/mixup/1/timeline.jsonl",
    ):
        assert (bundle / rel).is_file(), rel
    report = verify_audit(bundle)
    assert report.ok, report.problems
    assert (report.passed, report.verdict) == (False, "INCOMPLETE")


def test_tampered_log_is_caught(example: Path) -> None:
    result = run_audit(example, AuditOptions(runs=1, backend="host", experiments=["baseline"]))
    log = result.path / "runs/baseline/0/stdout.log"
    log.write_text(log.read_text().replace("test_accuracy=", "test_accuracy=0.99 #"))
    report = verify_audit(result.path)
    assert not report.ok
    assert any("runs/baseline/0/stdout.log" in p for p in report.problems)


def test_failing_threshold_fails_metric_level(example: Path) -> None:
    manifest = example / "reprobridge.toml"
    manifest.write_text(
        manifest.read_text().replace(
            "target = 0.79\ntolerance = 0.171", "target = 0.99\ntolerance = 0.001", 1
        )
    )
    _commit(example)
    out = rb("audit", "baseline", "--runs", "1", "--backend", "host", "--json", cwd=example)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["experiments"]["baseline"]["procedure"]["status"] == "pass"
    assert doc["experiments"]["baseline"]["metric"]["status"] == "fail"


def test_secrets_never_reach_the_run_or_the_evidence(
    tiny_repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-" + "x9" * 12
    monkeypatch.setenv("FAKE_API_TOKEN", secret)
    root = tiny_repo(f'env; echo "token=$FAKE_API_TOKEN"; echo {secret}; echo acc=0.9\n')
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    for p in result.path.rglob("*"):
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p
    log = (result.path / "runs/main/0/stdout.log").read_text()
    assert "FAKE_API_TOKEN=" not in log  # `env` shows the run never got the variable
    assert "[REDACTED" in log  # the literal echo was redacted while streaming


def test_exit_zero_without_the_metric_fails(tiny_repo) -> None:
    root = tiny_repo("echo all good\n")
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert not result.passed
    assert result.summary["experiments"]["main"]["metric"]["status"] == "fail"


def test_timeout_kills_a_term_ignoring_run(tiny_repo) -> None:
    root = tiny_repo("trap '' TERM; echo acc=0.9; sleep 1000\n", timeout="1s")
    opts = AuditOptions(runs=1, backend="host", grace=1.0)
    import reprobridge.audit.auditor as auditor

    t0 = time.monotonic()
    old = auditor.TIMEOUT_MARGIN
    auditor.TIMEOUT_MARGIN = 1.0
    try:
        result = run_audit(root, opts)
    finally:
        auditor.TIMEOUT_MARGIN = old
    assert time.monotonic() - t0 < 60
    v = result.summary["experiments"]["main"]
    assert v["procedure"]["status"] == "fail"
    assert "124" in v["procedure"]["reason"] or "timeout" in v["procedure"]["reason"]


def test_second_audit_on_the_same_bundle_fails_fast(example: Path) -> None:
    from reprobridge.evidence.bundle import Bundle

    result = run_audit(example, AuditOptions(runs=1, backend="host", experiments=["baseline"]))
    bundle = Bundle.open(result.path)
    with bundle.lock():
        holder = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from reprobridge.evidence.bundle import Bundle;"
                f"b = Bundle.open(Path({str(result.path)!r}))\nwith b.lock(): pass",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    assert holder.returncode != 0
    assert "lock" in holder.stderr.lower()


@pytest.mark.slow
def test_interrupted_audit_resumes(example: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "reprobridge", "audit", "--runs", "3", "--backend", "host", "-q"],
        cwd=example,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    bundle_root = example / "repro/evidence"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sealed = list(bundle_root.glob("*/runs/*/*/status.json"))
        if sealed:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "resume" in err
    out = rb("audit", "--resume", "--backend", "host", "--json", cwd=example)
    assert out.returncode == 0, out.stderr  # three seeds: the paired test shows the claim
    doc = json.loads(out.stdout)
    assert_example_judged(doc)
    journal = [
        json.loads(x) for x in (Path(doc["path"]) / "journal.jsonl").read_text().splitlines()
    ]
    events = [j["event"] for j in journal]
    assert "interrupted" in events and "resumed" in events
    assert verify_audit(Path(doc["path"])).ok


def test_unknown_experiment(example: Path) -> None:
    with pytest.raises(AuditError, match=r"no experiment 'mixp' \(did you mean 'mixup'\?\)"):
        run_audit(example, AuditOptions(experiments=["mixp"], backend="host"))
    # On the command line it is a usage error: one line, exit 2, nothing written.
    out = rb("audit", "mixp", "--backend", "host", cwd=example)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0] == (
        "error: reprobridge.toml: no experiment 'mixp' (did you mean 'mixup'?)"
    )
    assert not (example / "repro" / "evidence").exists()


def test_gpu_experiment_on_a_cpu_machine_is_hw_unavailable(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9\n", timeout="1h")
    manifest = root / "reprobridge.toml"
    manifest.write_text(
        manifest.read_text().replace('timeout = "1h"', 'timeout = "1h"\nhardware = {gpus = 1}', 1)
    )
    _commit(root)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    v = result.summary["experiments"]["main"]
    assert not result.passed and result.verdict == "NOT JUDGED"
    assert v["procedure"]["status"] == "not-judged"
    assert "hw-unavailable: needs 1 GPU(s), this machine has 0" in v["procedure"]["reason"]


@pytest.mark.slow
def test_signed_audit_verifies_only_with_the_right_key(example: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    out = rb("keygen", str(keys / "rb.pem"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    other = rb("keygen", str(keys / "other.pem"), cwd=tmp_path)
    assert other.returncode == 0
    audit = rb(
        "audit",
        "baseline",
        "--runs",
        "1",
        "--backend",
        "host",
        "--sign",
        str(keys / "rb.pem"),
        "--json",
        cwd=example,
    )
    assert audit.returncode == 0, audit.stderr
    bundle = json.loads(audit.stdout)["path"]
    good = rb("verify", bundle, "--key", str(keys / "rb.pem.pub"), cwd=example)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "signature: valid" in good.stdout
    bad = rb("verify", bundle, "--key", str(keys / "other.pem.pub"), cwd=example)
    assert bad.returncode == 1
    inside = rb("keygen", str(example / "key.pem"), cwd=example)
    assert inside.returncode != 0 and "git" in inside.stderr


def test_two_identical_clones_audited_at_once_do_not_kill_each_others_runs(tiny_repo) -> None:
    """Same manifest and commit, started together: the same audit id. The run marker (what
    the end-of-run sweep kills by) must still differ, or the first run to end kills the other."""
    roots = [tiny_repo("sleep 3; echo acc=0.9\n") for _ in range(2)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reprobridge",
                "audit",
                "-C",
                str(r),
                "--runs",
                "1",
                "--backend",
                "host",
                "-q",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in roots
    ]
    outs = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs


def _gpus(*gb: float) -> dict[str, object]:
    """A gpu_fingerprint answer with GPUs of ``gb`` * 10^9 bytes (as NVML reports them)."""
    return {
        "state": "ok",
        "gpus": [{"index": i, "memory_bytes": int(g * 1e9)} for i, g in enumerate(gb)],
    }


def test_gpu_memory_counts_only_gpus_with_that_much() -> None:
    # A "16 GB" T4 reports 15360 MiB (16.1e9 bytes): it has 16 GB as GPUs are sold.
    assert hardware_missing(Hardware(gpus=1, gpu_memory_gb=16), _gpus(16.1)) is None
    assert hardware_missing(Hardware(gpus=2, gpu_memory_gb=40), _gpus(85.9, 42.9)) is None
    why = hardware_missing(Hardware(gpus=2, gpu_memory_gb=40), _gpus(85.9, 16.1))
    assert why == (
        "hw-unavailable: needs 2 GPU(s) with 40 GB each, this machine has 1 "
        "(of 2 GPU(s), the largest 85.9 GB; NVML: ok)"
    )
    assert hardware_missing(Hardware(gpus=1, gpu_memory_gb=80), {"state": "no-pynvml"}) == (
        "hw-unavailable: needs 1 GPU(s) with 80 GB each, this machine has 0 (of 0 GPU(s); "
        "NVML: no-pynvml)"
    )
    # Without gpu_memory_gb any GPU counts; without gpus nothing is needed.
    assert hardware_missing(Hardware(gpus=2), _gpus(16.1, 8.0)) is None
    assert hardware_missing(Hardware(gpu_memory_gb=80), _gpus()) is None


def test_gpu_memory_above_the_machines_is_hw_unavailable(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9\n", timeout="1h")
    manifest = root / "reprobridge.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'timeout = "1h"', 'timeout = "1h"\nhardware = {gpus = 1, gpu_memory_gb = 10000}', 1
        )
    )
    _commit(root)
    v = run_audit(root, AuditOptions(runs=1, backend="host")).summary["experiments"]["main"]
    assert v["procedure"]["status"] == "not-judged"
    assert "hw-unavailable: needs 1 GPU(s) with 10000 GB each" in v["procedure"]["reason"]


def test_auto_falls_back_to_the_host_naming_the_nix_minimum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warning says the Nix found and the minimum (``MIN_NIX``, the one place it is)."""
    monkeypatch.setattr(auditor, "nix_version", lambda _nix: (2, 8))
    monkeypatch.setattr(
        backends.HostBackend,
        "prepare",
        lambda self, root: backends.EnvironmentState("host", True, "", False),
    )
    manifest = Manifest.model_validate(
        {"project": {"name": "x"}, "environment": {"python": "3.11"}}
    )
    backend, state = auditor.choose_backend(AuditOptions(backend="auto"), manifest, tmp_path)
    assert backend.name == "host"
    assert state.warnings == [f"--backend auto chose the host: nix 2.8 < {MIN_NIX[0]}.{MIN_NIX[1]}"]
