"""NotebooksDetector: malformed notebooks warn, outputs give metrics, cells give seeds."""

from __future__ import annotations

import json
import re

from reprobridge.detect import detect_repo
from reprobridge.detect.index import MAX_TEXT_BYTES, RepoIndex
from reprobridge.detect.notebooks import output_metrics
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"notebooks"}))


def nb(*cells: dict) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)})


def test_malformed_notebooks_warn_and_do_not_raise(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "a.ipynb": "{not json",
            "b.ipynb": json.dumps({"worksheets": []}),
            "c.ipynb": "[1, 2]",
            "d.ipynb": b"\x00\x00binary",
            "e.ipynb": b"{" + b" " * (MAX_TEXT_BYTES + 1) + b"}",
        },
    )
    assert ctx.findings == []
    assert sorted(w.path or "" for w in ctx.warnings) == [
        "a.ipynb",
        "b.ipynb",
        "c.ipynb",
        "d.ipynb",
        "e.ipynb",
    ]


def test_output_metrics_regexes_match_the_printed_text() -> None:
    text = "Epoch: 3 | val acc: 0.91\nloss = -1.2e-03\nlr: 0.1\nstep=10, BLEU=27.5\n"
    found = {name: (regex, value) for name, regex, value, _ in output_metrics(text)}
    assert set(found) == {"val_acc", "loss", "bleu"}
    for regex, value in found.values():
        assert re.search(regex, text).group(1) == value  # type: ignore[union-attr]


def test_magics_do_not_hide_seeds_and_string_outputs_work(make_repo) -> None:
    cells = (
        {
            "cell_type": "code",
            "source": "!pip install x\n%load_ext autoreload\nimport random\nrandom.seed(9)",
            "outputs": [],
        },
        {
            "cell_type": "code",
            "source": "print(acc)",
            "outputs": [{"output_type": "stream", "text": "accuracy: 88.5%\n"}, "junk"],
        },
    )
    ctx = run(make_repo, {"exp.ipynb": nb(*cells)})
    kinds = {(f.kind, f.key): f for f in ctx.findings}
    assert kinds[("seed", "exp.ipynb")].value["default"] == 9
    assert kinds[("metric", "accuracy")].value["source"]["regex"].startswith("(?<!\\w)accuracy")
    assert kinds[("experiment", "exp")].value["kind"] == "notebook"
