"""The environment's date is that of the code the chosen experiments run, not HEAD's.

The shape seen on a real repository (a textbook's notebooks): the chapter a reproduction
runs was last changed in 2023, the README and other chapters in 2026. Resolved as of HEAD
the notebook met NumPy 2.4, which no longer converts a 1-element array to a float.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.recovery.merge import merge_findings

TRAIN = (
    "import numpy as np\n"
    "from lib.model import fit\n"
    "if __name__ == '__main__':\n"
    "    print('loss:', fit(np.zeros(3)))\n"
)
MODEL = "def fit(x):\n    return float(x.sum())\n"
LATER = "2026-01-20T10:00:00+00:00"


def _commit(root: Path, files: dict[str, str], date: str) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "commit", "-qm", "later"],
        check=True,
        env={**os.environ, **env},
    )


def _manifest(root: Path):  # type: ignore[no-untyped-def]
    return merge_findings(detect_repo(RepoIndex.from_git(root)), repo_name="book")


def _repo(make_repo) -> Path:  # type: ignore[no-untyped-def]
    # committed 2023-11-14 (conftest's GIT_COMMITTER_DATE): bound 2023-10-31, 14 days before
    return make_repo(
        {
            "README.md": "```bash\npython train.py\n```\n",
            "requirements.txt": "numpy\n",
            "train.py": TRAIN,
            "lib/__init__.py": "",
            "lib/model.py": MODEL,
        }
    )


def test_later_commits_to_other_files_do_not_move_the_date(make_repo) -> None:
    root = _repo(make_repo)
    _commit(root, {"README.md": "```bash\npython train.py\n```\nNew text.\n"}, LATER)
    _commit(root, {"other/notes.py": "print(2)\n"}, LATER)
    merged = _manifest(root)
    env = merged.manifest.environment
    assert env.exclude_newer == "2023-11-01T00:00:00Z"
    sources = merged.manifest.derived["environment.exclude_newer"].sources
    assert "the last commit that changed one of the" in sources[0]
    assert any(
        "the last change to the chosen experiments' code" in d for d in merged.notes.decisions
    )


def test_a_change_to_an_imported_module_moves_it(make_repo) -> None:
    root = _repo(make_repo)
    _commit(root, {"lib/model.py": MODEL + "# tuned\n"}, LATER)
    assert _manifest(root).manifest.environment.exclude_newer == "2026-01-07T00:00:00Z"


def test_a_change_to_the_requirements_moves_it(make_repo) -> None:
    root = _repo(make_repo)
    _commit(root, {"requirements.txt": "numpy>=1.20\n"}, LATER)
    merged = _manifest(root)
    assert merged.manifest.environment.exclude_newer == "2026-01-07T00:00:00Z"
    # the same day as HEAD: HEAD's own wording, nothing new to explain
    sources = merged.manifest.derived["environment.exclude_newer"].sources
    assert sources[0].startswith("git: committer date of HEAD")


def _shell_repo(make_repo, run: str) -> Path:  # type: ignore[no-untyped-def]
    return make_repo(
        {
            "README.md": "```bash\nbash run.sh\n```\n",
            "run.sh": run,
            "train.py": TRAIN,
            "lib/__init__.py": "",
            "lib/model.py": MODEL,
        }
    )


def test_a_shell_experiment_is_dated_by_the_files_it_runs(make_repo) -> None:
    root = _shell_repo(make_repo, "python train.py\n")
    _commit(root, {"docs/index.md": "# docs\n"}, LATER)
    assert _manifest(root).manifest.environment.exclude_newer == "2023-11-01T00:00:00Z"
    # the script itself is code it runs: its edits move the date
    _commit(root, {"run.sh": "python train.py --quiet\n"}, LATER)
    assert _manifest(root).manifest.environment.exclude_newer == "2026-01-07T00:00:00Z"


def test_a_shell_experiment_running_an_unknown_file_keeps_heads_date(make_repo) -> None:
    root = _shell_repo(make_repo, 'SCRIPT="${1:-train.py}"\npython "$SCRIPT"\n')
    _commit(root, {"docs/index.md": "# docs\n"}, LATER)
    assert _manifest(root).manifest.environment.exclude_newer == "2026-01-07T00:00:00Z"


def test_a_shell_script_in_a_folder_finds_what_it_runs_from_the_root_too(make_repo) -> None:
    """``scripts/run.sh`` runs ``python train.py`` from the root (no ``scripts/train.py``)
    and ``python -m lib.model``: both are the root's files, so the script's date is theirs,
    not HEAD's."""
    root = make_repo(
        {
            "README.md": "```bash\nbash scripts/run.sh\n```\n",
            "scripts/run.sh": "python train.py\npython -m lib.model\n",
            "train.py": TRAIN,
            "lib/__init__.py": "",
            "lib/model.py": MODEL,
        }
    )
    _commit(root, {"docs/index.md": "# docs\n"}, LATER)
    assert _manifest(root).manifest.environment.exclude_newer == "2023-11-01T00:00:00Z"
