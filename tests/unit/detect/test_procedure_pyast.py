"""AST helpers: name resolution, literals, static paths, seeds."""

from __future__ import annotations

import ast

import pytest

from reprobridge.detect._pyast import (
    NOT_LITERAL,
    arg,
    call_name,
    callee,
    child_nodes,
    import_map,
    literal,
    main_guard,
    nodes_of,
    seed_calls,
    static_path,
    walk_shallow,
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


_NESTED = """
import os
X = [f(i) for i in range(3)]
class C:
    y = g(1)
    def m(self):
        return h(2)
for epoch in range(10):
    if epoch % 2 == 0:
        try:
            step(lambda: k(3))
        except ValueError as exc:
            log(exc)
    with open("a") as fh:
        match fh.read():
            case "x":
                train(epoch)
def main(lr=0.1):
    run(lr)
main()
"""


def test_child_nodes_and_nodes_of_keep_the_ast_module_orders() -> None:
    tree = ast.parse(_NESTED)
    for node in ast.walk(tree):
        assert child_nodes(node) == list(ast.iter_child_nodes(node))
    walked = list(ast.walk(tree))
    for kind in {type(n) for n in walked}:
        assert nodes_of(tree, kind) == [n for n in walked if type(n) is kind]


def _reference_shallow(nodes: list[ast.stmt]) -> list[ast.AST]:
    scopes = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
    out: list[ast.AST] = []
    for node in nodes:
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, scopes):
                out += _reference_shallow([child])  # type: ignore[list-item]
    return out


def test_walk_shallow_with_seen_walks_nested_statements_once() -> None:
    """Pre-order without entering functions, classes or lambdas; with ``seen``, walks of
    statements that nest one another visit each node once and lose none."""
    tree = ast.parse(_NESTED)
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    for stmt in statements:
        assert list(walk_shallow([stmt])) == _reference_shallow([stmt])
    seen: set[int] = set()
    once = [n for stmt in statements for n in walk_shallow([stmt], seen)]
    assert len(once) == len({id(n) for n in once})
    every = {id(n) for stmt in statements for n in walk_shallow([stmt])}
    assert {id(n) for n in once} == every
    names = {n.func.id for n in once if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert {"train", "step", "h", "g", "main"} <= names
    assert "k" not in names  # in a lambda


def test_arg_is_the_position_else_the_first_keyword_given() -> None:
    call = ast.parse("f(a, b, fname=c, file=d)", mode="eval").body
    assert isinstance(call, ast.Call)
    assert ast.unparse(arg(call, 1, "file")) == "b"  # the position wins
    assert ast.unparse(arg(call, 2, "file", "fname")) == "d"  # first of the names given
    assert ast.unparse(arg(call, 2, "path", "fname")) == "c"
    assert arg(call, 2, "path") is None
    assert arg(call, 2) is None
