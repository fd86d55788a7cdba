"""Per-file facts are computed once per run, not once per experiment that reaches the file.

Many entries sharing one package (pykan: 96 notebooks importing ``kan/``) made the fetch
and drift detectors walk the same modules once per entry, the services detector parse the
Makefile once per make target, and each import closure cost as much as the repository has
files. Counting calls replaces a timed assertion.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reprobridge.detect import _select, detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure import drift, fetch, makefile, services

ENTRIES = 12
MODULES = 5


def _repo(root: Path) -> None:
    """``ENTRIES`` scripts, each importing ``lib/m0.py``, which imports a chain of
    ``MODULES`` modules (one with a removed numpy name, one with a download); a Makefile
    with a target per script."""
    (root / "lib").mkdir()
    for i in range(MODULES):
        nxt = f"from lib import m{i + 1}\n" if i + 1 < MODULES else ""
        body = "    return np.float(x)\n" if i == 2 else "    return x\n"
        extra = "\ndef get():\n    return load_dataset('imdb')\n" if i == 3 else ""
        head = "from datasets import load_dataset\n" if i == 3 else ""
        (root / "lib" / f"m{i}.py").write_text(
            f"import numpy as np\n{head}{nxt}\n\ndef f{i}(x):\n{body}{extra}"
        )
    (root / "scripts").mkdir()
    make = []
    for i in range(ENTRIES):
        (root / "scripts" / f"run_{i}.py").write_text(
            "from lib import m0\n\n\ndef main():\n    print(m0.f0(1))\n\n\n"
            'if __name__ == "__main__":\n    main()\n'
        )
        make.append(f"t{i}:\n\tpython scripts/run_{i}.py\n")
    (root / "Makefile").write_text("\n".join(make))
    (root / "requirements.txt").write_text("numpy==1.26.4\ndatasets\n")


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls = [0]
    real: Callable[..., Any] = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_shared_modules_are_analysed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _repo(tmp_path)
    io = _count(monkeypatch, fetch, "io_calls")
    refs = _count(monkeypatch, drift, "references")
    make = _count(monkeypatch, makefile, "parse_makefile")
    ctx = detect_repo(RepoIndex.from_directory(tmp_path))
    py_files = ENTRIES + MODULES
    # Every entry reaches every module: once per entry would be ENTRIES * (MODULES + 1).
    assert 0 < io[0] <= py_files
    assert 0 < refs[0] <= py_files
    assert make[0] == 1  # the makefile detector's parse, reused by the services detector
    entries = {f"scripts/run_{i}.py" for i in range(ENTRIES)}
    # ...and each entry still gets its findings: the module's removed name, under each entry.
    drifted = {f.value.entry for f in ctx.findings if f.kind == "api_drift"}
    assert drifted == entries
    services_ = [f for f in ctx.findings if f.kind == "service"]
    assert services_ == [] or all(f.detector == services.ServicesDetector.name for f in services_)


def test_closures_do_not_rebuild_the_file_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(tmp_path)
    index = RepoIndex.from_directory(tmp_path)
    every = len(index.py_scan())
    built: list[int] = []

    def counting(items: Any = ()) -> frozenset[Any]:
        made = frozenset(items)
        built.append(len(made))
        return made

    # A set of every Python path built per closure made each experiment cost as much as
    # the repository has files (experiments x files in all).
    monkeypatch.setattr(_select, "frozenset", counting, raising=False)
    detect_repo(index)
    assert [n for n in built if n == every] == []


def test_an_explicit_path_set_gives_the_same_closure(tmp_path: Path) -> None:
    _repo(tmp_path)
    ctx = detect_repo(RepoIndex.from_directory(tmp_path))
    paths = set(ctx.index.py_scan())
    default = list(_select.import_closure(ctx, "scripts/run_0.py", None, 60))
    explicit = list(_select.import_closure(ctx, "scripts/run_0.py", paths, 60))
    assert default == explicit
    assert [p for p, _ in default] == ["scripts/run_0.py", *(f"lib/m{i}.py" for i in range(5))]
    # A smaller limit is its own walk, not a cut of the cached one's order.
    assert [p for p, _ in _select.import_closure(ctx, "scripts/run_0.py", None, 2)] == [
        "scripts/run_0.py",
        "lib/m0.py",
    ]
