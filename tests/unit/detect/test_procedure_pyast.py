"""AST helpers: name resolution, literals, static paths, seeds."""

from __future__ import annotations

import ast

import pytest

from reprobridge.detect._pyast import (
    NOT_LITERAL,
    call_name,
    callee,
    import_map,
    literal,
    main_guard,
    seed_calls,
    static_path,
)


def expr(src: str, imports: str = "") -> tuple[ast.expr, dict[str, str]]:
    tree = ast.parse(imports + "\n" + src)
    node = tree.body[-1]
    assert isinstance(node, ast.Expr)
    return node.value, import_map(tree)


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ('"results/out.json"', ("results/out.json", False)),
        ('f"results/{name}/model.pt"', ("results", True)),
        ('f"{name}.pt"', None),
        ('os.path.join("out", "figs", "a.png")', ("out/figs/a.png", False)),
        ('os.path.join("out", run_name, "a.png")', ("out", True)),
        ('Path("out") / "x" / "y.csv"', ("out/x/y.csv", False)),
        ('"logs/{}.txt".format(i)', ("logs", True)),
        ('"logs/run_%d.txt" % i', ("logs", True)),
        ('"ckpt/" + name', ("ckpt", True)),
        ("args.out", None),
    ],
)
def test_static_path(src: str, expected: tuple[str, bool] | None) -> None:
    node, imports = expr(src, "import os\nfrom pathlib import Path")
    assert static_path(node, imports) == expected


@pytest.mark.parametrize(
    ("src", "expected"),
    [("setup(x)", "setup"), ("setuptools.setup()", "setup"), ("a.b().c()", "c"), ("f()()", None)],
)
def test_callee_is_the_last_component_of_the_called_name(src: str, expected: str | None) -> None:
    node, _ = expr(src)
    assert isinstance(node, ast.Call) and callee(node) == expected


def test_call_name_resolves_aliases() -> None:
    node, imports = expr("np.random.seed(0)", "import numpy as np")
    assert isinstance(node, ast.Call) and call_name(node, imports) == "numpy.random.seed"
    node, imports = expr("CIFAR10('d')", "from torchvision.datasets import CIFAR10")
    assert isinstance(node, ast.Call) and call_name(node, imports) == "torchvision.datasets.CIFAR10"


def test_literal() -> None:
    assert literal(ast.parse("-3", mode="eval").body) == -3
    assert literal(ast.parse("None", mode="eval").body) is None
    assert literal(ast.parse("f(x)", mode="eval").body) is NOT_LITERAL
    assert literal(ast.parse("[1]", mode="eval").body) is NOT_LITERAL


def test_seed_calls_literal_and_computed() -> None:
    tree = ast.parse(
        "import torch, random\nimport numpy as np\nfrom utils import set_seed\n"
        "torch.manual_seed(3)\nnp.random.seed(seed)\nset_seed(seed=5)\nrandom.random()\n"
    )
    found = [(c.lineno, v) for c, v in seed_calls(tree, import_map(tree))]
    assert found == [(4, 3), (5, None), (6, 5)]


def test_main_guard_either_order() -> None:
    assert main_guard(ast.parse("if '__main__' == __name__:\n    pass\n")) is not None
    assert main_guard(ast.parse("def f():\n    if __name__ == '__main__':\n        pass\n")) is None
