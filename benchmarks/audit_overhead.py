"""The auditor's fixed cost per run: a trivial experiment audited N times vs. run N times bare.

Usage: python benchmarks/audit_overhead.py [--runs 10] [--repeats 1] [--sandbox auto|on|off]
       [--burn SECONDS] [--keep DIR]

A tiny committed repository after `rb init` whose one experiment is ``echo acc=0.9``. In
the same process, first the generated launcher runs N times bare (``bash
repro/launchers/main.sh``, what a person would type), then :func:`run_audit` audits the
experiment with N runs (host backend, sandbox as asked: ``auto`` uses bubblewrap when it
works). Printed for each: wall seconds and CPU seconds (this process plus its children,
``getrusage``) in total and per run, then the audit's extra cost per run and the ratio.

The audit's cost per run includes its share of the per-audit work (fingerprints, plan,
seal), so it falls as N grows; the workload itself costs nothing, so what is measured is
all overhead: a clean workspace from ``git archive``, the sandbox, the sampler, redacted and
capped logs, evidence hashed and fsynced, the judgement.

With ``--repeats K`` the pair (bare, audited) is measured K times, interleaved, and the
medians of the per-pair ratio and extra cost per run are printed last (the machine's load
changes between pairs; a median of ratios taken side by side is what survives it).

``--burn S`` (issue 14, "CPU accounting under bubblewrap"): the experiment is ``python3
burn.py``, which spends S seconds of CPU before it prints, and the script also prints the
CPU time each audited run's record holds (``cpu_user_s + cpu_sys_s``, and ``cpu_source``:
``cgroup``, ``sampler`` or ``rusage``) against the CPU time the workload's interpreter
reports for itself (``time.process_time()`` at its end, printed to its log). rusage alone
does not see what runs inside bubblewrap; a record that holds the workload's CPU is at
least 1.0x of it (it also counts the launcher's bash). The bare side's ``getrusage`` is
shown the same way (it also counts a pyenv shim, where ``python3`` is one).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.initializer import init_repository

BURN = """import time
start = time.process_time()
while time.process_time() - start < {seconds}:
    pass
print("acc=0.9")
print(f"cpu={{time.process_time():.4f}}")  # the interpreter's own CPU, start included
"""

MANIFEST = f"""schema = 1
[project]
name = "overhead"
[environment]
python = "{sys.version_info.major}.{sys.version_info.minor}"
[experiments.main]
command = "echo acc=0.9"
timeout = "10m"
[experiments.main.metrics.acc]
source = {{regex = "acc=([0-9.]+)"}}
min = 0.5
"""


@dataclass
class Cost:
    """Wall and CPU seconds (this process + its children) of ``runs`` runs."""

    wall: float
    cpu: float
    runs: int

    @property
    def wall_per_run(self) -> float:
        return self.wall / self.runs

    @property
    def cpu_per_run(self) -> float:
        return self.cpu / self.runs


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def make_repo(root: Path, burn: float | None = None) -> Path:
    """A committed repository after `rb init` with the trivial experiment ``main``
    (``burn``: ``python3 burn.py``, ``burn`` seconds of CPU, instead of ``echo``)."""
    root.mkdir(parents=True)
    manifest = MANIFEST
    if burn is not None:
        (root / "burn.py").write_text(BURN.format(seconds=burn))
        manifest = manifest.replace('"echo acc=0.9"', '"python3 burn.py"')
    (root / "reprobridge.toml").write_text(manifest)
    (root / "README.md").write_text("# overhead\n\nA trivial experiment: `echo acc=0.9`.\n")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    init_repository(root, lock="never")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "rb init"], check=True)
    return root


def _reported_cpu(stdout: bytes) -> float | None:
    """The ``cpu=S`` line burn.py prints (None for the ``echo`` workload)."""
    for line in stdout.decode().splitlines():
        if line.startswith("cpu="):
            return float(line[4:])
    return None


def bare(repo: Path, runs: int) -> tuple[Cost, list[float]]:
    """The launcher run ``runs`` times, as a person would run it; also the CPU each run's
    workload reported for itself (``--burn``)."""
    t0, c0 = time.perf_counter(), _cpu()
    reported = []
    for _ in range(runs):
        out = subprocess.run(
            ["bash", "repro/launchers/main.sh"], cwd=repo, capture_output=True, check=True
        )
        assert b"acc=0.9" in out.stdout
        cpu = _reported_cpu(out.stdout)
        reported += [cpu] if cpu is not None else []
    return Cost(time.perf_counter() - t0, _cpu() - c0, runs), reported


def audited(
    repo: Path, runs: int, sandbox: str
) -> tuple[Cost, str, list[tuple[float, float | None, str]]]:
    """One audit of ``runs`` runs; also where the runs went (bubblewrap or why not), and
    for each run its recorded CPU seconds, the CPU its workload reported, and the
    record's ``cpu_source``."""
    t0, c0 = time.perf_counter(), _cpu()
    result = run_audit(
        repo,
        AuditOptions(
            runs=runs, backend="host", sandbox=cast(Literal["auto", "on", "off"], sandbox)
        ),
    )
    cost = Cost(time.perf_counter() - t0, _cpu() - c0, runs)
    if not result.passed:
        raise SystemExit(f"the audit did not pass: {result.summary}")
    recorded = []
    for status in sorted(result.path.glob("runs/**/status.json")):
        rec = json.loads(status.read_text())["record"]
        reported = _reported_cpu((status.parent / "stdout.log").read_bytes())
        recorded.append(
            (rec["cpu_user_s"] + rec["cpu_sys_s"], reported, str(rec.get("cpu_source")))
        )
    return cost, str(result.summary["sandbox"]), recorded


