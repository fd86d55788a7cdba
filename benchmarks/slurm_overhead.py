"""The Slurm executor's overhead per run against `srun` of the same launcher.

Usage: python benchmarks/slurm_overhead.py [--runs 5]   (needs a working Slurm: sinfo)

A tiny committed repository after `rb init` whose one experiment prints ``acc=0.9``. Side by
side, in the same process, alternating so the cluster's state is shared:

- ``srun``: ``srun -N1 bash repro/launchers/main.sh`` in the repository, what a person would
  type on a login node; time to its first line of output and to its end;
- ``rb``: ``rb audit --executor slurm --runs 1`` of the same experiment; time from the start
  of the command to the first byte of the job's ``stdout.log`` (the node writes it while the
  run streams) and to the command's end (submission, sandbox, evidence, seal, verdict).

Printed: the medians of both, and the ratios rb/srun. The extra cost is rb's own (a clean
workspace, the sandbox on the node, the node's fingerprint, polling at 1 s, evidence).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.audit_overhead import make_repo


def _srun(root: Path) -> tuple[float, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["srun", "-N1", "bash", "repro/launchers/main.sh"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    first = time.monotonic() - t0
    proc.communicate()
    return first, time.monotonic() - t0


def _rb(root: Path) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    t0 = time.monotonic()
    before = set((root / "repro/evidence/.slurm").rglob("run/stdout.log"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "reprobridge", "audit", "-C", str(root), "--runs", "1",
         "--backend", "host", "--executor", "slurm", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    first = float("nan")
    while proc.poll() is None:
        logs = set((root / "repro/evidence/.slurm").rglob("run/stdout.log")) - before
        if any(p.stat().st_size > 0 for p in logs):
            first = time.monotonic() - t0
            break
        time.sleep(0.02)
    proc.wait()
    return first, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if subprocess.run(["sinfo"], capture_output=True, check=False).returncode != 0:
        print("no working Slurm here (sinfo fails): start one with tools/slurm-up.sh DIR")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "repo")
        srun, rb = [], []
        for _ in range(args.runs):
            srun.append(_srun(root))
            rb.append(_rb(root))
    s_first = statistics.median(x[0] for x in srun)
    s_total = statistics.median(x[1] for x in srun)
    r_first = statistics.median(x[0] for x in rb)
    r_total = statistics.median(x[1] for x in rb)
    print(f"runs: {args.runs} each, alternating (medians)")
    print(f"{'':24}{'first output':>14}{'end':>10}")
    print(f"{'srun launcher':24}{s_first:>13.2f}s{s_total:>9.2f}s")
    print(f"{'rb audit --executor slurm':24}{r_first:>13.2f}s{r_total:>9.2f}s")
    print(
        f"ratio rb/srun: first output {r_first / s_first:.1f}x, end {r_total / s_total:.1f}x; "
        f"overhead per run {r_total - s_total:+.2f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
