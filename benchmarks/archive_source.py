"""Benchmark: `rb archive --with-source` as users run it, against `tar` and `git archive`
of the same tree, in the same run (issue 14's archive rows, issue 13's supplement).

Trees:

* ``synthetic``: ``--files`` (default 20000) small Python-like files in 100 packages,
  committed to a fresh git repository;
* ``--real DIR``: a git clone (e.g. ``/work/corpus/examples``), copied with
  ``git clone --local`` so the original is never written.

Each tree gets a minimal ``reprobridge.toml`` (committed), then per format (gz, zst),
interleaved, ``--repeat`` times:

* rb: ``python -m reprobridge archive --evidence none --with-source --format F -o OUT``
  (a new process: imports, manifest validation, git, packing, RO-Crate, MANIFEST.json);
* ``tar czf`` / ``tar --zstd -cf`` of the committed files (``git ls-files``), and
  ``git archive --format=tar | gzip -n`` / ``| zstd -3 -T1``;

and ``rb unpack`` (verify, extract, re-hash) against ``tar xzf`` / ``tar --zstd -xf`` of
the same archive (``--no-unpack``: packing only). Prints medians (wall, and CPU: user +
sys of every process a command waited for), sizes and the medians of the per-round ratios
rb / baseline (targets: pack <= 1.2x gz, <= 1.5x zst), after rb's fixed cost (a one-file
repository) beside ``python -c pass`` and ``rb --help``. ``RB_BENCH_EXTRA_PATH`` adds a directory to rb's PYTHONPATH (a
``pip install --target`` of ``zstandard`` for the zst rows).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b.invalid", "-c", "commit.gpgsign=false"]
MANIFEST = 'schema = 1\n[project]\nname = "bench"\n'
WORDS = [
    "model",
    "loss",
    "accuracy",
    "epoch",
    "batch",
    "def",
    "return",
    "import",
    "torch",
    "self",
    "train",
    "seed",
    "data",
]


def make_synthetic(root: Path, files: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for i in range(files):
        d = root / "src" / f"pkg{i % 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        n = rng.randint(0, 4096)
        text = " ".join(rng.choice(WORDS) for _ in range(n // 6 + 1))[:n]
        (d / f"mod{i:05d}.py").write_text(text)


def commit_all(root: Path) -> None:
    (root / "reprobridge.toml").write_text(MANIFEST)
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", "bench"], check=True)


def _env() -> dict[str, str]:
    # As users run rb: byte code cached after the first run (a CI image may switch that off
    # with PYTHONDONTWRITEBYTECODE, which would add every import's compile to each run).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("RB_BENCH_EXTRA_PATH", "")) if p
    )
    return env


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed_cpu(cmd: str, cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys of the command and every process it
    waited for: tar's gzip, rb's git) of ``cmd``. On the shared 2-core machine the CPU
    figure is the steadier one: wall time there is mostly waiting for a core."""
    cpu = _children_cpu()
    wall = timed(cmd, cwd)
    return wall, _children_cpu() - cpu


def timed(cmd: str, cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd],
        cwd=cwd,
        check=True,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t


