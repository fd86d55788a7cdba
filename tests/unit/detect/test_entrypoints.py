"""EntryPointsDetector: experiment-like __main__ scripts and packages."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.entrypoints import looks_like_experiment_name, module_of
from reprobridge.detect.registry import detectors
from reprobridge.manifest.schema import Experiment

MAIN = 'if __name__ == "__main__":\n    pass\n'


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"entrypoints"}))


def test_names_and_modules() -> None:
    assert looks_like_experiment_name("src/train_cifar.py")
    assert looks_like_experiment_name("eval.py")
    assert not looks_like_experiment_name("utils/plotting.py")
    assert module_of("src/pkg/sub/__main__.py") == "pkg.sub"
    assert module_of("my-tool/__main__.py") is None


def test_skips_tests_vendored_docs_and_broken_files(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "tests/train_test_helper.py": MAIN,
            ".venv/lib/site-packages/x/train.py": MAIN,
            "docs/conf_main.py": MAIN,
            "broken_train.py": "def (:\n" + MAIN,
            "utils.py": MAIN,
            "main.py": "import sys\n" + MAIN,
        },
    )
    exps = [f for f in ctx.findings if f.kind == "experiment"]
    assert [f.key for f in exps] == ["main"]
    assert exps[0].confidence == "low"
    rejected = {f.key: f.value.reason for f in ctx.findings if f.kind == "rejected"}
    assert list(rejected) == ["utils.py"]
    assert "neither an experiment-like name, a command line" in rejected["utils.py"]


def test_generic_names_take_their_directory(make_repo) -> None:
    ctx = run(
        make_repo, {"a/main.py": MAIN, "b/main.py": MAIN, "b/train.py": MAIN, "c/train.py": MAIN}
    )
    assert [f.key for f in ctx.findings if f.kind == "experiment"] == [
        "a-main",
        "b-main",
        "train",
        "c-train",
    ]


def test_required_parameters_become_placeholders(make_repo) -> None:
    src = (
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--data-dir', required=True)\np.add_argument('config')\n"
        "p.add_argument('extra', nargs='?')\n" + MAIN
    )
    ctx = run(make_repo, {"run_exp.py": src})
    (finding,) = ctx.findings
    assert finding.value.command == "python run_exp.py --data-dir {data_dir} {config}"
    assert "data_dir" in finding.note
    Experiment(
        command=finding.value.command,
        kind=finding.value.kind,
        params={"data_dir": "data", "config": "c.yaml"},
    )


def test_scripts_without_a_guard_that_train_at_import_time(make_repo) -> None:
    """bigram.py / a train.py that just trains: no __main__ guard, no argparse."""
    loop = "import torch\nmax_iters = 3000\nfor it in range(max_iters):\n    pass\n"
    calls = "import numpy as np\n\ndef main():\n    print('loss', 0.1)\n\nmain()\n"
    ctx = run(
        make_repo,
        {
            "bigram.py": loop,
            "train.py": calls,
            # library modules, not scripts: inside a package, imported elsewhere, no work
            "pkg/__init__.py": "",
            "pkg/model.py": loop,
            "helpers.py": loop,
            "uses_helpers.py": "import helpers\n",
            "consts.py": "import torch\nX = torch.zeros(3)\n",
            "plain.py": "for i in range(3):\n    print(i)\n",  # no ML import, no name
        },
    )
    exps = {f.key: f for f in ctx.findings if f.kind == "experiment"}
    assert sorted(exps) == ["bigram", "train"]
    assert exps["bigram"].value.command == "python bigram.py"
    assert exps["bigram"].confidence == "low"
    assert "no __main__ guard" in exps["bigram"].note
    assert exps["bigram"].sources() == ["bigram.py:3"]
    assert "calls main()" in exps["train"].note


def test_a_hand_written_argv_parser_is_a_command_line(make_repo) -> None:
    """projects/adder/adder.py: a CfgNode-style config merged from --section.key=value."""
    src = (
        "import sys\nfrom mingpt.utils import CfgNode as CN\n"
        "def get_config():\n    C = CN()\n    return C\n"
        "if __name__ == '__main__':\n"
        "    config = get_config()\n    config.merge_from_args(sys.argv[1:])\n"
    )
    ctx = run(make_repo, {"projects/adder/adder.py": src})
    (exp,) = [f for f in ctx.findings if f.kind == "experiment"]
    assert exp.value.command == "python projects/adder/adder.py"
    assert exp.confidence == "low"  # a command line, but no experiment-like name


def test_guarded_library_modules_are_rejected_from_their_bytes(make_repo) -> None:
    # Issue 14: a demo block in a library module (no experiment-like name, no CLI) is
    # rejected without parsing; the verdict, reason and line are those of the AST path.
    lib = '"""A helper."""\nimport math\n\n\ndef f():\n    return 1\n\n\n' + MAIN
    files = {f"pkg/mod{i}.py": lib for i in range(30)}
    files["pkg/cli_demo.py"] = "import argparse\n" + MAIN  # a CLI: parsed, as before
    files["pkg/odd.py"] = 'import math\nif (__name__ == "__main__"):\n    pass\n'
    root = make_repo(files, git=False)
    index = RepoIndex.from_directory(root)
    ctx = detect_repo(index, only=detectors({"entrypoints"}))
    rejected = {f.key: f for f in ctx.findings if f.kind == "rejected"}
    assert sorted(rejected) == sorted(p for p in files if p != "pkg/cli_demo.py")
    assert rejected["pkg/mod0.py"].evidence[0].line == 9
    assert rejected["pkg/odd.py"].evidence[0].line == 2  # another spelling: parsed
    assert [f.key for f in ctx.findings if f.kind == "experiment"] == ["cli_demo"]
    assert index.parse_count == 2


def test_relative_imports_run_as_a_module_from_the_package_root(make_repo) -> None:
    """`python lib/pkg/sub/sampler.py` would fail ("attempted relative import with no known
    parent package"): the command is `python -m pkg.sub.sampler` in `lib/`, the first folder
    above without an __init__.py. A relative import inside a function does not count."""
    sampler = "import numpy\nfrom .base import B\n" + MAIN
    lazy = "import numpy\ndef f():\n    from .base import B\n" + MAIN
    ctx = run(
        make_repo,
        {
            "lib/pkg/__init__.py": "",
            "lib/pkg/sub/__init__.py": "",
            "lib/pkg/sub/base.py": "class B: ...\n",
            "lib/pkg/sub/sampler.py": sampler,
            "scripts/train_lazy.py": lazy,
        },
    )
    exps = {f.key: f.value for f in ctx.findings if f.kind == "experiment"}
    assert exps["sampler"].command == "python -m pkg.sub.sampler"
    assert exps["sampler"].workdir == "lib"
    assert exps["train_lazy"].command == "python scripts/train_lazy.py"
    assert exps["train_lazy"].workdir == "."


def test_relative_imports_outside_a_package_are_rejected(make_repo) -> None:
    """A root script with a relative import cannot run at all: rejected, with the reason.
    One in a try that catches ImportError runs as a script (the import is optional)."""
    optional = "import numpy\ntry:\n    from . import util\nexcept ImportError:\n    util = None\n"
    ctx = run(
        make_repo,
        {"train.py": "from . import util\n" + MAIN, "examples/fit_opt.py": optional + MAIN},
    )
    exps = {f.key: f.value for f in ctx.findings if f.kind == "experiment"}
    assert list(exps) == ["fit_opt"]
    assert exps["fit_opt"].command == "python examples/fit_opt.py"
    rejected = {f.key: f.value.reason for f in ctx.findings if f.kind == "rejected"}
    assert "attempted relative import" in rejected["train.py"]


def test_a_script_naming_paths_above_its_folder_runs_from_its_folder(make_repo) -> None:
    """``savefig('../images/f.png')`` in ``chapter08/run_sim.py`` (held-out
    reinforcement-learning-an-introduction): written to run from chapter08/, where ``..`` is
    the repository; run from the root it writes above the repository and fails."""
    ctx = run(
        make_repo,
        {
            "chapter08/run_sim.py": (
                '"""Simulate (see ../README.md)."""\nimport numpy as np\n'
                "import matplotlib.pyplot as plt\n\n"
                "def figure():\n    plt.plot(np.arange(3))\n"
                "    plt.savefig('../images/figure_8_7.png')\n\n"
                "if __name__ == '__main__':\n    figure()\n"
            ),
            "chapter09/run_walk.py": (
                '"""See ../README.md."""\nimport numpy as np\n\n'
                "if __name__ == '__main__':\n    print(np.zeros(2))\n"
            ),
        },
    )
    exps = {f.key: (f.value.command, f.value.workdir) for f in ctx.of_kind("experiment")}
    assert exps["run_sim"] == ("python run_sim.py", "chapter08")
    # a docstring naming ../README.md says nothing about where the code runs
    assert exps["run_walk"] == ("python chapter09/run_walk.py", ".")
