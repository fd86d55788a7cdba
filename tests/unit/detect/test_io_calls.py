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


@pytest.mark.parametrize(
    ("src", "path"),
    [
        # MorvanZhou's 404_autoencoder: the switch is a setting that is only ever False
        (
            "import torchvision\nGET = False\n"
            "torchvision.datasets.MNIST(root='./mnist/', train=True, download=GET)",
            "./mnist/MNIST",
        ),
        (
            "from torchvision.datasets import FashionMNIST\nFashionMNIST('data')",
            "data/FashionMNIST",
        ),
        (
            "from torchvision import datasets\ndatasets.CIFAR10('data', train=False)",
            "data/cifar-10-batches-py",
        ),
        ("import torchvision\ntorchvision.datasets.CIFAR100(root='c')", "c/cifar-100-python"),
    ],
)
def test_a_dataset_class_without_download_reads_its_layout_under_the_root(
    src: str, path: str
) -> None:
    """The root folder alone is no evidence of the data: torchvision (>= 0.3) reads MNIST
    from `<root>/MNIST/...` and CIFAR-10 from `<root>/cifar-10-batches-py`."""
    assert [(k, p) for k, p, _ in calls(src)] == [("read", path)]


@pytest.mark.parametrize(
    "src",
    [
        "import torchvision\ntorchvision.datasets.MNIST(args.root)",  # no literal root
        "import torchvision\ntorchvision.datasets.ImageNet('imagenet')",  # no layout rule
    ],
)
def test_a_dataset_class_without_a_literal_root_or_a_layout_reads_nothing(src: str) -> None:
    assert calls(src) == []


def test_the_rules_are_data() -> None:
    r = rules()
    assert any("sklearn.datasets.fetch_*" in d.calls for d in r.downloads)
    assert any("torchvision.datasets.MNIST" in d.calls for d in r.local_datasets)
    assert "open" in r.modes
    assert dict(r.writes)["torch.save"] == 1


@pytest.mark.parametrize(
    ("src", "why"),
    [
        # a setting turned on when the data folder is missing (MorvanZhou's 401_CNN.py shape)
        (
            "import os, torchvision\nGET = False\nif not os.listdir('d'):\n    GET = True\n"
            "torchvision.datasets.MNIST('d', download=GET)",
            "download=GET may be true (GET = True at line 4)",
        ),
        # computed at run time: whether it holds depends on the machine
        (
            "import os, torchvision\nGET = not os.path.exists('d')\n"
            "torchvision.datasets.MNIST('d', download=GET)",
            "download=GET may be true (GET = not os.path.exists('d') at line 2)",
        ),
        (
            "import os, torchvision\ntorchvision.datasets.MNIST('d', download=not os.path.exists('d'))",
            "download=not os.path.exists('d') may be true (not os.path.exists('d'))",
        ),
        # a parameter whose default is on, followed through another name
        (
            "import torchvision\nON = True\ndef load(download=ON):\n"
            "    return torchvision.datasets.MNIST('d', download=download)",
            "download=download may be true (download = ON at line 3)",
        ),
    ],
)
def test_a_download_switch_that_may_be_true_downloads(src: str, why: str) -> None:
    found = [c for c in io_calls(ast.parse(src)) if c.kind == "download"]
    assert len(found) == 1 and found[0].what.endswith(why), found


@pytest.mark.parametrize(
    "src",
    [
        "import torchvision\nGET = False\ntorchvision.datasets.MNIST('d', download=GET)",
        "import torchvision\nGET: bool = False\nGET = None\ntorchvision.datasets.MNIST('d', download=GET)",
        # another module's or the command line's setting: nothing to read here
        "import torchvision\ntorchvision.datasets.MNIST('d', download=args.download)",
        "import torchvision\nfrom settings import GET\ntorchvision.datasets.MNIST('d', download=GET)",
        "import torchvision\ntorchvision.datasets.MNIST('d', download=False)",
    ],
)
def test_a_download_switch_that_is_off_or_unknown_does_not(src: str) -> None:
    assert [c for c in io_calls(ast.parse(src)) if c.kind == "download"] == []


def _reference_called_names(tree: ast.Module) -> set[str]:
    """The definition: every call's name unless it is its innermost function's name."""
    out: set[str] = set()
    stack: list[tuple[ast.AST, str | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name and name != function:
                out.add(name)
        stack.extend((child, function) for child in ast.iter_child_nodes(node))
    return out


def test_called_names_leaves_out_only_calls_of_their_own_function() -> None:
    source = """
class Model:
    @classmethod
    def from_pretrained(cls, path=load(default())):
        return Other.from_pretrained(path)
    def __init__(self):
        super().__init__()
        def helper():
            return __init__() + run()
        self.helper = lambda: helper()
def train(n):
    if n:
        train(n - 1)
    evaluate()
def evaluate():
    return train(0)
async def fetch():
    await fetch()
    class Inner:
        x = fetch()
if __name__ == "__main__":
    Model.from_pretrained("x")
"""
    tree = ast.parse(source)
    got = called_names(tree)
    assert got == _reference_called_names(tree)
    assert {"train", "evaluate", "__init__", "helper", "from_pretrained", "load"} <= got
    assert "fetch" not in got  # only ever called inside fetch itself (a class body there too)
