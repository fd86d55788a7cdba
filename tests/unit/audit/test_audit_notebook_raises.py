"""Notebook cells that raise (issue 9): teaching notebooks raise on purpose, often unmarked.

`rb init` runs a notebook with ``--allow-errors`` so it runs to the end; the auditor reads
the executed notebook and names every cell that raised without the ``raises-exception``
tag: the procedure is then ``incomplete`` and the audit never passes. A cell that raised
shows no metric. A tagged cell that raised is what its authors said it does.

Jupyter is not a dependency of rb or its tests (see test_audit_notebook.py), so a stand-in
``jupyter`` really executes the cells in one namespace, as a kernel would, and follows
nbconvert's rules: a cell that raises stops the run (exit 1, nothing written) unless the
cell is tagged ``raises-exception`` or ``--allow-errors`` was given; an ``error`` output
records what raised.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reprobridge.artifacts import check
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.manifest.io import load_manifest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/repos"
FIXTURE = FIXTURES / "zero-notebook-raising-cells"

FAKE_JUPYTER = r"""#!/usr/bin/env python3
# `jupyter nbconvert --to notebook --execute [--allow-errors] ... --output-dir DIR --output
# NAME NB`: executes NB's code cells with exec() in one namespace, as nbclient would.
import contextlib, io, json, os, sys
args = sys.argv[1:]
assert args[:1] == ["nbconvert"] and "--execute" in args, args
allow = "--allow-errors" in args
name = args[args.index("--output") + 1]
folder = args[args.index("--output-dir") + 1]
nb_path = [a for a in args if a.endswith(".ipynb") and a != name][-1]
nb = json.load(open(nb_path, encoding="utf-8"))
ns = {"__name__": "__main__"}
for cell in nb["cells"]:
    if cell["cell_type"] != "code":
        continue
    out = io.StringIO()
    cell["outputs"] = []
    try:
        with contextlib.redirect_stdout(out):
            exec("".join(cell["source"]), ns)
        error = None
    except Exception as exc:
        error = exc
    if out.getvalue():
        cell["outputs"].append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})
    if error is not None:
        cell["outputs"].append({"output_type": "error", "ename": type(error).__name__,
                                "evalue": str(error), "traceback": []})
        if not allow and "raises-exception" not in cell["metadata"].get("tags", []):
            print(f"CellExecutionError: {type(error).__name__}: {error}", file=sys.stderr)
            sys.exit(1)
with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
    json.dump(nb, fh)
