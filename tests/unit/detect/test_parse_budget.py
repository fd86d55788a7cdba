"""Static recovery parses only what needs parsing (the behaviour behind the benchmark).

Counting ``ast.parse`` calls replaces a timed assertion: on a generated 2,000-file
repository (the benchmark's own generator: 20 argparse scripts, ~100 library modules with a
``__main__`` guard) the detectors together parse a bounded number of files, not every one.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect._select import procedure_files
from reprobridge.detect.base import DetectContext
from reprobridge.detect.index import AST_CACHE_BYTES, RepoIndex

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "init_static.py"


def _generate(root: Path, n: int) -> None:
    spec = importlib.util.spec_from_file_location("init_static_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate_repo(root, n)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gen2000")
    _generate(root, 2000)
    return root


def test_recovery_parses_a_bounded_number_of_files(
    generated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = ast.parse

    def counting(source: Any, filename: str = "<unknown>", *args: Any, **kwargs: Any) -> Any:
        calls.append(filename)
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    index = RepoIndex.from_directory(generated)
    ctx = detect_repo(index)
    py_files = len(index.python_files())
    # Entry points (20 scripts + the ~5% of modules with a __main__ guard) and setup.py:
    # not the ~1,950 library modules. Before: outputs alone parsed nearly every file.
    assert len(calls) <= 150, (len(calls), py_files)
    # The AST cache serves every later detector (setup.py: its detector parses it itself).
    procedure = [c for c in calls if c != "setup.py"]
    assert len(set(procedure)) == len(procedure)
    # ... and the recovery still finds what the scripts declare.
    params = {f.key for f in ctx.of_kind("param")}
    assert "scripts/train_0.py::lr" in params
    assert any(f.key == "scripts/train_0.py" for f in ctx.of_kind("seed"))
    assert "top1_acc" in {f.key for f in ctx.of_kind("metric")}


def test_the_cap_bounds_parsing_and_says_so(generated: Path) -> None:
    index = RepoIndex.from_directory(generated)
    ctx = DetectContext(index=index)
    chosen = procedure_files(ctx, re.compile(rb"import"), "outputs", cap=7)
    assert len(chosen) == 7
    # entry points come first
    assert all(p.startswith("scripts/") for p in chosen)
    assert any("analysed only the 7 most relevant" in w.message for w in ctx.warnings)


@pytest.mark.slow
def test_the_ast_cache_is_bounded_by_source_bytes(tmp_path: Path) -> None:
    body = "x = [" + ", ".join(str(i) for i in range(40_000)) + "]\n"  # ~270 KB each
    for i in range(40):
        (tmp_path / f"m{i}.py").write_text(body)
    index = RepoIndex.from_directory(tmp_path)
    for i in range(40):
        assert index.parse_python(f"m{i}.py") is not None
    assert index._ast_bytes <= AST_CACHE_BYTES
    assert sum(size for _, size in index._asts.values()) == index._ast_bytes
    assert index.parse_count == 40
    index.parse_python("m39.py")  # the most recent one is still cached
    assert index.parse_count == 40
