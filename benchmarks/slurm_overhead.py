"""The Slurm executor's overhead per run against `srun` of the same launcher, and where it goes.

Usage: python benchmarks/slurm_overhead.py [--runs 5]   (needs a working Slurm: sinfo)

A tiny committed repository after `rb init` whose one experiment prints ``acc=0.9``. Side by
side, in the same process, alternating so the cluster's state is shared:

- ``srun``: ``srun -N1 bash repro/launchers/main.sh`` in the repository, what a person would
  type on a login node; time to its first line of output and to its end;
- ``sbatch``: ``sbatch --wrap 'bash repro/launchers/main.sh'``, the same launcher as a batch
  job (what rb submits is a batch job too): time to the first byte of its output file and to
  the end of the launcher (a line it writes last), which separates the batch queue's own
  latency (the controller starts batch jobs on its scheduling cycle, where ``srun`` gets an
  allocation at once) from rb's;
- ``rb``: ``rb audit --executor slurm --runs 1`` of the same experiment; time from the start
  of the command to the first byte of the job's ``stdout.log`` (the node writes it while the
  run streams) and to the command's end (submission, sandbox, evidence, seal, verdict).

Printed: the medians of both, the ratios rb/srun, and the profile of rb's run: the medians of
its phases, each timed from the files the phases write (their modification times, all on
this host's clock, so the one-node cluster measures them exactly):

  start -> submitted    rb's start, plan, environment, workspace, setup (the array script)
  submitted -> started  Slurm: sbatch and the controller scheduling the task (the task's
                        Slurm output file, which slurmd creates when the task starts)
  started -> output     the node side (Python, importing rb; the node's fingerprint runs
                        beside the run), the sandbox, the launcher up to its first byte
  output -> run done    the run and the node side's end (result.json)
  run done -> noticed   the executor noticing the end and Slurm's final state (job.json is
                        rewritten then): the result-file watch and the queue polls
  noticed -> sealed     collecting, the package listing (in the sandbox), sealing the run
  sealed -> exit        the verdict, the bundle's seal, exit
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.audit_overhead import make_repo

PHASES = (
    "start -> submitted",
    "submitted -> started",
    "started -> output",
    "output -> run done",
    "run done -> noticed",
    "noticed -> sealed",
    "sealed -> exit",
)


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


def _sbatch(root: Path, out: Path) -> tuple[float, float]:
    t0 = time.monotonic()
    subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-o",
            str(out),
            "--wrap",
            "bash repro/launchers/main.sh; echo __end__",
        ],
        cwd=root,
        capture_output=True,
        check=True,
    )
    first = float("nan")
    while True:
        text = out.read_bytes() if out.exists() else b""
        if text and first != first:
            first = time.monotonic() - t0
        if b"__end__" in text:
            return first, time.monotonic() - t0
        time.sleep(0.01)


def audit_argv(root: Path, *args: str) -> list[str]:
    """`rb audit` of ``root`` on the Slurm executor, one run, host backend (what this
    benchmark measures, and what tests/unit/audit/test_slurm.py runs)."""
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


def _rb(root: Path) -> tuple[float, float, list[float]]:
    """(first output, end, the phases' durations) of one `rb audit --executor slurm`."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    slurm = root / "repro/evidence/.slurm"
    before = set(slurm.rglob("run/stdout.log"))
    wall0, t0 = time.time(), time.monotonic()
    proc = subprocess.Popen(
        audit_argv(root, "-q"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    first = float("nan")
    first_wall = float("nan")
    while proc.poll() is None:
        logs = set(slurm.rglob("run/stdout.log")) - before
        if any(p.stat().st_size > 0 for p in logs):
            first, first_wall = time.monotonic() - t0, time.time()
            break
        time.sleep(0.01)
    proc.wait()
    end, end_wall = time.monotonic() - t0, time.time()
    (run_out,) = set(slurm.rglob("run/stdout.log")) - before
    job_dir = run_out.parent.parent
    script = max(job_dir.parent.glob("job-*.sh"), key=lambda p: p.stat().st_mtime)
    task_log = max(job_dir.parent.glob("slurm-*.out"), key=lambda p: p.stat().st_mtime)
    bundle = max((root / "repro/evidence").glob("2*"), key=lambda p: p.stat().st_mtime)
    marks = [
        wall0,
        script.stat().st_mtime,
        task_log.stat().st_ctime,
        first_wall,
        (job_dir / "run/result.json").stat().st_mtime,
        (job_dir / "job.json").stat().st_mtime,
        next(bundle.glob("runs/main/*/status.json")).stat().st_mtime,
        end_wall,
    ]
    return first, end, [b - a for a, b in itertools.pairwise(marks)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if subprocess.run(["sinfo"], capture_output=True, check=False).returncode != 0:
        print("no working Slurm here (sinfo fails): start one with tools/slurm-up.sh DIR")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "repo")
        srun, sbatch, rb = [], [], []
        for i in range(args.runs):
            srun.append(_srun(root))
            sbatch.append(_sbatch(root, Path(tmp) / f"sbatch-{i}.out"))
            rb.append(_rb(root))
    s_first = statistics.median(x[0] for x in srun)
    s_total = statistics.median(x[1] for x in srun)
    b_first = statistics.median(x[0] for x in sbatch)
    b_total = statistics.median(x[1] for x in sbatch)
    r_first = statistics.median(x[0] for x in rb)
    r_total = statistics.median(x[1] for x in rb)
    print(f"runs: {args.runs} each, alternating (medians)")
    print(f"{'':28}{'first output':>14}{'end':>10}")
    print(f"{'srun launcher':28}{s_first:>13.2f}s{s_total:>9.2f}s")
    print(f"{'sbatch launcher':28}{b_first:>13.2f}s{b_total:>9.2f}s")
    print(f"{'rb audit --executor slurm':28}{r_first:>13.2f}s{r_total:>9.2f}s")
    print(
        f"{'ratio rb/srun':28}{r_first / s_first:>13.1f}x{r_total / s_total:>9.1f}x"
        f"   overhead per run {r_total - s_total:+.2f}s"
    )
    print(
        f"{'ratio rb/sbatch':28}{r_first / b_first:>13.1f}x{r_total / b_total:>9.1f}x"
        f"   overhead per run {r_total - b_total:+.2f}s"
    )
    print("\nwhere rb's run spends its time (medians; file times on this host):")
    for i, name in enumerate(PHASES):
        print(f"  {name:24}{statistics.median(x[2][i] for x in rb):>8.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
