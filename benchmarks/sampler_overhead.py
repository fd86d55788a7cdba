"""What the auditor's resource Sampler costs: a CPU-bound run bare vs. sampled at 10 Hz.

Usage: python benchmarks/sampler_overhead.py [--seconds 3] [--repeats 3] [--interval 0.1]

A pure-Python loop of a fixed number of iterations (calibrated to ``--seconds`` of CPU)
runs through :func:`reprobridge._proc.monitored.run_monitored`, alternately bare and with a
:class:`reprobridge.audit.monitor.Sampler` attached through ``on_start``. Printed per
repeat: the workload's CPU seconds (``wait4``), the sampler thread's own CPU seconds
(``time.thread_time`` inside it) and its share of a core over the run's wall time. Target:
**the sampler under 1% of a core**, and the sampled workload's CPU within noise of bare.

Then, in the same run, the per-sample cost of finding the run's processes: the Sampler's
``walk_tree`` (the run's own ``/proc/<pid>/task/*/children``) against
``psutil.Process.children(recursive=True)`` (every host process's parent), on a small tree
(bash + 3 children), with the host's process count, since psutil's cost follows it.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from reprobridge._proc.monitored import run_monitored
from reprobridge.audit.monitor import Peaks, Sampler, walk_tree

TARGET_CORE_PERCENT = 1.0
_LOOP = "n = {n}\nx = 0\nfor i in range(n):\n    x += i\n"


def calibrate(seconds: float) -> int:
    """Iterations of the workload loop that take about ``seconds`` of CPU here."""
    n = 2_000_000
    t = time.process_time()
    exec(_LOOP.format(n=n), {})
    per = (time.process_time() - t) / n
    return max(10_000, int(seconds / per))


def one_run(n: int, tmp: Path, interval: float | None) -> tuple[float, float, Peaks | None, float]:
    """(workload CPU s, wall s, sampler peaks or None, sampler start-up CPU s) of one run."""
    sampler: Sampler | None = None

    def attach(pid: int) -> None:
        nonlocal sampler
        if interval is not None:
            sampler = Sampler(pid, interval=interval, timeline_path=tmp / "timeline.jsonl")
            sampler.start()

    done = run_monitored(
        [sys.executable, "-c", _LOOP.format(n=n)],
        cwd=tmp,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout_path=tmp / "stdout.log",
        stderr_path=tmp / "stderr.log",
        timeout=None,
        on_start=attach,
    )
    peaks = sampler.stop() if sampler is not None else None
    startup = sampler.startup_cpu_s if sampler is not None else 0.0
    assert done.termination.kind == "exit", done.termination
    return done.cpu_user_s + done.cpu_sys_s, done.wall_s, peaks, startup


def tree_walk_costs(calls: int) -> tuple[float, float, int, int]:
    """µs per call of walk_tree and of psutil children(recursive=True), tree size, host procs."""
    proc = subprocess.Popen(
        ["bash", "-c", "sleep 30 & sleep 30 & (sleep 30; true) & wait"], start_new_session=True
    )
    try:
        time.sleep(0.2)
        ours = walk_tree(proc.pid)
        t = time.perf_counter()
        for _ in range(calls):
            walk_tree(proc.pid)
        walk_us = (time.perf_counter() - t) / calls * 1e6
        ps = psutil.Process(proc.pid)
        t = time.perf_counter()
        for _ in range(calls):
            ps.children(recursive=True)
        psutil_us = (time.perf_counter() - t) / calls * 1e6
        host = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())
        return walk_us, psutil_us, len(ours), host
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="CPU seconds per workload")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.1, help="sampler interval (s)")
    parser.add_argument("--calls", type=int, default=200, help="tree-walk calls to time")
    args = parser.parse_args()

    n = calibrate(args.seconds)
    print(
        f"workload: {n:,} loop iterations (~{args.seconds:g} s CPU), {args.repeats} repeat(s), "
        f"sampler every {args.interval:g} s; {os.cpu_count()} CPUs"
    )
    print(
        f"{'repeat':>6} {'bare CPU s':>11} {'sampled CPU s':>14} {'sampler CPU s':>14} "
        f"{'start-up ms':>11} {'samples':>8} {'µs/sample':>10} {'% of a core':>12}"
    )
    bare, sampled, own, share, steady_us = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="rb-sampler-bench-") as d:
        tmp = Path(d)
        for k in range(args.repeats):
            b_cpu, _, _, _ = one_run(n, tmp, None)
            s_cpu, s_wall, peaks, startup = one_run(n, tmp, args.interval)
            assert peaks is not None
            pct = 100.0 * peaks.sampler_cpu_s / s_wall
            # Steady state: the samples alone, without importing and starting NVML.
            per = (peaks.sampler_cpu_s - startup) / max(1, peaks.samples) * 1e6
            bare.append(b_cpu)
            sampled.append(s_cpu)
            own.append(peaks.sampler_cpu_s)
            share.append(pct)
            steady_us.append(per)
            print(
                f"{k + 1:>6} {b_cpu:>11.3f} {s_cpu:>14.3f} {peaks.sampler_cpu_s:>14.4f} "
                f"{startup * 1e3:>11.1f} {peaks.samples:>8} {per:>10.0f} {pct:>11.2f}%"
            )
    b, s, o, p = (statistics.median(v) for v in (bare, sampled, own, share))
    steady = statistics.median(steady_us)
    verdict = "PASS" if p < TARGET_CORE_PERCENT else "FAIL"
    print(
        f"median: bare {b:.3f} s, sampled {s:.3f} s, ratio sampled/bare {s / b:.3f}x; "
        f"sampler {o:.4f} s CPU = {p:.2f}% of a core — {verdict} "
        f"(target < {TARGET_CORE_PERCENT:g}%); steady state {steady:.0f} µs/sample = "
        f"{steady / 1e4 / args.interval:.3f}% of a core"
    )
    walk_us, psutil_us, size, host = tree_walk_costs(args.calls)
    print(
        f"finding the tree ({size} processes, {host} on the host), per sample: "
        f"walk_tree {walk_us:.0f} µs vs psutil children(recursive=True) {psutil_us:.0f} µs "
        f"(ratio {psutil_us / walk_us:.0f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
