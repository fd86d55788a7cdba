"""CPU time of a sandboxed run is the workload's, not bubblewrap's (issue 10 / issue 14):
bubblewrap exits without reaping the sandbox's init, so wait4 alone sees ~3 ms."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from reprobridge import sandbox
from reprobridge._proc.monitored import Completed, StreamCapture, Termination
from reprobridge.audit import limits
from reprobridge.audit.executors import CpuTime, LocalExecutor, RunRequest, workload_cpu
from reprobridge.audit.monitor import Peaks
from reprobridge.evidence.redact import Redactor

_WHY = sandbox.sandbox_unusable() if sandbox.bwrap_path() else "bwrap is not installed"
#: Whether this process may make a CPU-accounting cgroup (usually: root).
_CGROUP = limits._make_group(limits._cpu_parent(), "probe", None)
if _CGROUP is not None:
    _CGROUP.rmdir()
needs_sandbox = pytest.mark.skipif(_WHY is not None, reason=f"sandbox unusable: {_WHY}")

#: ~0.5 s of CPU in a child of a child (bash -> python), so the time reaches the tree's
#: top only through the reaping parents' cutime.
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"


def _request(tmp_path: Path, argv: tuple[str, ...], interval: float) -> RunRequest:
    workspace = tmp_path / "work" / "repo"
    workspace.mkdir(parents=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Unique per test: the end-of-run sweep kills every process carrying the marker, and
    # xdist runs other tests of this file at the same time.
    marker = f"cpu-test-{uuid.uuid4().hex}"
    return RunRequest(
        argv=argv,
        workspace=workspace,
        env={"PATH": "/usr/bin:/bin", "RB_RUN_MARKER": marker, "HOME": str(workspace)},
        run_dir=run_dir,
        timeout_s=60,
        marker=marker,
        redactor=Redactor([]),
        stop_event=threading.Event(),
        stop_reason=lambda: "test",
        sample_interval=interval,
    )


@needs_sandbox
@pytest.mark.parametrize("interval", [0.5, 0.05])
def test_sandboxed_busy_loop_records_its_cpu_time(tmp_path: Path, interval: float) -> None:
    # Debian's python3 under /usr, which the sandbox binds (the test's venv is not bound).
    argv = ("bash", "-c", 'python3 -c "$0"; true', BURN)
    out = LocalExecutor().execute(_request(tmp_path, argv, interval))
    assert out.isolation == "bubblewrap"
    assert out.completed.termination.kind == "exit", out.completed.termination
    assert out.completed.termination.returncode == 0
    waited = out.completed.cpu_user_s + out.completed.cpu_sys_s
    cpu = workload_cpu(out.completed, out.peaks, out.cgroup_cpu)
    # wait4 alone sees bubblewrap; the sampled tree sees the loop.
    assert cpu.user_s + cpu.sys_s >= 0.3, (waited, out.peaks)
    assert cpu.source == ("cgroup" if _CGROUP else "sampled")
    sampled = workload_cpu(out.completed, out.peaks)  # without the cgroup's account
    assert sampled.source == "sampled" and sampled.user_s + sampled.sys_s >= 0.3
    assert cpu.user_s + cpu.sys_s <= out.completed.wall_s * 2  # no double counting
    # The account snapshots every 0.1 s; the timeline still gets a line per interval.
    assert out.peaks is not None
    lines = (tmp_path / "run" / "timeline.jsonl").read_text().splitlines()
    # (the sampler stops a little after the run: the logs are drained first)
    assert len(lines) == out.peaks.samples <= (out.completed.wall_s + 0.5) / interval + 2


@needs_sandbox
def test_children_that_have_exited_still_count(tmp_path: Path) -> None:
    # Two 0.3 s burners one after the other: at no moment is more than one alive, so only
    # the reaped children's time (cutime of the bash that waited for them) sums them.
    burn = BURN.replace("0.5", "0.3")
    argv = ("bash", "-c", 'python3 -c "$0"; python3 -c "$0"; sleep 0.3', burn)
    out = LocalExecutor().execute(_request(tmp_path, argv, 0.5))
    assert out.completed.termination.returncode == 0
    cpu = workload_cpu(out.completed, out.peaks, out.cgroup_cpu)
    assert cpu.user_s + cpu.sys_s >= 0.5, out.peaks


def _completed(user: float, system: float) -> Completed:
    capture = StreamCapture(Path("/dev/null"), 0, 0, "", False)
    return Completed(
        argv=("x",),
        termination=Termination("exit", 0, None, "exit(0)"),
        stdout=capture,
        stderr=capture,
        wall_s=1.0,
        cpu_user_s=user,
        cpu_sys_s=system,
        started_at="",
        finished_at="",
        pid=1,
        survivors_killed=0,
    )


def test_workload_cpu_keeps_the_larger_lower_bound() -> None:
    peaks = Peaks(3, 100.0, 1, 1, 1, cpu_user_s=0.4, cpu_sys_s=0.1)
    assert workload_cpu(_completed(0.003, 0.0), peaks).source == "sampled"
    assert workload_cpu(_completed(0.003, 0.0), peaks).user_s == 0.4
    # Unsandboxed, wait4 counts everything the child waited for: it wins when larger.
    waited = workload_cpu(_completed(0.6, 0.05), peaks)
    assert (waited.user_s, waited.sys_s, waited.source) == (0.6, 0.05, "rusage")
    assert workload_cpu(_completed(0.2, 0.0), None).source == "rusage"


@needs_sandbox
@pytest.mark.skipif(_CGROUP is None, reason="no writable cpuacct/cgroup v2 group here")
def test_the_cgroup_accounts_the_whole_sandboxed_run(tmp_path: Path) -> None:
    # Issue 14: the kernel's account of the run's cgroup has the workload's CPU to its last
    # instruction (the sampler misses what runs after its last snapshot), bwrap included.
    argv = ("bash", "-c", 'python3 -c "$0"', BURN)
    out = LocalExecutor().execute(_request(tmp_path, argv, 0.5))
    assert out.completed.termination.returncode == 0
    assert out.cgroup_cpu is not None and out.cgroup_cpu.source == "cgroup"
    total = out.cgroup_cpu.user_s + out.cgroup_cpu.sys_s
    assert 0.5 <= total <= out.completed.wall_s * 2 + 0.1
    assert workload_cpu(out.completed, out.peaks, out.cgroup_cpu) == out.cgroup_cpu


def test_group_cpu_reads_v2_and_v1_files(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 750000\nuser_usec 500000\nsystem_usec 250000\n")
    assert limits._group_cpu(v2) == (0.5, 0.25)
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpuacct.usage_user").write_text("1500000000\n")
    (v1 / "cpuacct.usage_sys").write_text("500000000\n")
    assert limits._group_cpu(v1) == (1.5, 0.5)
    ticks = tmp_path / "ticks"
    ticks.mkdir()
    hz = os.sysconf("SC_CLK_TCK")
    (ticks / "cpuacct.stat").write_text(f"user {2 * hz}\nsystem {hz}\n")
    assert limits._group_cpu(ticks) == (2.0, 1.0)
    assert limits._group_cpu(tmp_path / "missing") is None


def test_no_cgroup_hierarchy_means_no_join_and_no_account(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(limits, "CGROUP_ROOT", tmp_path / "none")
    with limits.run_cgroups(64) as groups:
        assert groups.join == []
    assert groups.cpu is None


def test_workload_cpu_prefers_the_cgroup_account() -> None:
    peaks = Peaks(3, 100.0, 1, 1, 1, cpu_user_s=0.4, cpu_sys_s=0.1)
    cgroup = CpuTime(0.45, 0.1, "cgroup")
    assert workload_cpu(_completed(0.003, 0.0), peaks, cgroup) == cgroup
