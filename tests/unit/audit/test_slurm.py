"""`rb audit --executor slurm` against a real one-node Slurm (tools/slurm-up.sh; .ci/run starts
it). Only the #SBATCH formatting tests run without the daemons."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobridge.audit.slurm import (
    JobResources,
    SlurmOptions,
    batch_header,
    parse_slurm_opts,
    slurm_available,
)
from reprobridge.errors import AuditError

_OK, _WHY = slurm_available()


# One cluster for all: the tests fill its node and watch its queue, so they share a worker.
def needs_slurm(test):  # type: ignore[no-untyped-def]
    skip = pytest.mark.skipif(not _OK, reason=f"slurm: {_WHY}")
    return pytest.mark.xdist_group("slurm")(skip(test))


# -- formatting (no daemons) -----------------------------------------------------------------


def test_header_maps_the_manifest_hardware_and_the_operator_flags() -> None:
    lines = batch_header(
        "rb-x-main-1",
        JobResources(gpus=2, cpus=8, memory_gb=31.5, time_s=600, grace_s=30),
        SlurmOptions(partition="gpu", account="lab", qos="high", extra=(("constraint", "a100"),)),
        Path("/shared/out-%j.txt"),
    )
    assert lines == [
        "#SBATCH --job-name=rb-x-main-1",
        "#SBATCH --output=/shared/out-%j.txt",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --time=13",  # (600 + 30 + 120) / 60, rounded up
        "#SBATCH --signal=B:TERM@60",
        "#SBATCH --export=NONE",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32256M",
        "#SBATCH --gres=gpu:2",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=lab",
        "#SBATCH --qos=high",
        "#SBATCH --constraint=a100",
    ]


def test_header_without_hardware_asks_for_none() -> None:
    lines = batch_header("n", JobResources(), SlurmOptions(), Path("/o"))
    assert not any(("gres" in x or "--mem" in x or "cpus-per" in x) for x in lines)


@pytest.mark.parametrize("bad", ["noequals", "=x", "a b=c", "k=v\nx"])
def test_malformed_slurm_opt_is_a_one_line_error(bad: str) -> None:
    with pytest.raises(AuditError, match="KEY=VALUE"):
        parse_slurm_opts([bad])


def test_slurm_opt_accepts_leading_dashes() -> None:
    assert parse_slurm_opts(["--constraint=a100", "exclusive="]) == (
        ("constraint", "a100"),
        ("exclusive", ""),
    )


# -- the real engine -----------------------------------------------------------------------------


def _audit_argv(root: Path, *args: str) -> list[str]:
    """`rb audit` of ``root`` on the Slurm executor, one run, host backend."""
    return [
        sys.executable,
        "-m",
        "reprobridge",
        "audit",
        "-C",
        str(root),
        "--runs",
        "1",
        "--backend",
        "host",
        "--executor",
        "slurm",
        *args,
    ]


def _audit(root: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _audit_argv(root, *args),
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 240),  # type: ignore[arg-type]
        env=_env(),
        check=False,
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])
    return env


def _records(root: Path) -> list[dict[str, object]]:
    out = []
    for status in sorted((root / "repro/evidence").glob("*/runs/*/*/status.json")):
        out.append(json.loads(status.read_text())["record"])
    return out


def _job_state(job_id: str) -> str:
    """The job's state while the controller lists it in the queue, else ""."""
    proc = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def _wait_for_job_id(root: Path) -> str:
    """The id of the job this repository's audit submitted (from its job.json): other
    audits may share the cluster, so names in the queue prove nothing."""
    found: list[str] = []

    def submitted() -> bool:
        for path in (root / "repro/evidence/.slurm").rglob("job.json"):
            job_id = json.loads(path.read_text()).get("job_id")
            if job_id:
                found.append(job_id)
                return True
        return False

    _wait_for(submitted, 120)
    return found[0]


