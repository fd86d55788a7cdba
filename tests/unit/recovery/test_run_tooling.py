"""Notebook experiments need the tools rb runs them with (issue 9, item 2)."""

from __future__ import annotations

from reprobridge.manifest.notes import RecoveryNotes
from reprobridge.recovery._common import Builder
from reprobridge.recovery.environment import add_run_tooling


def _builder(reqs: list[str], commands: dict[str, str]) -> Builder:
    b = Builder()
    b.put("environment.python_requirements", reqs, ["requirements.txt:1"])
    for exp_id, cmd in commands.items():
        b.put(f"experiments.{exp_id}.command", cmd, ["demo.ipynb:1"])
    return b


def test_notebook_experiment_adds_nbconvert_and_ipykernel_with_provenance() -> None:
    b = _builder(
        ["numpy", "torch==2.1.2"],
        {"demo": "jupyter nbconvert --to notebook --execute --output d.ipynb demo.ipynb"},
    )
    notes = RecoveryNotes()
    add_run_tooling(b, notes)
    assert b.data["environment"]["python_requirements"] == [
        "ipykernel",
        "nbconvert",
        "numpy",
        "torch==2.1.2",
    ]
    sources, _ = b.prov["environment.python_requirements"]
    assert "requirements.txt:1" in sources
    assert any(s.startswith("rb run tooling: nbconvert for experiment(s) demo") for s in sources)
    assert notes.decisions and "nbconvert" in notes.decisions[0]


def test_scripts_only_and_declared_tooling_change_nothing() -> None:
    b = _builder(["numpy"], {"train": "python train.py"})
    add_run_tooling(b, RecoveryNotes())
    assert b.data["environment"]["python_requirements"] == ["numpy"]
    b = _builder(["ipykernel==6.29", "nbconvert>=7"], {"nb": "jupyter nbconvert --execute a"})
    add_run_tooling(b, RecoveryNotes())
    assert b.data["environment"]["python_requirements"] == ["ipykernel==6.29", "nbconvert>=7"]
