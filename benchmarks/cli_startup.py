"""CPU cost of `rb --help` and `rb init --help` above a bare interpreter, and who imports what.

Usage: python benchmarks/cli_startup.py [--runs N] [--top K]

Both figures are measured in the same run, interleaved, as CPU time (user + sys of the
child, from ``resource.getrusage(RUSAGE_CHILDREN)``) rather than wall time, so a busy
2-core machine does not distort them. Target: ``rb --help`` and ``rb init --help`` (a
verb's help: the group callback runs, the verb module is imported) each cost under 150 ms of
CPU above ``python -c pass``. Then ``python -X importtime -c "import reprobridge.cli"`` is
summarised: the heaviest imports by cumulative time, so a regression names its import.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

TARGET_MS = 150.0

#: Users run rb from compiled .pyc files: with PYTHONDONTWRITEBYTECODE set (some shells and
#: containers set it) every run would recompile every module it imports.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def rb_argv() -> list[str]:
    """The installed `rb` script next to this interpreter, else ``python -m reprobridge``."""
    script = Path(sys.executable).parent / "rb"
    if script.exists():
        return [str(script)]
    found = shutil.which("rb")
    return [found] if found else [sys.executable, "-m", "reprobridge"]


def child_cpu_ms(argv: list[str]) -> float:
    """CPU milliseconds (user + sys) one run of ``argv`` took; fails if it exits non-zero."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000.0


def measure(runs: int, commands: list[list[str]]) -> list[float]:
    """Median CPU ms of each command and, last, of ``python -c pass``; interleaved run by run."""
    argvs = [*commands, [sys.executable, "-c", "pass"]]
    for argv in argvs:
        child_cpu_ms(argv)  # warm the page cache and .pyc files; not counted
    samples: list[list[float]] = [[] for _ in argvs]
    for _ in range(runs):
        for argv, out in zip(argvs, samples, strict=True):
            out.append(child_cpu_ms(argv))
    return [statistics.median(s) for s in samples]


def import_times(module: str) -> list[tuple[int, int, int, str]]:
    """(cumulative us, self us, depth, name) per import of ``python -X importtime``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=_ENV,
        check=True,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows.append((int(cumulative_us), int(self_us), depth, name.strip()))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (median)")
    parser.add_argument("--top", type=int, default=12, help="imports to list")
    args = parser.parse_args(argv)

    labels = ["rb --help", "rb init --help"]
    *rb_ms, bare_ms = measure(args.runs, [[*rb_argv(), *label.split()[1:]] for label in labels])
    print(f"{'python -c pass':<16} {bare_ms:7.1f} ms CPU (median of {args.runs})")
    for label, ms in zip(labels, rb_ms, strict=True):
        above = ms - bare_ms
        ratio = ms / bare_ms if bare_ms > 0 else float("inf")
        verdict = "PASS" if above < TARGET_MS else "FAIL"
        print(
            f"{label:<16} {ms:7.1f} ms CPU (median of {args.runs}); ratio {ratio:.2f}x; "
            f"above the interpreter: {above:.1f} ms; target < {TARGET_MS:.0f} ms: {verdict}"
        )

    rows = import_times("reprobridge.cli")
    total = max((r[0] for r in rows), default=0)
    print(f"\n`import reprobridge.cli`: {total / 1000:.1f} ms cumulative (-X importtime)")
    print(f"{'cumulative ms':>14} {'self ms':>8}  module")
    for cumulative, self_us, depth, name in sorted(rows, reverse=True)[: args.top]:
        print(f"{cumulative / 1000:14.1f} {self_us / 1000:8.1f}  {'  ' * depth}{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
