"""Benchmark: `rb archive`'s deterministic writer against GNU tar with the same compressor.

A mixed tree (``--size-mb``, default 1024): about a quarter of the bytes in many small text
files (0-8 KiB, code and CSV-like logs, compressible), the rest in a few large binaries
(random bytes: model weights and data compress badly). It is packed in the same run by

* rb: ``reprobridge.archive.pack.write_archive`` (sorted, normalised, hashing every file);
* GNU tar: ``tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - DIR``
  piped into ``gzip -n -6`` or ``zstd -3 -T1`` (one thread, as rb's writer),

for each format, best of ``--repeat``. Prints seconds, MB/s of input, compressed size and
ratio, and rb's throughput relative to GNU tar's (target: at least 0.9x).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reprobridge.archive.pack import Member, write_archive

WORDS = [
    "model",
    "loss",
    "accuracy",
    "epoch",
    "batch",
    "learning",
    "rate",
    "def",
    "return",
    "import",
    "torch",
    "numpy",
    "self",
    "train",
    "eval",
    "config",
    "seed",
    "data",
    "loader",
    "optimizer",
    "step",
    "grad",
    "0.1234",
    "1e-3",
    "None",
    "True",
    "False",
]


def make_tree(root: Path, size_mb: int, seed: int = 0) -> tuple[int, int]:
    """Write the mixed tree; return (files, bytes)."""
    rng = random.Random(seed)
    total = size_mb * 1024 * 1024
    small_budget = total // 4
    files = written = 0
    d = 0
    while written < small_budget:
        sub = root / "src" / f"pkg{d:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(200):
            n = rng.randint(0, 8192)
            text = " ".join(rng.choice(WORDS) for _ in range(n // 6 + 1))[:n]
            (sub / f"mod{i:03d}.py").write_text(text)
            files += 1
            written += n
            if written >= small_budget:
                break
        d += 1
    big = root / "weights"
    big.mkdir()
    left = total - written
    k = 0
    while left > 0:
        n = min(left, 128 * 1024 * 1024)
        with open(big / f"shard{k:02d}.bin", "wb") as fh:
            remaining = n
            while remaining:
                chunk = min(remaining, 8 << 20)
                fh.write(rng.randbytes(chunk))
                remaining -= chunk
        files += 1
        written += n
        left -= n
        k += 1
    return files, written


def collect(root: Path) -> list[Member]:
    out: list[Member] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            out.append(Member(p.relative_to(root).as_posix(), source=p))
    return out


def time_rb(root: Path, out: Path, fmt: str) -> float:
    t = time.perf_counter()
    write_archive(collect(root), out, mtime=0, fmt=fmt)  # type: ignore[arg-type]
    return time.perf_counter() - t


def time_gnu(root: Path, out: Path, fmt: str) -> float:
    comp = "gzip -n -6" if fmt == "gz" else "zstd -q -3 -T1"
    cmd = (
        f"tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner "
        f"-C {root} -cf - . | {comp} > {out}"
    )
    t = time.perf_counter()
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--formats", default="gz,zst")
    ap.add_argument("--dir", type=Path, default=None, help="where to build the tree")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rb-bench-archive-", dir=args.dir))
    try:
        tree = base / "tree"
        tree.mkdir()
        files, nbytes = make_tree(tree, args.size_mb)
        mb = nbytes / 1e6
        print(f"tree: {files} files, {mb:.1f} MB")
        for fmt in args.formats.split(","):
            if fmt == "zst" and not shutil.which("zstd"):
                print("zst: skipped (no zstd on PATH)")
                continue
            try:
                import zstandard  # noqa: F401
            except ImportError:
                if fmt == "zst":
                    print("zst: skipped (no zstandard module)")
                    continue
            rb_t = min(time_rb(tree, base / f"rb.tar.{fmt}", fmt) for _ in range(args.repeat))
            gnu_t = min(time_gnu(tree, base / f"gnu.tar.{fmt}", fmt) for _ in range(args.repeat))
            rb_sz = (base / f"rb.tar.{fmt}").stat().st_size
            gnu_sz = (base / f"gnu.tar.{fmt}").stat().st_size
            print(f"[{fmt}]")
            print(
                f"  rb write_archive   {rb_t:8.3f} s  {mb / rb_t:8.1f} MB/s  {rb_sz / 1e6:9.1f} MB  ratio {nbytes / rb_sz:.3f}"
            )
            print(
                f"  GNU tar | {'gzip -n' if fmt == 'gz' else 'zstd -T1'}  {gnu_t:8.3f} s  {mb / gnu_t:8.1f} MB/s  {gnu_sz / 1e6:9.1f} MB  ratio {nbytes / gnu_sz:.3f}"
            )
            verdict = "PASS" if gnu_t / rb_t >= 0.9 else "FAIL"
            print(f"  throughput rb / GNU tar: {gnu_t / rb_t:.2f}x ({verdict}, target >= 0.9x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
