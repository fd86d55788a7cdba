"""ImportsDetector: undeclared third-party imports, cheaply."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.findings import RequirementValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"requirements", "imports"}))


def flagged(ctx) -> dict[str, str]:
    return {
        f.key: f.sources()[0]
        for f in ctx.of_kind("python_requirement")
        if f.value.declared is False
    }


def test_alternative_providers_count_as_declared(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": "tensorflow-cpu==2.15\ncupy-cuda12x\nPillow-SIMD\n",
            "a.py": "import tensorflow as tf\nimport cupy\nfrom PIL import Image\n",
        },
    )
    assert flagged(ctx) == {}


def test_multi_import_lines_and_evidence_line(make_repo) -> None:
    ctx = run(
        make_repo,
        {"a.py": "import os\n\n\nimport json, einops.layers\nfrom  timm.models import vit\n"},
    )
    assert flagged(ctx) == {"einops": "a.py:4", "timm": "a.py:5"}


def test_google_namespace_is_resolved_per_subpackage(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "a.py": (
                "from google.cloud import storage\n"
                "import google.protobuf.text_format\n"
                "from google.colab import drive\n"
            )
        },
    )
    assert flagged(ctx) == {"google-cloud-storage": "a.py:1", "protobuf": "a.py:2"}


def test_package_dirs_anywhere_private_and_python2_names_are_skipped(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "lib/datasets/__init__.py": "",
            "tools/train.py": "import datasets\nimport _speedups\nimport cPickle\nimport Queue\n",
        },
    )
    assert flagged(ctx) == {}


def test_a_sibling_module_is_only_local_to_its_directory(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "scripts/wandb.py": "",  # shadows wandb for scripts/ only
            "scripts/run.py": "import wandb\n",
            "train.py": "import wandb\n",
        },
    )
    assert flagged(ctx) == {"wandb": "train.py:1"}


def test_declared_imports_give_nothing(make_repo) -> None:
    ctx = run(make_repo, {"requirements.txt": "PyYAML\n", "a.py": "import yaml\n"})
    assert [f.detector for f in ctx.of_kind("python_requirement")] == ["requirements"]


def test_imports_in_docstrings_are_not_flagged(make_repo) -> None:
    code = '"""Usage:\n\nimport it like this\nfrom elsewhere import x\n"""\nimport real_dep\n'
    ctx = run(make_repo, {"a.py": code})
    assert flagged(ctx) == {"real-dep": "a.py:6"}


def test_unknown_name_matching_a_nested_module_is_local(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "benchmarks/init_static.py": "",
            "tests/unit/test_x.py": "import init_static\n",
            "models/transformers.py": "",  # a known third-party name stays third-party
            "train.py": "import transformers\n",
        },
    )
    assert flagged(ctx) == {"transformers": "train.py:1"}


def test_notebook_code_cells_are_scanned_magics_are_not(make_repo) -> None:
    import json

    def nb(*cells: str) -> str:
        return json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "source": c.splitlines(keepends=True), "outputs": []}
                    for c in cells
                ],
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )

    ctx = run(
        make_repo,
        {
            "nb/demo.ipynb": nb(
                "%matplotlib inline\nimport numpy as np\nfrom jax import numpy as jnp",
                "%%bash\nimport not_python",
                "!pip install 'einops==0.7' -q -r reqs.txt ./local git+https://x/y.git\n"
                "x = !ls\nimport yaml",
            ),
        },
    )
    reqs = {f.key: f for f in ctx.of_kind("python_requirement")}
    assert set(reqs) == {"numpy", "jax", "einops", "pyyaml"}
    assert reqs["einops"].value == RequirementValue("einops==0.7", declared=True)
    assert reqs["numpy"].sources() == ["nb/demo.ipynb:7"]  # the line in the .ipynb JSON


def test_imports_only_in_tests_docs_and_benchmarks_are_not_run_requirements(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "train.py": "import numpy\n",
            "tests/test_train.py": "import torch\nimport numpy\n",
            "test_speed.py": "import pytest_benchmark\n",
            "docs/conf.py": "import sphinx_rtd_theme\n",
            "benchmarks/bench_io.py": "import asv\n",
        },
    )
    run_deps = {f.key for f in ctx.of_kind("python_requirement") if not f.value.support_only}
    assert run_deps == {"numpy"}
    support = {f.key: f.sources() for f in ctx.of_kind("python_requirement")}
    assert support["torch"] == ["tests/test_train.py:1"]
    assert set(support) == {"numpy", "torch", "pytest-benchmark", "sphinx-rtd-theme", "asv"}


def test_a_call_that_needs_a_package_the_code_never_imports(make_repo) -> None:
    """rasbt/machine-learning-book ch19 on gym 0.25.2: `env.render()` stopped with "pygame
    is not installed" (gym draws classic control with pygame, its classic_control extra).
    A file that imports gym and calls `.render(` needs pygame; one that only imports gym,
    a test file, or a repository that declares pygame does not add it."""
    render = "import gym\nenv = gym.make('CartPole-v1')\n\nenv.render()\n"
    ctx = run(make_repo, {"requirements.txt": "gym\n", "train.py": render})
    assert flagged(ctx) == {"pygame": "train.py:4"}
    (finding,) = [f for f in ctx.of_kind("python_requirement") if f.key == "pygame"]
    assert "`gym`'s `.render()` needs it" in finding.note
    value = finding.value
    assert (value.called, value.since, value.importers) == (
        "gym's .render()",
        "2022-02-18",  # gym 0.22.0: pygame, where 0.21.0 drew with pyglet
        ("train.py",),
    )
    plain = "import gym\nenv = gym.make('CartPole-v1')\nenv.reset()\n"
    assert flagged(run(make_repo, {"requirements.txt": "gym\n", "train.py": plain})) == {}
    tests_only = {"requirements.txt": "gym\n", "train.py": plain, "tests/test_env.py": render}
    assert flagged(run(make_repo, tests_only)) == {}
    declared = {"requirements.txt": "gym\npygame\n", "train.py": render}
    assert flagged(run(make_repo, declared)) == {}
    # `.render(` of another library in a file that does not import gym is not gym's.
    other = {"requirements.txt": "jinja2\n", "page.py": "import jinja2\nt.render(x=1)\n"}
    assert flagged(run(make_repo, other)) == {}