def bench_tree(
    name: str, root: Path, work: Path, repeat: int, formats: list[str], unpack: bool = True
) -> None:
    files = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    (work / "files.lst").write_bytes(files)
    count = files.count(b"\0")
    print(f"== {name}: {count} files")
    py = sys.executable
    for fmt in formats:
        tar_flag = "z" if fmt == "gz" else "--zstd "
        comp = "gzip -n -6" if fmt == "gz" else "zstd -q -3 -T1"
        rb_out, tar_out, ga_out = (work / f"{k}.tar.{fmt}" for k in ("rb", "tar", "git"))
        cmds = {
            "rb archive": f"{py} -m reprobridge archive -C {root} --evidence none "
            f"--with-source --format {fmt} -o {rb_out}",
            "tar": f"tar -C {root} -c{tar_flag}f {tar_out} --null -T {work / 'files.lst'}"
            if fmt == "gz"
            else f"tar -C {root} --zstd -cf {tar_out} --null -T {work / 'files.lst'}",
            "git archive": f"git -C {root} archive --format=tar HEAD | {comp} > {ga_out}",
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        cpus: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(repeat):
            for k, c in cmds.items():  # interleaved: load changes hit every side alike
                wall, cpu = timed_cpu(c, work)
                times[k].append(wall)
                cpus[k].append(cpu)
        med = {k: statistics.median(v) for k, v in times.items()}
        cmed = {k: statistics.median(v) for k, v in cpus.items()}
        unpacked: dict[str, list[float]] = {"rb unpack": [], "tar x": []}
        for i in range(repeat if unpack else 0):
            dest = work / f"u{i}"
            unpacked["rb unpack"].append(timed(f"{py} -m reprobridge unpack {rb_out} {dest}", work))
            shutil.rmtree(dest)
            dest.mkdir()
            xflag = "-xzf" if fmt == "gz" else "--zstd -xf"
            unpacked["tar x"].append(timed(f"tar -C {dest} {xflag} {rb_out}", work))
            shutil.rmtree(dest)
        print(f"  [{fmt}] pack (median of {repeat}):")
        for k, v in med.items():
            size = {"rb archive": rb_out, "tar": tar_out, "git archive": ga_out}[k].stat().st_size
            print(f"    {k:12s} {v:7.3f} s wall {cmed[k]:7.3f} s CPU {size / 1e6:8.2f} MB")

        # Medians of the per-round ratios: a round's commands ran back to back, so a load
        # change hits both sides of its ratio alike.
        def ratio(vals: dict[str, list[float]], base: str) -> float:
            rb = vals["rb archive"]
            return statistics.median(a / b for a, b in zip(rb, vals[base], strict=True))

        print(
            f"    ratio rb/tar {ratio(times, 'tar'):.2f}x wall, {ratio(cpus, 'tar'):.2f}x CPU; "
            f"rb/git archive {ratio(times, 'git archive'):.2f}x wall, "
            f"{ratio(cpus, 'git archive'):.2f}x CPU; "
            f"size rb/tar {rb_out.stat().st_size / tar_out.stat().st_size:.3f} "
            f"(medians of per-round ratios)"
        )
        if unpack:
            umed = {k: statistics.median(v) for k, v in unpacked.items()}
            print(
                f"  [{fmt}] unpack: rb {umed['rb unpack']:.3f} s, tar {umed['tar x']:.3f} s, "
                f"ratio {umed['rb unpack'] / umed['tar x']:.2f}x"
            )


def fixed_cost(base: Path, repeat: int) -> None:
    """rb's cost with (almost) nothing to pack: a one-file repository. It is the floor
    under every row above it (interpreter, imports, manifest validation, git calls)."""
    root = base / "one"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text("print(1)\n")
    commit_all(root)
    py = sys.executable
    cmds = {
        "python -c pass": f"{py} -c pass",
        "rb --help": f"{py} -m reprobridge --help",
        "rb archive": f"{py} -m reprobridge archive -C {root} --evidence none --with-source "
        f"-o {base / 'one.tar.gz'}",
    }
    cpus: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeat):
        for k, c in cmds.items():
            cpus[k].append(timed_cpu(c, base)[1])
    med = {k: statistics.median(v) for k, v in cpus.items()}
    print("== fixed cost (a one-file repository), CPU s, median of", repeat)
    print("  " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--real", type=Path, action="append", default=[])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", default="gz,zst")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--no-unpack", action="store_true", help="time packing only")
    args = ap.parse_args()
    formats = args.formats.split(",")
    probe = subprocess.run(
        [sys.executable, "-c", "import zstandard"], env=_env(), capture_output=True, check=False
    )
    if probe.returncode != 0 and "zst" in formats:
        print("zst: skipped (no zstandard module; RB_BENCH_EXTRA_PATH may name one)")
        formats = [f for f in formats if f != "zst"]
    base = Path(tempfile.mkdtemp(prefix="rb-bench-src-"))
    try:
        fixed_cost(base, args.repeat)
        if not args.no_synthetic:
            tree = base / "synthetic"
            tree.mkdir()
            subprocess.run(["git", "init", "-q", str(tree)], check=True)
            make_synthetic(tree, args.files)
            commit_all(tree)
            (base / "w0").mkdir()
            bench_tree(
                f"synthetic {args.files}",
                tree,
                base / "w0",
                args.repeat,
                formats,
                unpack=not args.no_unpack,
            )
        for i, real in enumerate(args.real):
            tree = base / f"real{i}"
            subprocess.run(["git", "clone", "-q", "--local", str(real), str(tree)], check=True)
            commit_all(tree)
            (base / f"w{i + 1}").mkdir()
            bench_tree(
                f"real {real}",
                tree,
                base / f"w{i + 1}",
                args.repeat,
                formats,
                unpack=not args.no_unpack,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
