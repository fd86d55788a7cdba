"""Notebook experiments audited headless (issue 3, item 1).

`rb init` makes a notebook an experiment run as ``jupyter nbconvert --to notebook
--execute --output <stem>.executed.ipynb <nb>`` and declares the executed notebook as its
output; the auditor keeps that file as evidence, and regex metric sources read the text
outputs of its cells (an executed notebook prints there, not to stdout).

The real nbconvert is NOT exercised here: Jupyter, nbconvert, nbclient and a kernel are
not dependencies of rb or its tests, and executing a kernel inside the sandbox is the
notebook's business, not the auditor's. A fake ``jupyter`` on the run's PATH stands in for
it: it reads the notebook, "executes" it by writing fresh outputs (values the committed
notebook does not show) and saves the executed copy where nbconvert would. What is tested
is everything around the tool: the command rb init writes, the declared output, the copy
into the bundle, and metric extraction from the executed notebook.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.artifacts import check
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.manifest.io import load_manifest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/repos/notebook-with-outputs"

FAKE_JUPYTER = r"""#!/usr/bin/env python3
# Stands in for `jupyter nbconvert --to notebook --execute [--output-dir DIR] --output
# NAME NB` (see the test module's docstring): writes NB's executed copy, with new outputs,
# where nbconvert 7.0-7.16 would: NAME without its .ipynb, plus ".nbconvert" unless an
# output directory is given, plus .ipynb, in DIR (default: next to NB).
import json, os, sys
args = sys.argv[1:]
assert args[:1] == ["nbconvert"] and "--execute" in args, args
name = args[args.index("--output") + 1]
nb_path = [a for a in args if a.endswith(".ipynb") and a != name][-1]
base = name[: -len(".ipynb")] if name.endswith(".ipynb") else name
if "--output-dir" in args:
    folder = args[args.index("--output-dir") + 1]
else:
    folder, base = os.path.dirname(nb_path), base + ".nbconvert"
name = base + ".ipynb"
nb = json.load(open(nb_path, encoding="utf-8"))
for cell in nb["cells"]:
    if cell["cell_type"] == "code":
        cell["outputs"] = []
nb["cells"][-1]["outputs"] = [
    {"output_type": "stream", "name": "stdout",
     "text": ["Epoch: 2 | train loss: 0.333\n", "Test accuracy: 0.9377\n"]},
    {"output_type": "execute_result", "execution_count": 3, "metadata": {},
     "data": {"text/plain": ["{'top1_acc=0.951'}"]}},
]
out = os.path.join(folder, name)
with open(out, "w", encoding="utf-8") as fh:
    json.dump(nb, fh)
print(f"[NbConvertApp] Writing {os.path.getsize(out)} bytes to {out}", file=sys.stderr)
"""


@pytest.fixture
def notebook_repo(tmp_path: Path, init_without_requirements: Callable[[Path], Path]) -> Path:
    root = tmp_path / "nb-paper"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(FIXTURE / "notebooks/linear_probe.ipynb", root / "notebooks")
    # rb init lists the notebook's imports (numpy, torch) and nbconvert/ipykernel; the
    # fake jupyter stands in for all of them, so the host backend installs nothing.
    return init_without_requirements(root)


@pytest.fixture
def fake_jupyter(tool_on_run_path: Callable[[str, str], Path]) -> Path:
    """The stand-in ``jupyter`` first on the runs' PATH."""
    return tool_on_run_path("jupyter", FAKE_JUPYTER)


def test_rb_init_declares_the_executed_notebook_as_output(notebook_repo: Path) -> None:
    manifest, _ = load_manifest(notebook_repo / "reprobridge.toml")
    exp = manifest.experiments["linear_probe"]
    assert exp.kind == "notebook"
    assert exp.command == (
        "jupyter nbconvert --to notebook --execute --allow-errors --ExecutePreprocessor.timeout=-1 "
        "--output-dir notebooks --output linear_probe.executed.ipynb notebooks/linear_probe.ipynb"
    )
    assert [o.path for o in exp.outputs] == ["notebooks/linear_probe.executed.ipynb"]


def test_notebook_experiment_audits_from_the_executed_notebook(
    notebook_repo: Path, fake_jupyter: Path
) -> None:
    result = run_audit(notebook_repo, AuditOptions(runs=1, backend="host"))

    v = result.summary["experiments"]["linear_probe"]
    assert v["procedure"]["status"] == "pass", json.dumps(v, indent=1)
    per = {name: m["stats"]["mean"] for name, m in v["per_metric"].items()}
    # The executed notebook's values, not the ones saved in the committed notebook.
    assert per == {"test_accuracy": 0.9377, "top1_acc": 0.951, "train_loss": 0.333}
    run = result.path / "runs/linear_probe/0"
    kept = run / "files/notebooks/linear_probe.executed.ipynb"
    assert "Test accuracy: 0.9377" in kept.read_text()  # the executed notebook is evidence
    status = json.loads((run / "status.json").read_text())
    assert "files/notebooks/linear_probe.executed.ipynb" in status["files"]
    assert "Test accuracy" not in (run / "stdout.log").read_text()  # not from stdout
    assert verify_audit(result.path).ok


def test_metric_log_appends_declared_notebook_outputs(tmp_path: Path) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "acc=0.1"},  # not an output
            {
                "cell_type": "code",
                "outputs": [
                    {"output_type": "stream", "text": "acc=0.5"},
                    {"output_type": "display_data", "data": {"text/plain": ["acc", "=0.7"]}},
                ],
            },
            {
                # A cell that raised shows no metric: what it printed first is no result.
                "cell_type": "code",
                "outputs": [
                    {"output_type": "stream", "text": "acc=0.9\n"},
                    {"output_type": "error", "ename": "E", "evalue": "acc=0.0"},
                ],
            },
        ]
    }
    (tmp_path / "run.executed.ipynb").write_text(json.dumps(nb))
    (tmp_path / "broken.ipynb").write_text("{not json")
    spec = {"outputs": [{"path": "run.executed.ipynb"}, {"path": "broken.ipynb"}]}
    assert check.metric_log(spec, "log line", str(tmp_path)) == "log line\nacc=0.5\nacc=0.7\n"
    assert check.metric_log({"outputs": []}, "log", str(tmp_path)) == "log"
    value = check.extract_metric({"regex": "acc=([0-9.]+)"}, "acc=0.2\n", str(tmp_path))
    assert value == 0.2  # extract_metric alone reads the log; metric_log adds notebooks
