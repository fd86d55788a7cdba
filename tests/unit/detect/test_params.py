"""ParamsDetector: parameters, seeds and unbounded loops."""

from __future__ import annotations

import ast
import textwrap

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect._pyast import import_map
from reprobridge.detect.findings import SeedValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure._cli_params import argparse_params
from reprobridge.detect.procedure._loops import unbounded_loops
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"params"}))


def loops(src: str) -> list[tuple[int, str | None]]:
    tree = ast.parse(textwrap.dedent(src))
    return [(u.line, u.bound) for u in unbounded_loops(tree, import_map(tree))]


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("while True:\n    step()\n", [(1, None)]),
        ("while 1:\n    if it >= args.max_iters:\n        return\n", [(1, "max_iters")]),
        (
            "for i in itertools.count():\n    if epoch > cfg.epochs:\n        sys.exit(0)\n",
            [(1, "epochs")],
        ),
        ("while True:\n    step()\n    break\n", []),
        ("while True:\n    if loss < tol:\n        break\n", []),
        (
            "while True:\n    if step > max_steps or loss < tol:\n        break\n",
            [(1, "max_steps")],
        ),
        ("while True:\n    if step > max_steps:\n        break\n    if done:\n        break\n", []),
        (
            "while True:\n    try:\n        b = next(it)\n    except StopIteration:\n        break\n",
            [],
        ),
        ("def g():\n    while True:\n        yield 1\n", []),
        ("while True:\n    for x in y:\n        break\n", [(1, None)]),
        ("while True:\n    def f():\n        return 1\n", [(1, None)]),
        ("while n < 3:\n    pass\n", []),
    ],
)
def test_unbounded_loops(src: str, expected: list[tuple[int, str | None]]) -> None:
    assert loops(src) == expected


def test_argparse_edge_cases() -> None:
    src = textwrap.dedent(
        """
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument('-n', type=int, default=-3)
        p.add_argument('--layers', type=int, nargs='+', default=[1, 2])
        p.add_argument('--no-aug', dest='augment', action='store_false')
        p.add_argument('--resume', type=str2bool, default='yes')
        p.add_argument(*FLAGS)
        p.add_argument('--temp', type=float, default=os.environ.get('T', 1))
        """
    )
    tree = ast.parse(src)
    params = {p.name: p for p in argparse_params(tree, import_map(tree))}
    assert params["n"].flag == "-n" and params["n"].default == -3
    assert params["layers"].default is None and "collection" in params["layers"].note
    assert params["augment"].flag == "--no-aug" and params["augment"].default is True
    assert params["resume"].type == "bool"
    assert params["temp"].default is None and "os.environ.get" in params["temp"].note
    assert set(params) == {"n", "layers", "augment", "resume", "temp"}


def test_seed_sources(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "a.py": "import pytorch_lightning as pl\npl.seed_everything(17)\nimport random\nrandom.seed(3)\n",
            "b.py": "import torch, time\ntorch.manual_seed(int(time.time()))\n",
            "c.py": "import argparse\np = argparse.ArgumentParser()\np.add_argument('--data_seed', type=int)\n",
        },
    )
    seeds = {f.key: f for f in ctx.findings if f.kind == "seed"}
    assert seeds["a.py"].value == SeedValue("a.py", None, 17)
    assert "other literal seeds: 3" in seeds["a.py"].note
    assert seeds["b.py"].value.default is None and seeds["b.py"].confidence == "low"
    assert seeds["c.py"].value == SeedValue("c.py", "--data_seed", None, "space")


def test_unbounded_finding_names_the_flag_or_says_no_bound(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "train.py": "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--max-steps', type=int)\nargs = p.parse_args()\ns = 0\n"
            "while True:\n    s += 1\n    if s == args.max_steps:\n        break\n",
            "serve.py": "while True:\n    handle()\n",
        },
    )
    found = {f.key: f.value for f in ctx.findings if f.kind == "unbounded"}
    assert found["train.py"].flag == "--max-steps"
    assert "no default" in found["train.py"].reason
    assert found["serve.py"].flag is None and "no bound found" in found["serve.py"].reason


def test_hydra_problems_warn(make_repo) -> None:
    hydra = "import hydra\n@hydra.main(config_path='conf', config_name='{}')\ndef main(cfg):\n    pass\n"
    ctx = run(
        make_repo,
        {
            "a.py": hydra.format("missing"),
            "b.py": hydra.format("bad"),
            "conf/bad.yaml": "a: [1\nb: 2\n",
        },
    )
    assert [f for f in ctx.findings if f.kind == "param"] == []
    messages = sorted((w.path, w.message) for w in ctx.warnings)
    assert messages[0][0] == "a.py" and "conf/missing.yaml" in messages[0][1]
    assert messages[1][0] == "conf/bad.yaml" and "not valid YAML" in messages[1][1]


def test_fire_class_and_typer_run(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "f.py": "import fire\nclass T:\n    def __init__(self, lr=0.1, *, seed: int = 4):\n        pass\nfire.Fire(T)\n",
            "t.py": "import typer\ndef main(n: int = typer.Option(..., help='x'), k: float = 2.0):\n    pass\ntyper.run(main)\n",
        },
    )
    params = {f.key: f.value for f in ctx.findings if f.kind == "param"}
    assert params["f.py::lr"].flag == "--lr"
    assert params["t.py::n"].default is None and params["t.py::n"].type == "int"
    assert params["t.py::k"].default == 2.0
    seeds = {f.key: f.value for f in ctx.findings if f.kind == "seed"}
    assert seeds["f.py"] == SeedValue("f.py", "--seed", 4, "space")


def test_tests_and_unparsable_files_are_ignored(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "tests/test_a.py": "import argparse\np.add_argument('--x', default=1)\n",
            "broken.py": "import argparse\ndef (:\n",
        },
    )
    assert ctx.findings == []


def test_a_file_too_deep_to_analyse_is_skipped_with_a_warning(make_repo, monkeypatch) -> None:
    """A RecursionError while analysing one file (generated code nests expressions deeper
    than a recursive walk goes) skips that file with a warning; the others are still read,
    and a file that does not parse is passed over."""
    from reprobridge.detect.procedure import params

    real = params.cli_params

    def deep_in_gen(tree: ast.Module, imports: dict[str, str]):
        if any(isinstance(n, ast.Name) and n.id == "GENERATED" for n in ast.walk(tree)):
            raise RecursionError("maximum recursion depth exceeded")
        return real(tree, imports)

    monkeypatch.setattr(params, "cli_params", deep_in_gen)
    script = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--seed', type=int, default={})\n"
    ctx = run(
        make_repo,
        {
            "train.py": script.format(1) + "if __name__ == '__main__':\n    p.parse_args()\n",
            "gen.py": script.format(2)
            + "GENERATED = 1\nif __name__ == '__main__':\n    p.parse_args()\n",
            "broken.py": "def (:\nif __name__ == '__main__':\n    pass\n",
        },
    )
    seeds = {f.key: f.value for f in ctx.of(SeedValue)}
    assert seeds["train.py"].default == 1
    assert "gen.py" not in seeds
    deep = [w for w in ctx.warnings if w.path == "gen.py"]
    assert [w.message for w in deep] == ["skipped: expressions nested too deeply to analyse"]
    assert not [w for w in ctx.warnings if w.path == "broken.py" and "nested" in w.message]
