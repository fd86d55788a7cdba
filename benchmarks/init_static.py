"""Static recovery (index + detectors) against only reading every file, and its memory.

Usage:
    python benchmarks/init_static.py [--files 5000,10000,20000] [--shape library,entries]
                                     [--transformers 4.44.2 | --no-transformers]
                                     [--per-detector] [--keep DIR]

For each repository -- a generated one of N files (a realistic mix: library modules with
imports, a few argparse scripts, YAML/JSON configs, requirements, a README, a Makefile)
for each N in ``--files`` (``--shape entries``: hundreds of entry scripts and notebooks
importing one package instead, see :func:`generate_entries_repo`), and the ``transformers`` sdist (``pip download``; skipped with a
message when the registry cannot be reached) -- a fresh worker process measures, in one run:

* baseline: wall time to read every file's bytes (the same file list), page cache warm;
* recovery: wall time of ``RepoIndex.from_directory`` + ``detect_repo(index)``, cache warm;
* ratio recovery / baseline (target < 10x);
* memory: growth of peak RSS over the recovery, the tracemalloc peak of the recovery and
  the bytes the index itself retains; per file, to show memory follows the file count
  (the index), not the bytes read.

The detectors are being written while this script exists: when ``detectors()`` cannot
import them all, it falls back to the built-ins that do import and says which it skipped;
a detector that raises is reported and left out rather than ending the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

TARGET_RATIO = 10.0

# -- the generated repository ------------------------------------------------------------------

_IMPORTS = [
    "import os",
    "import sys",
    "import math",
    "import json",
    "import logging",
    "import numpy as np",
    "import torch",
    "import torch.nn as nn",
    "import torch.nn.functional as F",
    "from typing import Any, Optional",
    "from dataclasses import dataclass",
    "from collections import defaultdict",
    "import yaml",
    "from transformers import AutoModel",
    "import scipy.sparse as sp",
    "from tqdm import tqdm",
]

_SCRIPT = '''"""Train {name}."""
import argparse
import random

import numpy as np
import torch

from {pkg} import {mod}


def parse_args():
    parser = argparse.ArgumentParser(description="train {name}")
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--epochs", type=int, default={epochs})
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data", default="data/{name}")
    parser.add_argument("--out", default="outputs/{name}")
    return parser.parse_args()


def main():
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    model = {mod}.Model{idx}(hidden=128)
    for epoch in range(args.epochs):
        loss = model.step(epoch)
        print(f"epoch={{epoch}} loss={{loss:.4f}}")
    acc = model.evaluate()
    print(f"top1_acc={{acc:.4f}}")
    torch.save(model.state_dict(), f"{{args.out}}/model.pt")


if __name__ == "__main__":
    main()
'''


def _module(rng: random.Random, idx: int) -> str:
    imports = rng.sample(_IMPORTS, rng.randint(2, 7))
    parts = [f'"""Module {idx}: layers and helpers."""', *sorted(imports), ""]
    if rng.random() < 0.2:
        parts.append(f"from .mod{max(idx - 1, 0)} import helper_{max(idx - 1, 0)}_0")
    parts.append("")
    parts.append(f"class Model{idx}:")
    parts.append(f'    """Model {idx}."""')
    parts.append("")
    parts.append("    def __init__(self, hidden=128, dropout=0.1):")
    parts.append("        self.hidden = hidden")
    parts.append("        self.dropout = dropout")
    parts.append("        self.weights = [0.0] * hidden")
    for m in range(rng.randint(2, 6)):
        parts += [
            "",
            f"    def method_{m}(self, x, scale={rng.random():.3f}):",
            f'        """Apply transform {m} to ``x``."""',
            "        total = 0.0",
            "        for i, value in enumerate(x):",
            f"            total += value * scale + i * {rng.randint(1, 9)}",
            "        return total / max(len(x), 1)",
        ]
    for f in range(rng.randint(2, 8)):
        parts += [
            "",
            "",
            f"def helper_{idx}_{f}(values, eps=1e-{rng.randint(3, 9)}):",
            f'    """Helper {f}: normalise values."""',
            "    mean = sum(values) / max(len(values), 1)",
            "    var = sum((v - mean) ** 2 for v in values) / max(len(values), 1)",
            "    return [(v - mean) / (var + eps) ** 0.5 for v in values]",
        ]
    if rng.random() < 0.05:
        parts += ["", "", 'if __name__ == "__main__":', f"    print(helper_{idx}_0([1, 2, 3]))"]
    return "\n".join(parts) + "\n"


def generate_repo(root: Path, n_files: int, seed: int = 0) -> int:
    """Write a repository of exactly ``n_files`` files under ``root``; return total bytes."""
    rng = random.Random(seed)
    files: dict[str, str] = {
        "README.md": "# Bench\n\nTrain with:\n\n```bash\npip install -r requirements.txt\n"
        "python scripts/train_0.py --lr 0.001 --seed 42\n```\n",
        "requirements.txt": "torch==2.1.2\nnumpy>=1.24\npyyaml\ntransformers==4.36.0\ntqdm\n",
        "Makefile": "train:\n\tpython scripts/train_0.py --epochs 1\n",
        "setup.py": "from setuptools import setup, find_packages\n"
        "setup(name='bench', packages=find_packages('src'), python_requires='>=3.10')\n",
    }
    n_scripts = max(1, n_files // 100)  # ~1% entry points with argparse
    n_configs = max(1, n_files // 50)  # ~2% configs
    for i in range(n_scripts):
        pkg_idx = i % max(1, n_files // 200)
        files[f"scripts/train_{i}.py"] = _SCRIPT.format(
            name=f"exp{i}", pkg=f"src.pkg{pkg_idx}", mod=f"mod{i}", idx=i, epochs=rng.randint(1, 90)
        )
    for i in range(n_configs):
        if i % 3 == 0:
            files[f"configs/exp{i}.json"] = json.dumps(
                {"lr": rng.random() / 100, "epochs": rng.randint(1, 100), "seed": i}, indent=2
            )
        else:
            files[f"configs/exp{i}.yaml"] = (
                f"model:\n  hidden: {rng.choice([64, 128, 256])}\n  dropout: 0.1\n"
                f"train:\n  lr: {rng.random() / 100:.5f}\n  epochs: {rng.randint(1, 100)}\n"
                f"  seed: {i}\ndata:\n  path: data/set{i % 7}\n"
            )
    idx = 0
    while len(files) < n_files:
        pkg = idx // 200
        sub = (idx // 40) % 5
        files[f"src/pkg{pkg}/sub{sub}/mod{idx}.py"] = _module(rng, idx)
        idx += 1
    return _write(root, files)


#: Repository shapes :func:`generate` writes: ``library`` (mostly library modules, ~1% entry
#: scripts) and ``entries`` (pykan-like, scaled: hundreds of entry scripts and notebooks
#: importing one package, many Makefile targets).
SHAPES = ("library", "entries")

_ENTRY_SCRIPT = """\"\"\"Experiment {i}.\"\"\"
import argparse

