"""ReadmeCommandsDetector: code blocks of README and docs become experiments."""

from __future__ import annotations

import re

from reprobridge.detect import detect_repo
from reprobridge.detect.index import MAX_TEXT_BYTES, RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.manifest.schema import ID_PATTERN, Experiment


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"readme"}))


def experiments(ctx):
    return {f.key: f for f in ctx.findings if f.kind == "experiment"}


def test_rst_readme_literal_and_code_blocks(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "README.rst": "FastMix\n=======\n\nTraining\n--------\n\nRun::\n\n    python train.py --lr 0.1\n\n"
            "Evaluation\n----------\n\n.. code-block:: bash\n   :caption: eval\n\n   python eval.py\n\n"
            ".. code-block:: python\n\n   import os\n",
            "train.py": "",
            "eval.py": "",
        },
    )
    found = experiments(ctx)
    assert found["training"].value.command == "python train.py --lr 0.1"
    assert found["training"].sources() == ["README.rst:9"]
    assert found["evaluation"].value.entry == "eval.py"
    assert len(found) == 2


def test_missing_script_is_a_rejected_candidate(make_repo) -> None:
    # issue 9: `python train.py` from the root where the file is src/train.py cannot run as
    # written; it is listed with the reason, never an experiment.
    ctx = run(
        make_repo,
        {
            "README.md": "## Go\n```bash\npython train.py\npython src/train.py\n```\n",
            "src/train.py": "",
        },
    )
    assert [f.value.entry for f in experiments(ctx).values()] == ["src/train.py"]
    (rejected,) = [f for f in ctx.findings if f.kind == "rejected"]
    assert rejected.key == "train.py"
    assert "train.py, which is not in the repository" in rejected.value.reason
    assert rejected.sources() == ["README.md:3"]


def test_exports_are_noted_and_non_commands_ignored(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "README.md": "# T\n```\nexport DATA=/data\necho hi\nls -la\npython t.py\n```\n",
            "t.py": "",
        },
    )
    (finding,) = experiments(ctx).values()
    assert "DATA=/data" in finding.note
    assert finding.key == "t"


def test_ids_unique_valid_and_deterministic(make_repo) -> None:
    block = "```bash\npython train.py\npython train.py --config configs/a.yaml\npython train.py --cfg b.yaml\n```\n"
    files = {
        "README.md": "## Train\n" + block + "## Train\n```bash\npython train.py --x 1\n```\n",
        "train.py": "",
    }
    first = run(make_repo, files)
    second = run(make_repo, files)
    keys = list(experiments(first))
    assert keys == list(experiments(second))
    assert len(set(keys)) == len(keys) == 4
    assert all(re.match(ID_PATTERN, k) for k in keys)
    assert keys == ["train", "train-a", "train-b", "train-2"]


def test_subdirectory_readme_runs_from_its_directory(make_repo) -> None:
    ctx = run(
        make_repo,
        {"exp/cifar/README.md": "# CIFAR\n```bash\npython run.py\n```\n", "exp/cifar/run.py": ""},
    )
    (finding,) = experiments(ctx).values()
    assert finding.value.workdir == "exp/cifar"
    assert finding.value.entry == "exp/cifar/run.py"


def test_huge_readme_is_skipped_with_a_warning(make_repo) -> None:
    ctx = run(make_repo, {"README.md": b"# x\n" + b"a" * (MAX_TEXT_BYTES + 10)})
    assert not ctx.findings
    assert ctx.warnings and ctx.warnings[0].path == "README.md"


def test_commands_are_valid_manifest_experiments(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "README.md": "# Title\n## Ünïcode ☃ heading\n```console\n(env) $ python -m pkg.main \\\n>   --seed 1\nok\n```\n"
        },
    )
    (finding,) = experiments(ctx).values()
    assert finding.key == "unicode-heading"
    assert finding.value.command == "python -m pkg.main --seed 1"
    Experiment(**{k: v for k, v in finding.value.to_json().items() if k != "entry"})


def test_indented_code_blocks_and_environment_manager_prefixes(make_repo) -> None:
    """A four-space code block is a code block; poetry/uv/pipenv/conda run prefixes drop."""
    readme = (
        "# Tool\n\nTrain the model:\n\n    poetry run python train.py --lr 0.1\n\n"
        "Evaluate it:\n\n    conda run -n paper python eval.py\n    uv run sample.py --n 4\n"
        "\nA paragraph\n    python not_code.py\n"  # a continuation line, not a code block
    )
    ctx = run(
        make_repo,
        {"README.md": readme, "train.py": "", "eval.py": "", "sample.py": "", "not_code.py": ""},
    )
    commands = sorted(f.value.command for f in experiments(ctx).values())
    assert commands == [
        "python eval.py",
        "python sample.py --n 4",
        "python train.py --lr 0.1",
    ]


def test_readme_mentions_name_scripts_and_notebooks(make_repo) -> None:
    readme = (
        "# Demo\n\nThe main result is in [the notebook](notebooks/main_result.ipynb).\n"
        "See `helpers.py` too; `util.py` is ambiguous.\n"
    )
    ctx = run(
        make_repo,
        {
            "README.md": readme,
            "notebooks/main_result.ipynb": "{}",
            "tools/helpers.py": "",
            "a/util.py": "",
            "b/util.py": "",
        },
    )
    mentions = {f.key: f.sources() for f in ctx.findings if f.kind == "mention"}
    assert mentions == {
        "notebooks/main_result.ipynb": ["README.md:3"],
        "tools/helpers.py": ["README.md:4"],
    }


def test_a_placeholder_cd_never_becomes_a_workdir(make_repo) -> None:
    """`cd PATH_TO_PROJECT`, `cd path/to/dir`, `cd {folder}`, `cd YOUR_DIR/sub`: what follows
    is a rejected candidate, even a module (`python -m`) that would otherwise be kept with
    the placeholder as its workdir. An absolute `/path/to/repo` keeps the last folder; a real
    folder with a placeholder-like name (`cd PROJECT_DIR`) is kept."""
    blocks = [
        "cd PATH_TO_PROJECT\npython -m pkg.train\n",
        "cd path/to/dir && python -m pkg.train --a 1\n",
        "cd {folder}; python -m pkg.train --b 2\n",
        "cd YOUR_DIR/sub\npython -m pkg.train --c 3\n",
        "cd /path/to/repo\npython -m pkg.train --d 4\n",
        "cd PROJECT_DIR\npython run.py\n",
    ]
    readme = "".join(f"## Step {i}\n\n```bash\n{b}```\n\n" for i, b in enumerate(blocks))
    ctx = run(
        make_repo,
        {
            "README.md": readme,
            "pkg/__init__.py": "",
            "pkg/train.py": "",
            "PROJECT_DIR/run.py": "",
        },
    )
    kept = sorted((f.value.command, f.value.workdir) for f in experiments(ctx).values())
    assert kept == [("python -m pkg.train --d 4", "."), ("python run.py", "PROJECT_DIR")]
    rejected = [f.value.reason for f in ctx.findings if f.kind == "rejected"]
    assert len(rejected) == 4
    assert all("a placeholder for the reader's folder" in r for r in rejected)
