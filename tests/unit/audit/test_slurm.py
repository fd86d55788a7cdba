"""`rb audit --executor slurm` against a real one-node Slurm (tools/slurm-up.sh; .ci/run starts
it). Only the #SBATCH formatting tests run without the daemons."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.slurm_overhead import audit_argv
from reprobridge.audit.slurm import (
    INFRA_STATES,
    JobResources,
    SlurmOptions,
    batch_header,
    job_script,
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
        "#SBATCH --no-requeue",
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


def test_job_script_runs_the_spec_of_its_array_task(tmp_path: Path) -> None:
    script = job_script(["#SBATCH --nodes=1"], [tmp_path / "a b/spec.json", tmp_path / "c.json"])
    lines = script.splitlines()
    assert lines[:2] == ["#!/bin/bash", "#SBATCH --nodes=1"]
    assert f"  '{tmp_path}/a b/spec.json'" in lines  # quoted: paths reach bash
    assert lines[-1].endswith(
        '-m reprobridge.audit.slurm_job "${specs[${SLURM_ARRAY_TASK_ID:-0}]}"'
    )
    # Task i runs spec i, as bash reads it.
    shown = subprocess.run(
        ["bash", "-c", script.split("exec ")[0] + 'printf "%s\\n" "${specs[1]}"'],
        capture_output=True,
        text=True,
        check=True,
        env={**_env(), "SLURM_ARRAY_TASK_ID": "1"},
    ).stdout
    assert shown == f"{tmp_path}/c.json\n"
    # A plain job (one run: no array) has no task id and runs the first spec.
    env = {k: v for k, v in _env().items() if k != "SLURM_ARRAY_TASK_ID"}
    first = subprocess.run(
        [
            "bash",
            "-c",
            script.split("exec ")[0] + 'printf "%s" "${specs[${SLURM_ARRAY_TASK_ID:-0}]}"',
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert first == f"{tmp_path}/a b/spec.json"


@pytest.mark.parametrize("flag", [["--jobs", "2"], ["--detach"], ["--attach", "x"]])
def test_slurm_only_flags_are_refused_for_the_local_executor(tiny_repo, flag: list[str]) -> None:
    root = tiny_repo()
    argv = [sys.executable, "-m", "reprobridge", "audit", "-C", str(root), *flag]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), check=False)
    assert proc.returncode == 2
    assert "needs --executor slurm" in proc.stderr
    assert not (root / "repro/evidence").exists() or not any(
        p for p in (root / "repro/evidence").iterdir() if not p.name.startswith(".")
    )


# -- the real engine -----------------------------------------------------------------------------


def _audit(root: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        audit_argv(root, *args),
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 360),  # type: ignore[arg-type]
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


@needs_slurm
def test_passing_audit_runs_as_a_job_and_verifies(tiny_repo) -> None:
    root = tiny_repo("echo acc=0.9\n")
    proc = _audit(root)
    assert proc.returncode == 0, proc.stderr
    assert "submitted as Slurm job" in proc.stderr
    assert "slurm: 0 queued, 0 running, 1 finished of 1" in proc.stderr
    (record,) = _records(root)
    assert record["executor"] == "slurm"
    placement = record["placement"]
    assert isinstance(placement, dict)
    assert placement["job_id"] and placement["node"] and placement["state"] == "COMPLETED"
    assert "_" not in placement["job_id"]  # one run: a plain job, not an array of one
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


@contextlib.contextmanager
def _audit_process(root: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`rb audit` running in the background; stopped (TERM: it cancels its jobs by id) if
    the test leaves it running, so a failed test leaks no auditor and no queued jobs."""
    proc = subprocess.Popen(
        audit_argv(root, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


#: How long a test waits for the shared test cluster to start a job (other tests' jobs
#: may hold its cores).
_START_S = 300.0


def _fill_node(tmp_path: Path) -> str:
    """A job that takes the whole node, so the audit's jobs stay PENDING; its id."""
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
    _wait_for(lambda: _job_state(blocker) == "RUNNING", _START_S)
    return blocker


def _job_ids(root: Path, n: int) -> list[str]:
    """The ids of the ``n`` jobs this repository's audit submitted (from its job.json files:
    other audits may share the cluster, so names in the queue prove nothing)."""
    found: list[str] = []

    def submitted() -> bool:
        found[:] = sorted(
            job_id
            for path in (root / "repro/evidence/.slurm").rglob("job.json")
            if (job_id := json.loads(path.read_text()).get("job_id"))
        )
        return len(found) == n

    _wait_for(submitted, 120)
    return found


@needs_slurm
def test_ctrl_c_while_an_array_is_queued_cancels_every_job_and_leaves_a_resumable_bundle(
    tiny_repo, tmp_path: Path
) -> None:
    root = tiny_repo("echo acc=0.9\n")
    blocker = _fill_node(tmp_path)
    try:
        with _audit_process(root, "--runs", "3", "--jobs", "2") as proc:
            job_ids = _job_ids(root, 3)
            _ctrl_c_while_queued(root, proc, job_ids, blocker)
    finally:
        subprocess.run(["scancel", blocker], check=False)
    _wait_for(lambda: _job_state(blocker) in {"", "CANCELLED"}, 30)
    resumed = _audit(root, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    records = _records(root)
    assert [r["placement"]["state"] for r in records] == ["COMPLETED"] * 3  # type: ignore[index]
    # Run again under new ids: a cancelled job is never "collected".
    assert not {r["placement"]["job_id"] for r in records} & set(job_ids)  # type: ignore[index]


def _ctrl_c_while_queued(
    root: Path, proc: subprocess.Popen[str], job_ids: list[str], blocker: str
) -> None:
    # One array: the three runs are its tasks 0, 1, 2.
    arrays = {j.partition("_")[0] for j in job_ids}
    assert len(arrays) == 1 and [j.partition("_")[2] for j in job_ids] == ["0", "1", "2"]
    _wait_for(lambda: all(_job_state(j) == "PENDING" for j in job_ids))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    # Every task cancelled (gone from the queue), not only the first; the blocker, another
    # job on the same cluster, untouched.
    _wait_for(lambda: all(_job_state(j) in {"", "CANCELLED"} for j in job_ids), 30)
    assert _job_state(blocker) == "RUNNING"
    assert not _records(root)  # nothing ran: nothing sealed


@needs_slurm
def test_ctrl_c_while_an_array_runs_stops_every_task_and_seals_nothing(tiny_repo) -> None:
    # The script goes on after its command is killed: a run the signal reached must still
    # be recorded as stopped, not as a run that exited 0 (it was sealed "ok" when scancel
    # signalled the run but not the node side).
    root = tiny_repo("echo started; sleep 300; echo acc=0.9\n")
    with _audit_process(root, "--runs", "2") as proc:
        job_ids = _job_ids(root, 2)
        _wait_for(lambda: all(_job_state(j) == "RUNNING" for j in job_ids), _START_S)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    # Stopped (within the run's grace period and the hard cancel after it), not run out.
    assert time.monotonic() - t0 < 150, err
    assert all(_job_state(j) in {"", "CANCELLED", "COMPLETED"} for j in job_ids)
    ends = [
        json.loads(p.read_text())["completed"]["termination"]
        for p in (root / "repro/evidence/.slurm").rglob("result.json")
    ]
    assert all(t["kind"] == "interrupted" for t in ends), ends
    assert not _records(root), err  # interrupted runs are left for --resume, unsealed


@needs_slurm
def test_detach_submits_an_array_and_attach_collects_it_later(tiny_repo) -> None:
    root = tiny_repo("sleep 2; echo acc=0.9\n")
    t0 = time.monotonic()
    detached = _audit(root, "--runs", "3", "--jobs", "2", "--detach")
    assert detached.returncode == 0, detached.stderr
    assert "detached: 3 run(s)" in detached.stdout
    audit_id = next(p.name for p in (root / "repro/evidence").iterdir() if p.name[0] != ".")
    assert f"rb audit --attach {audit_id}" in detached.stdout
    job_ids = _job_ids(root, 3)
    array = job_ids[0].partition("_")[0]
    # The runs were submitted, not waited for (each sleeps; the array is throttled to 2).
    assert _records(root) == []
    show = subprocess.run(
        ["scontrol", "show", "job", "-o", array], capture_output=True, text=True, check=False
    ).stdout
    assert "ArrayTaskThrottle=2" in show, show
    assert time.monotonic() - t0 < 60
    attached = _audit(root, "--attach", audit_id)
    assert attached.returncode == 0, attached.stderr
    for job_id in job_ids:
        assert f"found Slurm job {job_id}" in attached.stderr
    # Progress: counts while waiting, plain lines on a pipe.
    assert "0 queued, 0 running, 3 finished of 3" in attached.stderr
    records = _records(root)
    firsts = sorted(r["placement"]["attempts"][0]["job_id"] for r in records)  # type: ignore[index]
    assert firsts == job_ids
    for record in records:
        _assert_collected(record["placement"]["attempts"], record)  # type: ignore[index]


def _node_ready() -> bool:
    """The one node takes work again: idle or mixed/allocated, not down, drained or
    responding late (a node resumed by the previous test can lag for seconds)."""
    proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, check=False)
    states = proc.stdout.split()
    return bool(states) and all(s in {"idle", "mix", "alloc"} for s in states)


def _set_node(state: str) -> None:
    node = subprocess.run(
        ["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", f"state={state}", "reason=rbtest"],
        capture_output=True,
        check=False,
    )


@needs_slurm
def test_a_run_the_node_lost_is_resubmitted_and_both_attempts_are_recorded(tiny_repo) -> None:
    # Long enough that the node goes down under it; the second attempt runs it out.
    root = tiny_repo("sleep 15; echo acc=0.9\n")
    with _audit_process(root) as proc:
        try:
            (job_id,) = _job_ids(root, 1)
            _wait_for(lambda: _job_state(job_id) == "RUNNING", _START_S)
            _set_node("down")  # Slurm ends the job NODE_FAIL (and TERMs it on the node)
            _wait_for(lambda: _job_state(job_id) == "", 30)
        finally:
            _set_node("resume")
        _, err = proc.communicate(timeout=_START_S)
        # the next test submits to this node: leave it taking work again
        _wait_for(_node_ready, _START_S)
    assert proc.returncode == 0, err
    assert "ended NODE_FAIL; resubmitting" in err
    (record,) = _records(root)
    attempts = record["placement"]["attempts"]  # type: ignore[index]
    assert [a["state"] for a in attempts] == ["NODE_FAIL", "COMPLETED"]
    assert attempts[0]["job_id"] == job_id != attempts[1]["job_id"]
    assert record["termination"]["description"] == "exit(0)"  # type: ignore[index]


@needs_slurm
def test_resume_after_sigkill_collects_the_running_job_by_id(tiny_repo) -> None:
    root = tiny_repo("sleep 6; echo acc=0.9\n")
    # A node the node-down test resumed can lag; a job lost to it before the resume looks
    # is resubmitted, not found (CI once saw job 15 lost, job 17 run, no "found").
    _wait_for(_node_ready, _START_S)
    proc = subprocess.Popen(
        audit_argv(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    (job_id,) = _job_ids(root, 1)
    proc.kill()
    proc.wait()
    # Without --executor slurm: a bundle whose runs were submitted resumes on Slurm, never
    # runs them again here.
    argv = [sys.executable, "-m", "reprobridge", "audit", "-C", str(root), "--resume"]
    resumed = subprocess.run(
        [*argv, "--backend", "host"], capture_output=True, text=True, env=_env(), timeout=240
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"found Slurm job {job_id}" in resumed.stderr
    (record,) = _records(root)
    attempts = record["placement"]["attempts"]  # type: ignore[index]
    # The job found by id is the first attempt, collected, not run again. Under a loaded CI
    # the one node can stop responding right after the node-down test resumed it: the job
    # then ends NODE_FAIL and is resubmitted, which is the executor doing its job (seen
    # once: job 14 found, NODE_FAIL, collected as 16). Anything else is a failure.
    assert attempts[0]["job_id"] == job_id
    _assert_collected(attempts, record)


def _assert_collected(attempts: list[dict[str, str]], record: dict[str, object]) -> None:
    """The run's last attempt completed and is the record's job; any attempt before it
    ended on an infrastructure state (a loaded CI's one node can stop answering: the job
    ends NODE_FAIL and is resubmitted, which is the executor doing its job; CI saw array
    task 11_2 found on --attach, lost, and collected as job 15). Anything else fails."""
    assert all(a["state"] in INFRA_STATES for a in attempts[:-1]), attempts
    assert attempts[-1]["state"] == "COMPLETED", attempts
    assert record["placement"]["job_id"] == attempts[-1]["job_id"]  # type: ignore[index]


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


@needs_slurm
@pytest.mark.slow
def test_the_overhead_benchmark_runs_and_profiles_every_phase() -> None:
    """benchmarks/slurm_overhead.py reads the files the executor writes (the job script,
    Slurm's output file, job.json): a renamed one must fail here, not in a benchmark run."""
    bench = Path(__file__).resolve().parents[3] / "benchmarks/slurm_overhead.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ratio rb/srun" in proc.stdout and "ratio rb/sbatch" in proc.stdout
    assert "run done -> noticed" in proc.stdout and "nan" not in proc.stdout