"""


@pytest.fixture
def lessons_repo(tmp_path: Path, init_without_requirements: Callable[[Path], Path]) -> Path:
    root = tmp_path / "lessons"
    root.mkdir()
    shutil.copy2(FIXTURE / "lessons.ipynb", root)
    return init_without_requirements(root)


@pytest.fixture
def fake_jupyter(tool_on_run_path: Callable[[str, str], Path]) -> Path:
    return tool_on_run_path("jupyter", FAKE_JUPYTER)


def test_unmarked_raising_cells_leave_the_procedure_incomplete_and_are_named(
    lessons_repo: Path, fake_jupyter: Path
) -> None:
    result = run_audit(lessons_repo, AuditOptions(runs=1, backend="host"))

    v = result.summary["experiments"]["lessons"]
    procedure = v["procedure"]
    assert procedure["status"] == "incomplete", json.dumps(v, indent=1)
    reason = procedure["reason"]
    # Every unmarked cell that raised, with its error; the tagged cell 4 is not among them.
    assert (
        "lessons.executed.ipynb: 2 cell(s) raised that nothing marks as meant to raise: "
        "cell 5 (TypeError: 'tuple' object does not support item assignment); "
        "cell 7 (RuntimeError: the held-out split is not in this repository)"
    ) in reason
    # The tagged cell is named for the record, as raised as marked, not as a gap.
    assert "as marked: run 1: lessons.executed.ipynb: cell 4 (IndexError: list index" in reason
    assert reason.count("cell 4") == 1
    assert "raises-exception" in reason  # what would make it judgeable
    # Never a pass: the overall verdict names the gap.
    assert result.summary["verdict"] == "INCOMPLETE"
    assert any("lessons: procedure incomplete" in line for line in result.summary["incomplete"])
    # The run went on past the cells that raised; the metric is read from cell 6, not from
    # cell 7, which printed 0.1000 and then raised.
    assert v["per_metric"]["test_accuracy"]["values"] == [0.6667]
    run = result.path / "runs/lessons/0"
    executed = json.loads((run / "files/lessons.executed.ipynb").read_text())
    errors = [
        o for c in executed["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"
    ]
    assert [e["ename"] for e in errors] == ["IndexError", "TypeError", "RuntimeError"]
    assert verify_audit(result.path).ok  # rb verify re-derives the same verdict


def test_cells_tagged_raises_exception_are_what_their_authors_said(
    lessons_repo: Path, fake_jupyter: Path
) -> None:
    nb_path = lessons_repo / "lessons.ipynb"
    nb = json.loads(nb_path.read_text())
    for number in (5, 7):
        nb["cells"][number - 1]["metadata"]["tags"] = ["raises-exception"]
    nb_path.write_text(json.dumps(nb, indent=1))
    subprocess.run(["git", "-C", str(lessons_repo), "commit", "-qam", "tag"], check=True)

    result = run_audit(lessons_repo, AuditOptions(runs=1, backend="host"))

    v = result.summary["experiments"]["lessons"]
    assert v["procedure"] == {
        "status": "pass",
        "reason": "all 1 run(s) completed (notebook cells raised as marked: run 1: "
        "lessons.executed.ipynb: cell 4 (IndexError: list index out of range); cell 5 "
        "(TypeError: 'tuple' object does not support item assignment); cell 7 "
        "(RuntimeError: the held-out split is not in this repository))",
    }
    assert v["per_metric"]["test_accuracy"]["values"] == [0.6667]


def test_cells_the_saved_outputs_show_raising_are_expected_to_raise_that_error(
    tmp_path: Path, init_without_requirements: Callable[[Path], Path], fake_jupyter: Path
) -> None:
    root = tmp_path / "saved"
    root.mkdir()
    shutil.copy2(FIXTURES / "zero-notebook-saved-errors/lesson.ipynb", root)
    init_without_requirements(root)
    manifest, _ = load_manifest(root / "reprobridge.toml")
    (output,) = manifest.experiments["lesson"].outputs
    # rb init lists what the authors saw raise under the executed notebook's output.
    assert [(r.cell, r.error) for r in output.raises] == [(3, "ZeroDivisionError"), (4, "KeyError")]
    guide = (root / "REPRODUCE.md").read_text()
    assert "- `lesson.executed.ipynb` cell 4: `KeyError`" in guide
    assert guide.count("**Notebook cells that raise**: notebooks run with `--allow-errors`") == 1

    result = run_audit(root, AuditOptions(runs=1, backend="host"))

    reason = result.summary["experiments"]["lesson"]["procedure"]["reason"]
    # Cell 3 raised what the authors saw; cell 4 raised another error than theirs, and
    # cell 5 (a file absent from the repository) did not raise for them at all.
    assert "lesson.executed.ipynb: 2 cell(s) raised" in reason
    assert (
        "cell 4 (ValueError: invalid literal for int() with base 10: 'wide'; expected KeyError)"
        in reason
    )
    assert "cell 5 (FileNotFoundError: [Errno 2] No such file or directory: " in reason
    # Cell 3 raised as the authors saw it: named for the record, not as a gap.
    assert "(notebook cells raised as marked: run 1: lesson.executed.ipynb: cell 3 " in reason
    assert reason.count("cell 3") == 1
    assert verify_audit(result.path).ok


def test_a_cell_raising_another_error_than_the_declared_one_is_named(tmp_path: Path) -> None:
    spec = _executed(tmp_path, [_code(STREAM), _code(ERROR)])
    spec["outputs"][0]["raises"] = [{"cell": 2, "error": "KeyError"}]

    (cell,) = check.unexpected_raises(spec, str(tmp_path))["nb.executed.ipynb"]

    assert cell.describe() == "cell 2 (ValueError: List arity mismatch: 5 != 4; expected KeyError)"
    spec["outputs"][0]["raises"] = [{"cell": 2, "error": "ValueError"}]
    assert check.unexpected_raises(spec, str(tmp_path)) == {}


def _executed(tmp_path: Path, cells: list[dict[str, Any]]) -> dict[str, Any]:
    (tmp_path / "nb.executed.ipynb").write_text(json.dumps({"cells": cells}))
    return {
        "outputs": [{"path": "nb.executed.ipynb"}],
        "metrics": {"acc": {"source": {"regex": r"acc=([0-9.]+)"}, "min": 0.5}},
    }


def _code(*outputs: dict[str, Any], tags: list[str] | None = None) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {"tags": tags or []}, "outputs": list(outputs)}


ERROR = {
    "output_type": "error",
    "ename": "ValueError",
    "evalue": "List arity mismatch: 5 != 4\nmore",
}
STREAM = {"output_type": "stream", "name": "stdout", "text": "acc=0.9\n"}


def test_check_py_reports_unmarked_raising_cells_incomplete(tmp_path: Path) -> None:
    spec = _executed(
        tmp_path, [{"cell_type": "markdown", "source": "x"}, _code(STREAM), _code(ERROR)]
    )

    results = check.check_experiment(spec, "full", "", str(tmp_path))

    lines = [r.line for r in results]
    assert lines[0].startswith("PASS acc = 0.9")
    assert lines[-1] == (
        "INCOMPLETE output nb.executed.ipynb: 1 cell(s) raised that nothing marks as meant "
        "to raise: cell 3 (ValueError: List arity mismatch: 5 != 4)"
    )
    # The metric held, but the run is not a pass: a cell raised that nothing marks.
    assert check.overall(results, ["acc"]) == "INCOMPLETE"


def test_check_py_passes_a_run_whose_raising_cells_are_tagged(tmp_path: Path) -> None:
    spec = _executed(tmp_path, [_code(STREAM), _code(ERROR, tags=["raises-exception"])])

    results = check.check_experiment(spec, "full", "", str(tmp_path))

    assert check.overall(results, ["acc"]) == "PASS"
    assert [(c.cell, c.expected) for c in check.raised_cells(tmp_path / "nb.executed.ipynb")] == [
        (2, True)
    ]
