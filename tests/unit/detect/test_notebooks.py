"""NotebooksDetector: malformed notebooks warn, outputs give metrics, cells give seeds."""

from __future__ import annotations

import json
import re

from reprobridge.detect import detect_repo
from reprobridge.detect.index import MAX_TEXT_BYTES, RepoIndex
from reprobridge.detect.procedure._printed import output_metrics
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
    assert kinds[("seed", "exp.ipynb")].value.default == 9
    assert kinds[("metric", "accuracy")].value.source.regex.startswith("(?<!\\w)accuracy")
    assert kinds[("experiment", "exp")].value.kind == "notebook"


def _joined_imports(cells: list[dict]) -> dict[str, str]:
    """The definition _notebook_imports keeps: the code cells joined, parsed as one module."""
    import ast

    from reprobridge.detect._notebook import cell_code, cell_source
    from reprobridge.detect._pyast import import_map

    code = "\n".join(cell_code(cell_source(c)) for c in cells if c.get("cell_type") == "code")
    try:
        return import_map(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        return {}


def test_notebook_imports_from_the_cells_trees_equal_the_joined_parse() -> None:
    """The import map is built from each cell's memoized tree; it must stay the joined
    module's map, rebinding order and all-or-nothing failure included."""
    import random

    from reprobridge.detect.procedure.notebooks import _notebook_imports

    pieces = [
        "import numpy as np",
        "import jax.numpy as np",
        "import os.path",
        "from tqdm import tqdm",
        "from tqdm.auto import tqdm as tqdm",
        "def f():\n    import torch as np\n    return np",
        "%matplotlib inline\nimport matplotlib.pyplot as plt",
        "!pip install foo\nfrom a.b import c as np",
        "x = 1",
        "from . import local",
        "print 'python 2'",
        "from __future__ import annotations\nimport re",
        "@decorator",
        "def g():\n    pass",
        "y = (1,",
        "2)",
        "%%bash\nimport nothing",
    ]
    rng = random.Random(14)
    for _ in range(400):
        cells = [
            {
                "cell_type": rng.choice(["code", "code", "code", "markdown"]),
                "source": rng.choice(pieces),
            }
            for _ in range(rng.randint(0, 6))
        ]
        assert _notebook_imports(cells) == _joined_imports(cells), cells
