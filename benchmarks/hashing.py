"""Evidence hashing against the C tools, measured in the same run on the same files.

(a) one large file (default 1024 MB of os.urandom blocks, really written, no sparse holes):
    ``reprobridge.evidence.hashing.sha256_file`` vs ``openssl dgst -sha256`` (target >= 0.9x
    its throughput), plus ``sha256sum`` for reference. Page cache warm for all (one
    untimed read first), best of ``--repeat`` runs each, interleaved.
(b) many small files (default 100,000 of 0-4 KiB): ``sha256_files`` sequential and with 4
    threads vs ``find DIR -type f -print0 | xargs -0 sha256sum > /dev/null``.

Usage: ``python benchmarks/hashing.py [--size-mb 1024] [--files 100000] [--repeat 3] [--dir DIR]``
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from reprobridge.evidence.hashing import sha256_file, sha256_files


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _run(cmd: list[str] | str, *, shell: bool = False) -> None:
    subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL)


def big_file(workdir: Path, size_mb: int, repeat: int) -> None:
    path = workdir / "big.bin"
    block = 1 << 20
    with path.open("wb") as fh:
        for _ in range(size_mb):
            fh.write(os.urandom(block))
    size = path.stat().st_size
    sha256_file(path)  # warm the page cache
    contenders: dict[str, Callable[[], object]] = {"rb sha256_file": lambda: sha256_file(path)}
    if shutil.which("openssl"):
        contenders["openssl dgst -sha256"] = lambda: _run(["openssl", "dgst", "-sha256", str(path)])
    if shutil.which("sha256sum"):
        contenders["sha256sum"] = lambda: _run(["sha256sum", str(path)])
    times = {name: float("inf") for name in contenders}
    for _ in range(repeat):  # interleaved, so drift in machine load hits all alike
        for name, fn in contenders.items():
            times[name] = min(times[name], _best(fn, 1))
    mb = size / 1e6
    print(f"(a) one file, {mb:.0f} MB, best of {repeat}")
    print(f"{'tool':<24} {'s':>8} {'MB/s':>9}")
    for name, t in times.items():
        print(f"{name:<24} {t:8.3f} {mb / t:9.1f}")
    if "openssl dgst -sha256" in times:
        ratio = times["openssl dgst -sha256"] / times["rb sha256_file"]
        verdict = "PASS" if ratio >= 0.9 else "FAIL"
        print(f"ratio rb/openssl throughput: {ratio:.3f}x (target >= 0.9x) {verdict}")
    path.unlink()


def small_files(workdir: Path, n: int, repeat: int) -> None:
    root = workdir / "small"
    rnd = random.Random(0)
    paths: list[Path] = []
    per_dir = 1000
    for i in range(n):
        d = root / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        p = d / f"f{i:06d}.bin"
        p.write_bytes(rnd.randbytes(rnd.randint(0, 4096)))
        paths.append(p)
    total = sum(p.stat().st_size for p in paths)

    def walk() -> list[Path]:
        out: list[Path] = []
        for dirpath, _dirs, files in os.walk(root):
            out.extend(Path(dirpath) / f for f in files)
        return out

    walk()
    contenders: dict[str, Callable[[], object]] = {
        "rb sha256_files (walk)": lambda: sha256_files(walk()),
        "rb sha256_files (walk, 4 threads)": lambda: sha256_files(walk(), workers=4),
        "find | xargs -0 sha256sum": lambda: _run(
            f"find {root} -type f -print0 | xargs -0 sha256sum > /dev/null", shell=True
        ),
    }
    times = {name: float("inf") for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            times[name] = min(times[name], _best(fn, 1))
    print(f"(b) {n} small files, {total / 1e6:.1f} MB, best of {repeat}")
    print(f"{'tool':<32} {'s':>8} {'files/s':>10}")
    for name, t in times.items():
        print(f"{name:<32} {t:8.3f} {n / t:10.0f}")
    base = times["find | xargs -0 sha256sum"]
    for name in ("rb sha256_files (walk)", "rb sha256_files (walk, 4 threads)"):
        print(f"ratio {name} / sha256sum time: {times[name] / base:.2f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the large file (a)")
    ap.add_argument("--files", type=int, default=100_000, help="number of small files (b)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool (best is kept)")
    ap.add_argument("--dir", type=Path, default=None, help="where to create the files (a temp dir)")
    args = ap.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="rb-hash-bench-") as tmp:
        big_file(Path(tmp), args.size_mb, args.repeat)
        small_files(Path(tmp), args.files, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
