"""`rb verify` on a large bundle against `sha256sum -c` of the same bundle, in the same run.

A real bundle is built with rb's own writer (``Bundle``: runs sealed by ``status.json``,
judged by ``reprobridge.audit.verdicts``, ``audit.json``, ``SHA256SUMS``): ``--runs`` runs
of one experiment, whose ``files/`` hold ``--files`` files in all (0-4 KiB, seeded random,
``--mb`` MB in all). Then, page cache warm, interleaved ``--repeat`` times:

* ``rb verify BUNDLE`` as a user runs it (``python -m reprobridge verify``), wall time and
  peak RSS (``getrusage(RUSAGE_CHILDREN)`` of a fresh child each time);
* ``sha256sum -c --quiet SHA256SUMS`` in the bundle (the C floor: one hash per file).

With ``--compare-with DIR`` the same ``rb verify`` of another checkout (``PYTHONPATH=DIR``,
e.g. ``/work/main`` before a change) runs in each round too, side by side.

Prints each command's wall and CPU seconds (user + sys: steadier than wall time on a shared
machine) and peak RSS, the median of the per-round ratios to ``sha256sum -c``, and the
targets of issue 14 (<= 2.5x, < 100 MB). ``rb verify`` does more than ``sha256sum -c``: each run's ``status.json``, the
journal's chain, re-judging every run from its logs. The ratio says what that costs.

Usage: ``python benchmarks/verify.py [--files 100000] [--mb 200] [--runs 10] [--repeat 3]
[--compare-with DIR] [--dir DIR] [--keep | --bundle PATH]``
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MANIFEST = """schema = 1
[project]
name = "verify-bench"
[environment]
python = "3.11"
nixpkgs = {release = "nixos-25.11", rev = "b6018f87da91d19d0ab4cf979885689b469cdd41", \
narHash = "sha256-twXPFqFsrrY5r28Zh7Homgcp2gUMBgQ6WDS98Q/3xFI=", lastModified = 1782847189}
[experiments.main]
command = "bash run.sh"
timeout = "10m"
[experiments.main.metrics.acc]
source = {regex = "acc=([0-9.]+)"}
min = 0.5
"""


def build_bundle(root: Path, n_files: int, total_mb: float, runs: int) -> Path:
    """A sealed bundle under ``root`` with ``n_files`` run files of ``total_mb`` MB in all."""
    from reprobridge.audit.verdicts import judgement_json, rejudge_run, summarize
    from reprobridge.evidence.bundle import Bundle
    from reprobridge.evidence.records import (
        AuditSummary,
        Plan,
        PlannedRun,
        RunRecord,
        StreamSummary,
        TerminationRecord,
    )
    from reprobridge.manifest.io import parse_document, validate_document

    manifest = validate_document(parse_document(MANIFEST, path="m"), path="m")
    bundle = Bundle.create(root, "20260101T000000Z-bench0")
    rnd = random.Random(0)
    mean = total_mb * 1e6 / max(n_files, 1)
    plan = tuple(PlannedRun("main", k, k, 600.0) for k in range(runs))
    judgements = []
    with bundle.lock():
        bundle.write_bytes("inputs/reprobridge.toml", MANIFEST.encode())
        bundle.write_json(
            "plan.json",
            Plan("bench", "0", "full", "host", "0" * 40, "0" * 64, plan).to_json(),
        )
        bundle.write_json("environment.json", {"backend": "host", "ok": True, "reason": "ok"})
        bundle.journal_append({"event": "started"})
        for run in plan:
            run_dir = bundle.run_dir(run.experiment, run.k)
            log = f"epoch 1\nacc=0.9{run.k}\n".encode()
            for name in ("stdout.log", "output.log"):
                (run_dir / name).write_bytes(log)
            (run_dir / "stderr.log").write_bytes(b"")
            share = n_files // runs + (1 if run.k < n_files % runs else 0)
            for i in range(share):
                d = run_dir / "files" / "out" / f"d{i // 1000:03d}"
                if i % 1000 == 0:
                    d.mkdir(parents=True)
                (d / f"f{i:06d}.bin").write_bytes(rnd.randbytes(rnd.randint(0, int(2 * mean))))
            stream = StreamSummary(len(log), "0" * 64, False)
            record = RunRecord(
                "main", run.k, run.seed, "full", "host", False, "bubblewrap",
                termination=TerminationRecord("exit", 0, None, "exit(0)"),
                wall_s=1.0, cpu_user_s=1.0, cpu_sys_s=0.0, cpu_source="rusage",
                started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:01Z",
                survivors_killed=0, stdout=stream, stderr=stream, output=stream, peaks={},
            )  # fmt: skip
            judgement = rejudge_run(manifest.experiments["main"], "full", run_dir, record)
            bundle.write_json(f"runs/main/{run.k}/metrics.json", judgement_json(judgement))
            bundle.seal_run("main", run.k, record, scan_secrets=False)
            judgements.append(judgement)
        judged = summarize(
            manifest, "full", {"main": judgements}, environment_ok=True, environment_reason="ok"
        )
        summary = AuditSummary(judged, bundle.audit_id, "0", "host", False, True, "", "", "")
        bundle.write_json("audit.json", summary.to_json())
        bundle.journal_append({"event": "finished"})
        bundle.write_sha256sums()
    return bundle.path


def _measure(
    argv: list[str], cwd: Path, pythonpath: str | None = None
) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds (user + sys), exit status and peak RSS (bytes) of ``argv``,
    measured by a fresh intermediate Python whose only child it is (``ru_maxrss`` of
    ``RUSAGE_CHILDREN`` is the largest child a process ever had)."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,\n"
        "                    stderr=subprocess.DEVNULL).returncode\n"
        "wall = time.perf_counter() - t\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(wall, ru.ru_utime + ru.ru_stime, rc, ru.ru_maxrss * 1024)\n"
    )
    # As users run rb: byte code cached after the first run (as archive_source.py does;
    # with PYTHONDONTWRITEBYTECODE every run would compile each module it imports).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    wall, cpu, rc, rss = out.stdout.split()
    return float(wall), float(cpu), int(rc), int(rss)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000, help="files in the runs, in all")
    ap.add_argument("--mb", type=float, default=200.0, help="their size in all (MB)")
    ap.add_argument("--runs", type=int, default=10, help="runs in the bundle")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median kept)")
    ap.add_argument(
        "--compare-with", type=Path, default=None, help="another rb checkout to time as well"
    )
    ap.add_argument("--dir", type=Path, default=None, help="where to build the bundle")
    ap.add_argument("--keep", action="store_true", help="keep the bundle (its path is printed)")
    ap.add_argument("--bundle", type=Path, default=None, help="a bundle --keep left (reused)")
    args = ap.parse_args(argv)
    if shutil.which("sha256sum") is None:
        raise SystemExit("sha256sum is not installed")
    tmp = Path(tempfile.mkdtemp(dir=args.dir, prefix="rb-verify-bench-"))
    try:
        t = time.perf_counter()
        bundle = args.bundle or build_bundle(tmp / "evidence", args.files, args.mb, args.runs)
        size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        count = sum(1 for p in bundle.rglob("*") if p.is_file())
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; bundle: {count} files, "
            f"{size / 1e6:.0f} MB (built in {time.perf_counter() - t:.1f} s)"
        )
        rb_argv = [sys.executable, "-m", "reprobridge", "verify", str(bundle)]
        contenders: list[tuple[str, list[str], str | None]] = [
            ("rb verify", rb_argv, str(REPO)),
            ("sha256sum -c", ["sha256sum", "-c", "--quiet", "SHA256SUMS"], None),
        ]
        if args.compare_with is not None:
            contenders.insert(1, ("rb verify (other)", rb_argv, str(args.compare_with.resolve())))
        _measure(contenders[-1][1], bundle)  # page cache warm for all
        rounds: list[list[tuple[float, float, int, int]]] = []
        for _ in range(args.repeat):  # interleaved: drift in machine load hits all alike
            got = [_measure(argv, bundle, pp) for _name, argv, pp in contenders]
            for (name, _argv, _pp), m in zip(contenders, got, strict=True):
                if m[2] != 0:
                    raise SystemExit(f"{name} failed on the benchmark bundle (exit {m[2]})")
            rounds.append(got)
        med = statistics.median
        print(
            f"{'command':<18} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} "
            f"{'x wall':>7} {'x CPU':>7}   (medians; x = ratio to sha256sum -c)"
        )
        for i, (name, _argv, _pp) in enumerate(contenders):
            print(
                f"{name:<18} {med(r[i][0] for r in rounds):8.2f} "
                f"{med(r[i][1] for r in rounds):8.2f} "
                f"{med(r[i][3] for r in rounds) / 2**20:8.0f} "
                f"{med(r[i][0] / r[-1][0] for r in rounds):7.2f} "
                f"{med(r[i][1] / r[-1][1] for r in rounds):7.2f}"
            )
        cpu_ratio = med(r[0][1] / r[-1][1] for r in rounds)
        rss_mb = max(r[0][3] for r in rounds) / 2**20
        ok = cpu_ratio <= 2.5 and rss_mb < 100
        print(
            f"rb verify: {cpu_ratio:.2f}x sha256sum -c in CPU time (median of {args.repeat} "
            f"rounds; target <= 2.5x), peak {rss_mb:.0f} MB (target < 100 MB): "
            f"{'PASS' if ok else 'FAIL'}"
        )
        if args.keep:
            print(f"kept: {bundle}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
