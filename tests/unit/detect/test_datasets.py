"""DatasetsDetector: URL classification, path grouping, merging, what is not data."""

from __future__ import annotations

import re

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.findings import DatasetValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.datasets import path_dataset, url_dataset
from reprobridge.detect.registry import detectors
from reprobridge.manifest.schema import ID_PATTERN, Dataset


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"datasets"}))


@pytest.mark.parametrize(
    ("url", "ident"),
    [
        ("https://zenodo.org/records/777", "zenodo-777"),
        ("https://example.org/d/ImageNet-1K.tar.gz).", "imagenet-1k"),
        ("https://huggingface.co/datasets/squad", "squad"),
        ("https://drive.google.com/file/d/1XyZ_abcdefghijkl/view", "gdrive-1xyz_abcdefg"),
        ("https://example.org/model.pth", "model"),
        ("https://github.com/org/repo/releases/download/v1/data.zip", "data"),
    ],
)
def test_data_urls(url: str, ident: str) -> None:
    hit = url_dataset(url)
    assert hit is not None and hit[0] == ident
    assert re.match(ID_PATTERN, ident)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/org/repo/archive/main.zip",
        "https://download.pytorch.org/whl/cu121/torch-2.1.0.tar.gz",
        "https://img.shields.io/badge/x.svg",
        "https://arxiv.org/abs/2401.00001",
        "https://example.org/docs/index.html",
        "https://pypi.org/packages/x.tar.gz",
    ],
)
def test_not_data_urls(url: str) -> None:
    assert url_dataset(url) is None


def test_path_grouping() -> None:
    assert path_dataset("data/cifar10/train/x.png") == ("cifar10", "data/cifar10")
    assert path_dataset("data/train.csv") == ("train", "data/train.csv")
    assert path_dataset("data/archive.tar.gz") == ("archive", "data/archive.tar.gz")


def test_tests_and_vendored_code_are_ignored_and_values_are_valid(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "tests/test_data.py": "from datasets import load_dataset\nload_dataset('imdb')\n",
            "venv/lib/x.py": "from datasets import load_dataset\nload_dataset('imdb')\n",
            "load.py": "from datasets import load_dataset\nds = load_dataset(path='imdb')\n"
            "p = 'data/imdb/cache'\nq = '/abs/data/x'\n",
        },
    )
    (finding,) = ctx.findings
    assert finding.key == "imdb"
    assert finding.value == DatasetValue(name="huggingface:imdb", path="data/imdb")
    assert finding.evidence[0].line == 2
    Dataset(**finding.value.to_json())