@needs_slurm
def test_passing_audit_runs_as_a_job_and_verifies(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9\n")
    proc = _audit(root)
    assert proc.returncode == 0, proc.stderr
    assert "submitted as Slurm job" in proc.stderr
    (record,) = _records(root)
    assert record["executor"] == "slurm"
    placement = record["placement"]
    assert isinstance(placement, dict)
    assert placement["job_id"] and placement["node"] and placement["state"] == "COMPLETED"
    run_dir = next((root / "repro/evidence").glob("*/runs/main/*"))
    node = json.loads((run_dir / "node.json").read_text())
    assert node["node"] == placement["node"]
    assert "acc=0.9" in (run_dir / "stdout.log").read_text()
    verify = subprocess.run(
        [sys.executable, "-m", "reprobridge", "verify", str(run_dir.parents[2])],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


@needs_slurm
def test_failing_run_is_the_runs_own_failure_not_resubmitted(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9; exit 3\n")
    proc = _audit(root)
    assert proc.returncode != 0
    (record,) = _records(root)
    assert record["termination"]["description"] == "exit(3)"  # type: ignore[index]
    assert len(record["placement"]["attempts"]) == 1  # type: ignore[index]


@needs_slurm
def test_unschedulable_request_is_reported_at_once(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9\n")
    manifest = root / "reprobridge.toml"
    manifest.write_text(manifest.read_text() + "[experiments.main.hardware]\ngpus = 4\n")
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "gpus"], check=True)
    t0 = time.monotonic()
    proc = _audit(root, timeout=60)
    assert time.monotonic() - t0 < 45
    assert proc.returncode != 0
    (record,) = _records(root)
    term = record["termination"]
    assert term["kind"] == "scheduler"  # type: ignore[index]
    assert "slurm: not scheduled" in term["description"]  # type: ignore[index]
    assert "not scheduled" in proc.stdout + proc.stderr


@needs_slurm
@pytest.mark.slow
def test_job_stopped_at_its_slurm_time_limit_is_a_timeout(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9; sleep 600\n", timeout="20m")
    # A one-minute limit: Slurm TERMs the batch step ahead of it (--signal), the node side
    # stops the run with its grace period and still writes the evidence.
    proc = _audit(root, "--slurm-opt", "time=1", timeout=240)
    assert proc.returncode != 0
    (record,) = _records(root)
    term = record["termination"]
    assert term["kind"] == "timeout", term  # type: ignore[index]
    assert "slurm" in term["description"]  # type: ignore[index]


def _wait_for(pred, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError("condition not reached")


@needs_slurm
def test_ctrl_c_while_queued_cancels_the_job_and_leaves_a_resumable_bundle(
    tiny_repo, tmp_path: Path
) -> None:
    root = tiny_repo("echo acc=0.9\n")
    # Fill the node so the audit's job stays PENDING.
    blocker = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--exclusive",
            "-o",
            str(tmp_path / "b.out"),
            "--job-name=rbtest-blocker",
            "--wrap",
            "sleep 300",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        _wait_for(lambda: _job_state(blocker) == "RUNNING")
        proc = subprocess.Popen(
            _audit_argv(root),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        job_id = _wait_for_job_id(root)
        _wait_for(lambda: _job_state(job_id) == "PENDING")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        _wait_for(lambda: _job_state(job_id) in {"", "CANCELLED"}, 30)
    finally:
        subprocess.run(["scancel", blocker], check=False)
    _wait_for(lambda: _job_state(blocker) in {"", "CANCELLED"}, 30)
    resumed = _audit(root, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    (record,) = _records(root)
    assert record["placement"]["state"] == "COMPLETED"  # type: ignore[index]


@needs_slurm
def test_resume_after_sigkill_collects_the_running_job_by_id(tiny_repo) -> None:
    root = tiny_repo("sleep 6; echo acc=0.9\n")
    proc = subprocess.Popen(
        _audit_argv(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    job_id = _wait_for_job_id(root)
    proc.kill()
    proc.wait()
    resumed = _audit(root, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"found Slurm job {job_id}" in resumed.stderr
    (record,) = _records(root)
    assert record["placement"]["job_id"] == job_id  # type: ignore[index]
    assert len(record["placement"]["attempts"]) == 1  # type: ignore[index]


def test_the_node_result_round_trips_every_field_of_a_completed_run(tmp_path: Path) -> None:
    """The node writes result.json with one rb and the auditor reads it: a field added to
    Completed (the combined stream was one) must survive, with paths moved to the run dir."""
    import dataclasses

    from reprobridge._proc.monitored import Completed, StreamCapture, Termination
    from reprobridge.audit.slurm import completed_from_json, completed_to_json

    def cap(name: str) -> StreamCapture:
        return StreamCapture(Path("/node/out") / name, 10, 10, "ab" * 32, False)

    done = Completed(
        argv=("bash", "x.sh"),
        termination=Termination("exit", 3, None, "exit(3)"),
        stdout=cap("stdout.log"),
        stderr=cap("stderr.log"),
        wall_s=1.5,
        cpu_user_s=0.5,
        cpu_sys_s=0.1,
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:00:01Z",
        pid=42,
        survivors_killed=0,
        combined=cap("output.log"),
    )
    back = completed_from_json(json.loads(json.dumps(completed_to_json(done))), tmp_path)
    for f in dataclasses.fields(Completed):
        got, want = getattr(back, f.name), getattr(done, f.name)
        if isinstance(want, StreamCapture):
            assert got == dataclasses.replace(want, path=tmp_path / want.path.name), f.name
        else:
            assert got == want, f.name
