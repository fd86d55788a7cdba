"""A monorepo's environment is the main experiment's sub-project's (issue 9, item 9)."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.recovery.merge import merge_findings

MAIN = "import argparse\nimport {mod}\nif __name__ == '__main__':\n    argparse.ArgumentParser().parse_args()\n"


def _merge(make_repo, files: dict[str, str]):
    index = RepoIndex.from_directory(make_repo(files, git=False))
    return merge_findings(detect_repo(index), repo_name="mono")


def test_other_subprojects_are_left_out_and_listed(make_repo) -> None:
    merged = _merge(
        make_repo,
        {
            "README.md": "```bash\npython a/run.py\n```\n",
            "requirements.txt": "tqdm==4.66.1\n",
            "a/requirements.txt": "numpy==1.26.4\n",
            "a/run.py": MAIN.format(mod="numpy"),
            "b/requirements.txt": "not-a-real-package==0.0.0\n",
            "b/run.py": MAIN.format(mod="scipy"),
        },
    )
    env = merged.manifest.environment
    assert env.python_requirements == ["numpy==1.26.4", "tqdm==4.66.1"]  # root kept
    assert list(merged.manifest.experiments) == ["run"]
    assert any("b/ is another sub-project" in d for d in merged.notes.dropped_experiments)
    assert any("b/requirements.txt" in d for d in merged.notes.decisions)


def test_no_scoping_when_the_main_experiment_is_at_the_root(make_repo) -> None:
    merged = _merge(
        make_repo,
        {
            "README.md": "```bash\npython run.py\n```\n",
            "run.py": MAIN.format(mod="numpy"),
            "requirements.txt": "numpy==1.26.4\n",
            "tools/requirements.txt": "pandas==2.0.3\n",
        },
    )
    assert merged.manifest.environment.python_requirements == ["numpy==1.26.4", "pandas==2.0.3"]


def test_support_only_imports_are_left_out_unless_an_experiment_runs_there(make_repo) -> None:
    merged = _merge(
        make_repo,
        {
            "README.md": "```bash\npython train.py\n```\n",
            "train.py": MAIN.format(mod="numpy"),
            "tests/test_train.py": "import torch\n",
        },
    )
    assert merged.manifest.environment.python_requirements == ["numpy"]
    assert any("torch (tests/test_train.py)" in d for d in merged.notes.decisions)
    # an experiment that lives in benchmarks/ needs what benchmarks/ imports
    merged = _merge(
        make_repo,
        {
            "README.md": "```bash\npython benchmarks/run.py\n```\n",
            "benchmarks/run.py": MAIN.format(mod="scipy"),
        },
    )
    assert merged.manifest.environment.python_requirements == ["scipy"]


def test_a_data_path_named_beside_its_script_is_rooted_there(make_repo) -> None:
    """``--data data/penn`` in ``tasks/word/train_word.py``, run from its folder (its README
    says so), names ``tasks/word/data/penn``: the dataset path is relative to the repository
    root, where the auditor checks it before a run (held-out locuslab/TCN: the run was
    refused, "data/penn does not exist")."""
    merged = _merge(
        make_repo,
        {
            "tasks/word/README.md": "```bash\npython train_word.py --epochs 1\n```\n",
            "tasks/word/train_word.py": (
                "import argparse\n\nimport numpy as np\n\n"
                "parser = argparse.ArgumentParser()\n"
                "parser.add_argument('--data', type=str, default='./data/penn')\n"
                "parser.add_argument('--epochs', type=int, default=100)\n"
                "args = parser.parse_args()\n"
                "for e in range(args.epochs):\n"
                "    print('loss', float(np.ones(1)[0]), open(args.data + '/valid.txt').read())\n"
            ),
            "tasks/word/data/penn/valid.txt": "a b c\n",
            "data/README.md": "other data\n",
        },
    )
    paths = {k: d.path for k, d in merged.manifest.datasets.items()}
    assert paths == {"penn": "tasks/word/data/penn"}, paths