import numpy as np
import torch
{extra_imports}
from lib.pkg{pa} import mod{ma}
from lib.pkg{pb} import mod{mb}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default={steps})
    parser.add_argument("--seed", type=int, default={i})
    args = parser.parse_args()
    torch.manual_seed(args.seed)
{body}
    model = mod{ma}.Model{ma}()
    for step in range(args.steps):
        loss = mod{mb}.helper_{mb}_0([step, 1.0])
        print(f"step={{step}} loss={{loss}}")
    np.save("outputs/run_{i}.npy", np.zeros(3))


if __name__ == "__main__":
    main()
"""

_ENTRY_BODIES = [
    "    device = torch.device('cuda')\n    x = torch.zeros(3).cuda()",
    "    data = load_dataset('imdb')",
    "    ds = torchvision.datasets.MNIST('data', download=True)",
    "    table = np.load('cache/table_{i}.npy')",
    "    arr = np.zeros(3, dtype=np.float)",
    "    pass",
]
_ENTRY_EXTRA = [
    "",
    "from datasets import load_dataset",
    "import torchvision",
    "",
    "",
    "",
]


def _lib_module(rng: random.Random, idx: int, per_pkg: int) -> str:
    """A module of the ``lib`` package: :func:`_module`'s body plus absolute imports of
    earlier modules (a closure several levels deep, as in pykan's ``kan/``)."""
    text = _module(rng, idx)
    links = []
    for _ in range(rng.randint(0, 3) if idx else 0):
        j = rng.randrange(idx)
        links.append(f"from lib.pkg{j // per_pkg} import mod{j}")
    extra = ""
    if rng.random() < 0.1:
        extra = "\n\ndef to_device(x):\n    return x.cuda()\n"
    elif rng.random() < 0.1:
        extra = "\n\ndef legacy(x):\n    return np.asarray(x, dtype=np.float)\n"
    return "\n".join(links) + ("\n" if links else "") + "import numpy as np\n" + text + extra


def _notebook(i: int, mods: list[tuple[int, int]]) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": [f"# Tutorial {i}\n"]},
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": ["import numpy as np\n", "import torch\n"]
            + [f"from lib.pkg{p} import mod{m}\n" for p, m in mods],
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": [
                f"model = mod{mods[0][1]}.Model{mods[0][1]}()\n",
                "x = torch.zeros(3)\n",
                "print(np.float(1))\n" if i % 7 == 0 else "print(x.sum())\n",
            ],
        },
    ]
    return json.dumps(
        {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1
    )


def generate_entries_repo(root: Path, n_files: int, seed: int = 0) -> int:
    """The ``entries`` shape: ``n_files`` files, ~5% entry scripts under ``experiments/``,
    ~2% notebooks under ``tutorials/``, ~1% configs, a Makefile with a target per 20
    scripts and a README running a few; the rest ``lib/pkgK/modM.py`` modules importing
    each other. Returns total bytes."""
    rng = random.Random(seed)
    n_scripts = max(1, n_files // 20)
    n_notebooks = max(1, n_files // 50)
    n_configs = max(1, n_files // 100)
    n_targets = max(1, n_scripts // 20)
    n_mods = max(2, n_files - n_scripts - n_notebooks - n_configs - 4)
    per_pkg = 100
    make = [".PHONY: all\n", "all: t0\n"]
    for t in range(n_targets):
        make.append(f"t{t}:\n\tpython experiments/run_{t * 20}.py --steps 1\n")
    files: dict[str, str] = {
        "README.md": "# Bench (entries)\n\n```bash\npip install -r requirements.txt\n"
        + "".join(f"python experiments/run_{i}.py\n" for i in range(min(5, n_scripts)))
        + "```\n",
        "requirements.txt": "torch==2.1.2\nnumpy>=1.24\ntorchvision\ndatasets\n",
        "Makefile": "\n".join(make),
        "setup.py": "from setuptools import setup, find_packages\n"
        "setup(name='bench', packages=find_packages(), python_requires='>=3.10')\n",
    }
    for i in range(n_scripts):
        k = i % len(_ENTRY_BODIES)
        ma, mb = rng.randrange(n_mods), rng.randrange(n_mods)
        files[f"experiments/run_{i}.py"] = _ENTRY_SCRIPT.format(
            i=i,
            pa=ma // per_pkg,
            ma=ma,
            pb=mb // per_pkg,
            mb=mb,
            steps=rng.randint(1, 50),
            body=_ENTRY_BODIES[k].format(i=i),
            extra_imports=_ENTRY_EXTRA[k],
        )
    for i in range(n_notebooks):
        mods = [(m // per_pkg, m) for m in (rng.randrange(n_mods) for _ in range(2))]
        files[f"tutorials/tutorial_{i}.ipynb"] = _notebook(i, mods)
    for i in range(n_configs):
        files[f"configs/exp{i}.yaml"] = f"train:\n  lr: {rng.random() / 100:.5f}\n  seed: {i}\n"
    idx = 0
    while len(files) < n_files:
        files[f"lib/pkg{idx // per_pkg}/mod{idx}.py"] = _lib_module(rng, idx, per_pkg)
        idx += 1
    return _write(root, files)


def generate(root: Path, n_files: int, shape: str = "library", seed: int = 0) -> int:
    """Write a repository of ``shape`` (:data:`SHAPES`) of exactly ``n_files`` files."""
    if shape == "entries":
        return generate_entries_repo(root, n_files, seed)
    if shape != "library":
        raise ValueError(f"unknown shape {shape!r} (one of {', '.join(SHAPES)})")
    return generate_repo(root, n_files, seed)


def _write(root: Path, files: dict[str, str]) -> int:
    total = 0
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        path.write_bytes(data)
        total += len(data)
    return total


# -- the worker: one repository, measured in a fresh process -----------------------------------


def _list_files(root: Path) -> list[Path]:
    # The same walk as RepoIndex.from_directory, so both sides read the same files.
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in {".git", "__pycache__", ".venv"})
        out += [Path(dirpath) / f for f in sorted(filenames)]
    return out


def _read_all(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        try:
            with open(path, "rb") as fh:
                total += len(fh.read())
        except OSError:
            pass  # sockets, unreadable files: the index skips them too
    return total


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> int:
    """Reset the peak-RSS mark (Linux >= 4.0) and return the current RSS in bytes.

    ``ru_maxrss`` cannot serve: it survives fork and exec, so a worker would inherit the
    parent's high-water mark (the parent held the generated repository's text).
    """
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    rss = _status_kib("VmRSS")
    return (rss or 0) * 1024


def _peak_rss() -> int:
    hwm = _status_kib("VmHWM")
    if hwm is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return hwm * 1024


def load_detectors() -> tuple[list[Any], list[str]]:
    """All detectors, or those that import (with the names of the skipped ones)."""
    from reprobridge.detect import registry

    try:
        return list(registry.detectors()), []
    except Exception:  # a built-in not written yet, or broken: fall back one by one
        pass
    loaded: list[Any] = []
    skipped: list[str] = []
    for spec in registry.BUILTIN:
        name = spec.partition(":")[0].rsplit(".", 1)[1]
        try:
            loaded.append(registry._load(spec)())
        except Exception as exc:
            skipped.append(f"{name} ({type(exc).__name__})")
    return loaded, skipped


def run_detection(index: Any, dets: list[Any]) -> tuple[Any, list[str], dict[str, float]]:
    """``detect_repo(index, only=dets)``; on failure, detector by detector, skipping failures.

    Returns (context, failed detector descriptions, seconds per detector when run singly).
    """
    from reprobridge.detect import detect_repo
    from reprobridge.detect.base import DetectContext

    try:
        return detect_repo(index, only=dets), [], {}
    except Exception:
        pass
    ctx = DetectContext(index=index)
    failed: list[str] = []
    per: dict[str, float] = {}
    for det in dets:
        start = time.perf_counter()
        try:
            ctx.findings.extend(det.detect(ctx))
        except Exception as exc:
            failed.append(f"{det.name} ({type(exc).__name__}: {str(exc)[:80]})")
        per[det.name] = time.perf_counter() - start
    return ctx, failed, per


def per_detector_times(index_factory: Any, dets: list[Any]) -> dict[str, float]:
    """Seconds each detector takes, run in order on one fresh index (the py_scan is billed
    to the first detector that asks for it)."""
    from reprobridge.detect.base import DetectContext

    ctx = DetectContext(index=index_factory())
    per: dict[str, float] = {}
    for det in dets:
        start = time.perf_counter()
        with contextlib.suppress(Exception):  # failures are reported by the main pass
            ctx.findings.extend(det.detect(ctx))
        per[det.name] = time.perf_counter() - start
    return per


def worker(root: Path, per_detector: bool) -> dict[str, Any]:
    """Measure one repository; the result is printed as one JSON line."""
    from reprobridge.detect.index import RepoIndex

    dets, skipped = load_detectors()
    paths = _list_files(root)
    _read_all(paths)  # warm the page cache for both sides; not timed
    start = time.perf_counter()
    total_bytes = _read_all(paths)
    baseline_s = time.perf_counter() - start

    rss0 = _reset_peak_rss()
    start = time.perf_counter()
    index = RepoIndex.from_directory(root)
    index_s = time.perf_counter() - start
    ctx, failed, _ = run_detection(index, dets)
    recovery_s = time.perf_counter() - start
    rss_growth = _peak_rss() - rss0
    findings = len(ctx.findings)
    n_index = len(index)
    del ctx, index

    # Memory pass under tracemalloc (slower, so not timed): what the index keeps after its
    # one read of every Python file, and the peak of the whole recovery.
    tracemalloc.start()
    index = RepoIndex.from_directory(root)
    index.py_scan()
    retained = tracemalloc.get_traced_memory()[0]
    run_detection(index, dets)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del index

    result: dict[str, Any] = {
        "files": len(paths),
        "indexed": n_index,
        "bytes": total_bytes,
        "baseline_s": baseline_s,
        "index_s": index_s,
        "recovery_s": recovery_s,
        "rss_growth": rss_growth,
        "tracemalloc_peak": peak,
        "index_retained": retained,
        "findings": findings,
        "detectors": [d.name for d in dets],
        "skipped": skipped,
        "failed": failed,
    }
    if per_detector:
        result["per_detector_s"] = per_detector_times(lambda: RepoIndex.from_directory(root), dets)
    return result


def measure(root: Path, per_detector: bool) -> dict[str, Any]:
    """Run :func:`worker` in a fresh interpreter (peak RSS is per process)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", str(root)]
    if per_detector:
        argv.append("--per-detector")
    proc = subprocess.run(argv, check=True, capture_output=True, text=True)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# -- transformers sdist ------------------------------------------------------------------------


def fetch_transformers(version: str, workdir: Path) -> Path | None:
    """Download and unpack the transformers sdist; None (with a message) when that fails."""
    dl = workdir / "download"
    argv = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        f"transformers=={version}", "-d", str(dl), "--quiet",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    archives = sorted(dl.glob("transformers-*.tar.gz"))
    if proc.returncode != 0 or not archives:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no archive"]
        print(f"skipping transformers=={version}: pip download failed: {tail[0]}")
        return None
    dest = workdir / "transformers-src"
    with tarfile.open(archives[0]) as tar:
        tar.extractall(dest, filter="data")
    [top] = list(dest.iterdir())
    return top


# -- report ------------------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / 2**20:8.1f}"


def report(rows: list[tuple[str, dict[str, Any]]]) -> bool:
    """Print the table; True when every ratio is under the target."""
    print(
        f"{'repository':<22}{'files':>7}{'MB':>7}{'read s':>9}{'rb s':>8}{'(index s)':>10}"
        f"{'ratio':>8}{'rss+ MB':>9}{'peak MB':>9}{'index MB':>9}{'peak B/file':>12}"
    )
    ok = True
    for name, r in rows:
        ratio = r["recovery_s"] / r["baseline_s"] if r["baseline_s"] > 0 else float("inf")
        ok = ok and ratio < TARGET_RATIO
        print(
            f"{name:<22}{r['files']:>7}{r['bytes'] / 2**20:7.1f}{r['baseline_s']:9.3f}"
            f"{r['recovery_s']:8.3f}{r['index_s']:10.3f}{ratio:7.1f}x"
            f"{_mb(r['rss_growth'])} {_mb(r['tracemalloc_peak'])} {_mb(r['index_retained'])}"
            f"{r['tracemalloc_peak'] / max(r['files'], 1):12.0f}"
        )
    print(f"target: recovery < {TARGET_RATIO:.0f}x reading the bytes: {'PASS' if ok else 'FAIL'}")
    for name, r in rows:
        print(f"{name}: {len(r['detectors'])} detectors ran: {', '.join(r['detectors'])}")
        if r["skipped"]:
            print(f"{name}: skipped (do not import yet): {', '.join(r['skipped'])}")
        if r["failed"]:
            print(f"{name}: failed and left out: {'; '.join(r['failed'])}")
        if "per_detector_s" in r:
            slow = sorted(r["per_detector_s"].items(), key=lambda kv: -kv[1])[:8]
            print(f"{name}: slowest detectors: " + ", ".join(f"{k} {v:.3f}s" for k, v in slow))
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="5000,10000,20000", help="comma-separated sizes")
    parser.add_argument(
        "--shape", default="library", help=f"generated shapes, comma-separated: {SHAPES}"
    )
    parser.add_argument("--transformers", default="4.44.2", help="sdist version to measure")
    parser.add_argument("--no-transformers", action="store_true", help="skip the sdist")
    parser.add_argument("--per-detector", action="store_true", help="also time each detector")
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it (default: temp)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.per_detector)))
        return 0

    sizes = [int(s) for s in args.files.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="rb-bench-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows: list[tuple[str, dict[str, Any]]] = []
        for n in sizes:
            for shape in [s.strip() for s in args.shape.split(",") if s.strip()]:
                name = f"{'generated' if shape == 'library' else shape}-{n}"
                root = work / name
                if not root.exists():
                    root.mkdir()
                    generate(root, n, shape)
                rows.append((name, measure(root, args.per_detector)))
        if not args.no_transformers:
            src = fetch_transformers(args.transformers, work)
            if src is not None:
                rows.append((f"transformers-{args.transformers}", measure(src, args.per_detector)))
        report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
