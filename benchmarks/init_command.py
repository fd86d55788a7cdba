"""`rb init` as users run it, against the ast-parse floor and pipreqs, in the same run.

Usage:
    python benchmarks/init_command.py [--files 5000,20000,50000] [--shape library,entries]
                                      [--corpus DIR[,DIR...]] [--runs 3] [--pipreqs PATH]
                                      [--baseline PYTHONPATH] [--keep DIR]

``benchmarks/init_static.py`` times detection inside one process; this script times the
whole command a user types,
``python -m reprobridge init --agent static --no-lock --no-probe -q ROOT``, in a subprocess: the interpreter, imports, the index, every detector, merging, rendering and
writing reprobridge.toml, flake.nix, repro/ and REPRODUCE.md, ``git add -N``. (``--no-lock``:
locking asks PyPI, which measures the network.) Each repository is a fresh git clone:

* generated repositories of N files (``init_static.generate``, committed), of each
  ``--shape``: ``library`` (``generated-N``: library modules, ~1% entry scripts) and
  ``entries`` (``entries-N``: hundreds of entry scripts and notebooks importing one
  package, many Makefile targets, like pykan's), and
* real repositories given with ``--corpus`` (e.g. ``/work/corpus/PyTorch-Tutorial``:
  scripts plus many notebooks), cloned with ``git clone --local``.

Per round, interleaved, each in its own process (``os.wait4``: CPU = user + sys of the
child and what it reaped, peak RSS = the largest ``ru_maxrss`` among them):

* **floor** -- a fresh interpreter that reads and ``ast.parse``-es every tracked ``.py``
  file and the code cells of every ``.ipynb`` (``json.loads``; IPython ``%``/``!`` lines
  dropped): what any static recovery must at least pay;
* **first** -- ``rb init`` on the clean clone (``git clean``/``reset`` before it);
* **re-run** -- ``rb init`` again on its own output (reads and merges the manifest);
* **base-first**, **base-re-run** -- with ``--baseline DIR``, the same two commands with
  ``PYTHONPATH=DIR`` (another ``reprobridge``, e.g. ``git archive main reprobridge``
  unpacked there), in the same rounds: before/after figures measured interleaved;
* **pipreqs** -- ``pipreqs --print --mode no-pin --use-local ROOT`` (its default: ``.py``
  files only), and **pipreqs-nb**, the same with ``--scan-notebooks`` where the repository
  has notebooks (pipreqs then imports nbconvert), run from pipreqs' own virtual
  environment, when ``--pipreqs`` names its executable.

The ratios are medians of per-round ratios (CPU time), so load drifting between rounds
cancels. Targets (issue 14): first and re-run <= 1.0x the floor on generated repositories;
<= 1.5x pipreqs on a small repository with many notebooks; peak RSS < 150 MB at 50k files.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from init_static import SHAPES, generate

#: A fresh interpreter that parses what static recovery must read (argv[1]: the repository).
FLOOR = r"""
import ast, json, subprocess, sys
root = sys.argv[1]
names = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                       check=True).stdout.decode().split("\0")
for name in names:
    path = root + "/" + name
    if name.endswith(".py"):
        with open(path, "rb") as fh:
            source = fh.read()
    elif name.endswith(".ipynb"):
        with open(path, "rb") as fh:
            cells = json.loads(fh.read()).get("cells", [])
        source = "\n".join(
            line for cell in cells if cell.get("cell_type") == "code"
            for line in "".join(cell.get("source", [])).splitlines()
            if not line.lstrip().startswith(("%", "!"))
        )
    else:
        continue
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        pass
"""


@dataclass(frozen=True)
class Run:
    """One child process: wall and CPU seconds, peak RSS in MB."""

    wall: float
    cpu: float
    rss_mb: float


def run(argv: list[str], cwd: Path, pythonpath: str | None = None) -> Run:
    """Run ``argv`` to the end (output discarded); fail loudly on a non-zero exit.
    ``pythonpath``: the PYTHONPATH it runs with (another ``reprobridge``)."""
    env = _env()
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]}... exited {proc.returncode}: {err.decode()[-2000:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ANTHROPIC_API_KEY", None)  # static recovery only, whatever the caller has set
    # Users run rb from compiled .pyc files; a shell with PYTHONDONTWRITEBYTECODE set would
    # recompile every module on each run (~1 s of a small repository's run, not rb's cost).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "bench"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "bench@example.invalid"
    return env


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=_env())


def generated_name(shape: str, n_files: int) -> str:
    """``generated-N`` for the ``library`` shape (the rows before shapes existed),
    ``entries-N`` for the ``entries`` shape."""
    return f"{'generated' if shape == 'library' else shape}-{n_files}"


def make_generated(workdir: Path, n_files: int, shape: str = "library") -> Path:
    root = workdir / generated_name(shape, n_files)
    root.mkdir()
    generate(root, n_files, shape)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "generated")
    return root


def make_clone(workdir: Path, source: Path) -> Path:
    root = workdir / source.name
    subprocess.run(
        ["git", "clone", "-q", "--local", str(source), str(root)], check=True, capture_output=True
    )
    return root


def reset(root: Path) -> None:
    """Back to the committed tree: what `rb init` wrote (and `git add -N`-ed) is removed."""
    _git(root, "reset", "-q", "--hard")
    _git(root, "clean", "-qfdx")


def pipreqs_argvs(exe: str, root: Path) -> dict[str, list[str]]:
    """pipreqs as it runs by default (``.py`` files only), and with ``--scan-notebooks``
    when the repository has notebooks and the installed pipreqs can read them."""
    base = [exe, "--print", "--mode", "no-pin", "--use-local"]
    out = {"pipreqs": [*base, str(root)]}
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
    notebooks = subprocess.run(
        ["git", "-C", str(root), "ls-files", "*.ipynb"], capture_output=True, text=True, check=True
    ).stdout
    if "--scan-notebooks" in help_text and notebooks.strip():
        out["pipreqs-nb"] = [*base, "--scan-notebooks", str(root)]
    return out


def measure(
    root: Path, runs: int, pipreqs: str | None, baseline: str | None = None
) -> dict[str, list[Run]]:
    # --no-probe: the probe runs the chosen experiments (installs, a sandbox): what is
    # measured here is static recovery.
    rb = [
        *(sys.executable, "-m", "reprobridge", "init"),
        *("--agent", "static", "--no-lock", "--no-probe", "-q"),
    ]
    floor = [sys.executable, "-c", FLOOR, str(root)]
    others = pipreqs_argvs(pipreqs, root) if pipreqs else {}
    # cwd outside any checkout: `python -m` puts the cwd first on sys.path, and PYTHONPATH
    # (not the cwd) must say which reprobridge is measured.
    cwd = root.parent
    out: dict[str, list[Run]] = {k: [] for k in ("floor", "first", "re-run", *PIPREQS, *BASE)}
    reset(root)
    run(floor, cwd)  # warm the page cache and .pyc files; not counted
    for argv in others.values():
        run(argv, cwd)
    for _ in range(runs):
        out["floor"].append(run(floor, cwd))
        reset(root)
        out["first"].append(run([*rb, str(root)], cwd))
        out["re-run"].append(run([*rb, str(root)], cwd))
        if baseline is not None:
            reset(root)
            out["base-first"].append(run([*rb, str(root)], cwd, baseline))
            out["base-re-run"].append(run([*rb, str(root)], cwd, baseline))
        for key, argv in others.items():
            out[key].append(run(argv, cwd))
    return out


PIPREQS = ("pipreqs", "pipreqs-nb")
#: ``--baseline``'s runs: the same two commands with another ``reprobridge``.
BASE = ("base-first", "base-re-run")


def _median_ratio(num: list[Run], den: list[Run]) -> float:
    return statistics.median(a.cpu / b.cpu for a, b in zip(num, den, strict=True) if b.cpu > 0)


def report(name: str, files: int, runs: dict[str, list[Run]]) -> list[str]:
    def med(key: str, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in runs[key])

    cells = [name, str(files)]
    for key in ("floor", "first", "re-run", *PIPREQS):
        cells.append(f"{med(key, 'cpu'):.2f} / {med(key, 'wall'):.2f}" if runs[key] else "—")
    cells.append(f"{_median_ratio(runs['first'], runs['floor']):.2f}x")
    cells.append(f"{_median_ratio(runs['re-run'], runs['floor']):.2f}x")
    for key in PIPREQS:
        for rb in ("first", "re-run"):
            cells.append(f"{_median_ratio(runs[rb], runs[key]):.2f}x" if runs[key] else "—")
    cells.append(f"{max(r.rss_mb for r in runs['first'] + runs['re-run']):.0f}")
    cells.append(f"{med('floor', 'rss_mb'):.0f}")
    if runs["base-first"]:
        for key in BASE:
            cells.append(f"{med(key, 'cpu'):.2f} / {med(key, 'wall'):.2f}")
        cells.append(f"{_median_ratio(runs['base-first'], runs['floor']):.2f}x")
        cells.append(f"{_median_ratio(runs['first'], runs['base-first']):.2f}x")
        cells.append(f"{_median_ratio(runs['re-run'], runs['base-re-run']):.2f}x")
        cells.append(f"{max(r.rss_mb for r in runs['base-first'] + runs['base-re-run']):.0f}")
    return cells


HEADER = [
    "repository",
    "files",
    "floor CPU/wall s",
    "first CPU/wall s",
    "re-run CPU/wall s",
    "pipreqs CPU/wall s",
    "pipreqs --scan-notebooks CPU/wall s",
    "first/floor",
    "re-run/floor",
    "first/pipreqs",
    "re-run/pipreqs",
    "first/pipreqs-nb",
    "re-run/pipreqs-nb",
    "rb peak RSS MB",
    "floor RSS MB",
]
#: Columns added with ``--baseline``.
BASE_HEADER = [
    "baseline first CPU/wall s",
    "baseline re-run CPU/wall s",
    "baseline first/floor",
    "first/baseline first",
    "re-run/baseline re-run",
    "baseline peak RSS MB",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="5000,20000,50000", help="generated sizes ('' none)")
    parser.add_argument(
        "--shape", default="library", help=f"generated shapes, comma-separated: {SHAPES}"
    )
    parser.add_argument("--corpus", default="", help="real repositories (git), comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds (medians)")
    parser.add_argument("--pipreqs", default=None, help="pipreqs executable (its own venv)")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    parser.add_argument(
        "--baseline",
        default=None,
        help="PYTHONPATH of another reprobridge (a `git archive` of a commit), timed in the "
        "same rounds",
    )
    args = parser.parse_args(argv)

    if args.pipreqs and not shutil.which(args.pipreqs):
        raise SystemExit(f"--pipreqs {args.pipreqs}: not an executable")
    sizes = [int(n) for n in args.files.split(",") if n.strip()]
    corpus = [Path(p) for p in args.corpus.split(",") if p.strip()]
    header = HEADER + (BASE_HEADER if args.baseline else [])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with tempfile.TemporaryDirectory(prefix="rb-init-bench-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        shapes = [s.strip() for s in args.shape.split(",") if s.strip()]
        if unknown := set(shapes) - set(SHAPES):
            raise SystemExit(f"--shape: unknown {', '.join(sorted(unknown))} (one of {SHAPES})")
        repos = [
            (generated_name(shape, n), n, lambda n=n, s=shape: make_generated(workdir, n, s))
            for n in sizes
            for shape in shapes
        ]
        repos += [(p.name, 0, lambda p=p: make_clone(workdir, p)) for p in corpus]
        for name, files, make in repos:
            root = make()
            if not files:
                files = len(
                    subprocess.run(
                        ["git", "-C", str(root), "ls-files"],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout.splitlines()
                )
            runs = measure(root, args.runs, args.pipreqs, args.baseline)
            print("| " + " | ".join(report(name, files, runs)) + " |", flush=True)
            if args.keep is None:
                shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
