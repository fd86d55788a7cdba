"""Files a run writes beside the repository's own are not indexed (reprobridge.detect.index).

Running a notebook experiment's smoke tier by hand leaves its copy (`demo_rb_smoke.ipynb`)
and the executed notebook (`demo.executed.ipynb`) next to `demo.ipynb`; the next `rb init`
made each an experiment of its own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex

NOTEBOOK = {
    "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": ["print(1)\n"]}],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_a_runs_copies_are_not_the_repositorys_files(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in (
        "demo.ipynb",
        "demo_rb_smoke.ipynb",
        "demo.executed.ipynb",
        "sub/x.executed.ipynb",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(json.dumps(NOTEBOOK))
    (tmp_path / "train.py").write_text("print('loss: 1')\n")
    (tmp_path / "train_rb_smoke.py").write_text("print('loss: 1')\n")

    index = RepoIndex.from_git(tmp_path)

    assert sorted(f.path for f in index.files) == ["demo.ipynb", "train.py"]
    experiments = [f.key for f in detect_repo(index).findings if f.kind == "experiment"]
    assert experiments == ["demo"]
