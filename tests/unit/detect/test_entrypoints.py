"""EntryPointsDetector: experiment-like __main__ scripts and packages."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.entrypoints import looks_like_experiment_name, module_of
from reprobridge.detect.index import RepoIndex
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
    assert [f.key for f in ctx.findings] == ["main"]
    assert ctx.findings[0].confidence == "low"


def test_generic_names_take_their_directory(make_repo) -> None:
    ctx = run(
        make_repo, {"a/main.py": MAIN, "b/main.py": MAIN, "b/train.py": MAIN, "c/train.py": MAIN}
    )
    assert [f.key for f in ctx.findings] == ["a-main", "b-main", "train", "c-train"]


def test_required_parameters_become_placeholders(make_repo) -> None:
    src = (
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--data-dir', required=True)\np.add_argument('config')\n"
        "p.add_argument('extra', nargs='?')\n" + MAIN
    )
    ctx = run(make_repo, {"run_exp.py": src})
    (finding,) = ctx.findings
    assert finding.value["command"] == "python run_exp.py --data-dir {data_dir} {config}"
    assert "data_dir" in finding.note
    Experiment(
        command=finding.value["command"],
        kind=finding.value["kind"],
        params={"data_dir": "data", "config": "c.yaml"},
    )