def _print_pair(plain: Cost, audit: Cost) -> None:
    print(f"{'':>8} {'wall s':>8} {'CPU s':>8} {'wall ms/run':>12} {'CPU ms/run':>11}")
    for name, c in (("bare", plain), ("audited", audit)):
        print(
            f"{name:>8} {c.wall:8.3f} {c.cpu:8.3f} "
            f"{c.wall_per_run * 1e3:12.1f} {c.cpu_per_run * 1e3:11.1f}"
        )
    extra_wall = (audit.wall_per_run - plain.wall_per_run) * 1e3
    extra_cpu = (audit.cpu_per_run - plain.cpu_per_run) * 1e3
    print(f"extra per run: wall {extra_wall:.1f} ms, CPU {extra_cpu:.1f} ms")
    print(
        f"ratio audited/bare: wall {audit.wall / plain.wall:.1f}x, "
        f"CPU {audit.cpu / max(plain.cpu, 1e-9):.1f}x"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each (default 10)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="interleaved (bare, audited) pairs (default 1)"
    )
    parser.add_argument("--sandbox", choices=["auto", "on", "off"], default="auto")
    parser.add_argument(
        "--burn", type=float, default=None, help="the workload burns this many CPU seconds"
    )
    parser.add_argument("--keep", type=Path, help="build the repository here and keep it")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="rb-audit-overhead-"))
    pairs: list[tuple[Cost, Cost]] = []
    in_record: list[float] = []  # audited: record / the workload's own CPU, per run
    in_rusage: list[float] = []  # bare: getrusage per run / the workload's own CPU
    sources: set[str] = set()
    where = ""
    try:
        repo = make_repo((args.keep or tmp) / "repo", args.burn)
        for _ in range(args.repeats):
            plain, reported = bare(repo, args.runs)
            audit, where, recs = audited(repo, args.runs, args.sandbox)
            pairs.append((plain, audit))
            in_rusage += [plain.cpu_per_run / r for r in reported]
            in_record += [cpu / own for cpu, own, _ in recs if own]
            sources |= {source for _, _, source in recs}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    work = "`echo acc=0.9`" if args.burn is None else f"`python3 burn.py` ({args.burn} s of CPU)"
    print(f"audit overhead: {work}, {args.runs} runs each; audited runs: {where}")
    for i, (plain, audit) in enumerate(pairs, 1):
        if len(pairs) > 1:
            print(f"pair {i} of {len(pairs)}:")
        _print_pair(plain, audit)
    if len(pairs) > 1:
        extra = [(a.wall_per_run - p.wall_per_run) * 1e3 for p, a in pairs]
        extra_cpu = [(a.cpu_per_run - p.cpu_per_run) * 1e3 for p, a in pairs]
        ratio = [a.wall / p.wall for p, a in pairs]
        print(
            f"median of {len(pairs)} pairs: extra per run wall {statistics.median(extra):.1f} ms, "
            f"CPU {statistics.median(extra_cpu):.1f} ms; ratio audited/bare wall "
            f"{statistics.median(ratio):.1f}x"
        )
    if in_record:
        print(
            f"CPU accounting, / the CPU the workload reported for itself (median, range): "
            f"audited run's record {_spread(in_record)} (cpu_source {', '.join(sorted(sources))}); "
            f"bare launcher's rusage {_spread(in_rusage)}"
        )
    return 0


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


if __name__ == "__main__":
    sys.exit(main())
