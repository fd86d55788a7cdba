"""The download/read/write call rules (reprobridge/data/io_calls.toml via detect/_io_calls)."""

from __future__ import annotations

import ast

import pytest

from reprobridge.detect.procedure._io_calls import (
    MAIN_BLOCK,
    called_names,
    function_at,
    io_calls,
    rules,
)


def calls(src: str) -> list[tuple[str, str, str]]:
    return [(c.kind, c.path, c.call) for c in io_calls(ast.parse(src))]


@pytest.mark.parametrize(
    "src",
    [
        "from sklearn import datasets\ndatasets.fetch_covtype()",
        "from sklearn.datasets import fetch_openml\nfetch_openml('mnist_784')",
        "from imblearn.datasets import fetch_datasets\nfetch_datasets()",
        "from imbens.datasets import fetch_datasets\nfetch_datasets()['ecoli']",
        "import torchvision\ntorchvision.datasets.MNIST('data', download=True)",
        "from tensorflow import keras\nkeras.datasets.mnist.load_data()",
        "import tensorflow as tf\ntf.keras.datasets.cifar10.load_data()",
        "import tensorflow_datasets as tfds\ntfds.load('mnist')",
        "from datasets import load_dataset\nload_dataset('glue', 'sst2')",
        "import urllib.request\nurllib.request.urlretrieve(URL, 'x.zip')",
        "import requests\nrequests.get(url)",
        "from transformers import AutoModel\nAutoModel.from_pretrained('bert-base-uncased')",
        "import torchvision\ntorchvision.models.resnet18(pretrained=True)",
        "from mydata import Faces\nFaces(root='x', download=True)",
    ],
)
def test_downloads_through_library_helpers(src: str) -> None:
    assert [k for k, _, _ in calls(src)] == ["download"], calls(src)


@pytest.mark.parametrize(
    "src",
    [
        "import torchvision\ntorchvision.datasets.MNIST('data', download=False)",
        "from datasets import load_dataset\nload_dataset('csv', data_files='data/x.csv')",
        "from sklearn.datasets import load_iris, make_moons\nload_iris()\nmake_moons()",
        "import torchvision\ntorchvision.models.resnet18()",
    ],
)
def test_local_and_bundled_data_is_no_download(src: str) -> None:
    assert [k for k, _, _ in calls(src) if k == "download"] == []


def test_reads_and_writes_of_literal_paths() -> None:
    src = "\n".join(
        [
            "import torch, numpy as np, pandas as pd, json",
            "data = torch.load('traindata.pt')",
            "torch.save(data, open('out.pt', 'wb'))",
            "np.save('a.npy', data)",
            "x = open('names.txt').read()",
            "open('log.txt', 'a').write('x')",
            "df = pd.read_csv(path_variable)",
            "json.dump({}, open('vocab.json', 'w'))",
            "pd.read_csv(filepath_or_buffer='table.csv')",
        ]
    )
    assert calls(src) == [
        ("read", "traindata.pt", "torch.load"),
        ("write", "out.pt", "open"),
        ("write", "out.pt", "torch.save"),
        ("write", "a.npy", "numpy.save"),
        ("read", "names.txt", "open"),
        ("write", "log.txt", "open"),
        ("write", "vocab.json", "json.dump"),
        ("write", "vocab.json", "open"),
        ("read", "table.csv", "pandas.read_csv"),
    ]


def test_an_imported_open_is_not_the_builtin() -> None:
    assert calls("from mylib import open\nopen('x.gz')") == []


def test_compressed_files_are_read_and_written_like_open() -> None:
    # x-transformers' train scripts read `./data/enwik8.gz` through gzip.open
    src = "import gzip, lzma\nfrom gzip import open as gopen\n" + "\n".join(
        ["gzip.open('./data/enwik8.gz')", "lzma.open('out.xz', 'wt')", "gopen('b.gz', mode='rb')"]
    )
    assert calls(src) == [
        ("read", "./data/enwik8.gz", "gzip.open"),
        ("write", "out.xz", "lzma.open"),
        ("read", "b.gz", "gzip.open"),
    ]


def test_functions_main_block_and_calls() -> None:
    tree = ast.parse(
        "\n".join(
            [
                "from sklearn import datasets",
                "def load():",
                "    return datasets.fetch_covtype()",  # line 3
                "def from_pretrained():",
                "    return Other.from_pretrained('x')",  # a function calling its own name
                "if __name__ == '__main__':",
                "    datasets.fetch_kddcup99()",  # line 7
            ]
        )
    )
    found = {c.line: c.function for c in io_calls(tree)}
    assert found[3] == "load"
    assert found[7] == MAIN_BLOCK
    assert function_at(tree, 3) == "load"
    assert function_at(tree, 7) == MAIN_BLOCK
    assert function_at(tree, 1) is None
    assert "from_pretrained" not in called_names(tree)
    assert "fetch_kddcup99" in called_names(tree)


def test_the_rules_are_data() -> None:
    r = rules()
    assert any("sklearn.datasets.fetch_*" in d.calls for d in r.downloads)
    assert "open" in r.modes
    assert dict(r.writes)["torch.save"] == 1
