"""ImportsDetector: undeclared third-party imports, cheaply."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"requirements", "imports"}))


def flagged(ctx) -> dict[str, str]:
    return {
        f.key: f.sources()[0]
        for f in ctx.of_kind("python_requirement")
        if f.value["declared"] is False
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
