"""The recovery agent's guards, tool by tool, without a model: a number the agent reports
becomes `claimed`, never a target; no proposal may set or change a threshold, however it
is packed; writes to repository metadata, CI, direnv and rb's own files are refused; and
`apply_patch` changes only the workspace copy, only where `write_file` could.

(Case and nested `.git` spellings of the deny-list are tested with their fix elsewhere.)
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reprobridge.agent.draft import ManifestDraft
from reprobridge.agent.tools import Tools
from reprobridge.agent.workspace import ToolError, Workspace, check_rel, existing, patch_paths
from reprobridge.evidence.redact import Redactor
from tests.conftest import git_init, write_tree

SOURCE = {"regex": "acc=([0-9.]+)"}
BASE: dict[str, Any] = {
    "project": {"name": "paper"},
    "experiments": {
        "train": {
            "command": "python train.py",
            "metrics": {"acc": {"source": SOURCE, "target": 0.9, "tolerance": 0.05}},
        }
    },
}


def _draft() -> ManifestDraft:
    return ManifestDraft(copy.deepcopy(BASE), lambda rel: rel == "train.py")


def _acc(draft: ManifestDraft) -> dict[str, Any]:
    metric: dict[str, Any] = draft.data["experiments"]["train"]["metrics"]["acc"]
    return metric


# -- target -> claimed ---------------------------------------------------------------------


def test_a_reported_target_is_stored_as_claimed() -> None:
    draft = _draft()
    answer = draft.propose("experiments.train.metrics.acc.target", 0.99, "README table 2")
    assert answer.startswith("accepted experiments.train.metrics.acc.claimed")
    assert "never becomes a target" in answer
    assert _acc(draft) == {"source": SOURCE, "target": 0.9, "tolerance": 0.05, "claimed": 0.99}
    assert [p.path for p in draft.accepted] == ["experiments.train.metrics.acc.claimed"]


def test_claimed_and_other_metric_keys_are_accepted_as_given() -> None:
    draft = _draft()
    draft.propose("experiments.train.metrics.acc.claimed", 0.97, "log line")
    draft.propose("experiments.train.metrics.acc.higher_is_better", True, "accuracy")
    assert _acc(draft)["claimed"] == 0.97 and _acc(draft)["higher_is_better"] is True
    assert _acc(draft)["target"] == 0.9


# -- thresholds ----------------------------------------------------------------------------

NEW_METRIC = {"source": {"regex": "loss=([0-9.]+)"}}
SMUGGLED = {
    "min": ("experiments.train.metrics.acc.min", 0.1),
    "max": ("experiments.train.metrics.acc.max", 1.0),
    "tolerance": ("experiments.train.metrics.acc.tolerance", 0.5),
    "relative_tolerance": ("experiments.train.metrics.acc.relative_tolerance", 0.5),
    "metric-table": (
        "experiments.train.metrics.acc",
        {"source": SOURCE, "target": 0.5, "tolerance": 0.05},
    ),
    "metric-table-drops-target": ("experiments.train.metrics.acc", {"source": SOURCE}),
    "experiment-table": (
        "experiments.train",
        {"command": "python train.py", "metrics": {"acc": {"source": SOURCE, "min": 0.0}}},
    ),
    "experiments-table": ("experiments", {}),
    "new-metric-with-threshold": (
        "experiments.train.metrics.loss",
        {**NEW_METRIC, "max": 9.0},
    ),
    "tier-threshold": (
        "experiments.train.tiers.smoke",
        {"metrics": {"acc": {"source": SOURCE, "min": 0.0}}},
    ),
}


@pytest.mark.parametrize("case", sorted(SMUGGLED))
def test_no_proposal_sets_or_changes_a_threshold(case: str) -> None:
    path, value = SMUGGLED[case]
    draft = _draft()
    with pytest.raises(ToolError, match="targets and thresholds come from the paper"):
        draft.propose(path, value, "looks right")
    assert draft.data == BASE and draft.accepted == []


def test_a_new_metric_without_thresholds_is_accepted() -> None:
    """The contrast: the guard is about thresholds, not about metrics."""
    draft = _draft()
    assert draft.propose("experiments.train.metrics.loss", NEW_METRIC, "printed").startswith(
        "accepted"
    )


# -- the write deny-list -------------------------------------------------------------------

DENIED = [
    ".envrc",
    "src/.envrc",
    ".gitmodules",
    ".gitattributes",
    ".gitlab-ci.yml",
    ".travis.yml",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    ".github/workflows/ci.yml",
    ".github/actions/setup/action.yml",
    ".circleci/config.yml",
    ".gitlab/ci.yml",
    ".buildkite/pipeline.yml",
    ".reprobridge/state",
    "repro/check.py",
    "repro/launchers/train.sh",
    "reprobridge.toml",
    "./reprobridge.toml",
    "flake.nix",
    "flake.lock",
    ".git/config",
    ".git",
]


@pytest.mark.parametrize("rel", DENIED)
def test_writes_to_metadata_ci_direnv_and_rb_files_are_refused(rel: str) -> None:
    with pytest.raises(ToolError, match=r"refused|off limits"):
        check_rel(rel, write=True)


@pytest.mark.parametrize("rel", ["train.py", "src/model.py", ".github/README.md", "repro.md"])
def test_ordinary_files_may_be_written(rel: str) -> None:
    assert check_rel(rel, write=True) == rel


def test_denied_files_may_still_be_read() -> None:
    assert check_rel(".github/workflows/ci.yml", write=False) == ".github/workflows/ci.yml"
    assert check_rel("reprobridge.toml", write=False) == "reprobridge.toml"


# -- apply_patch ---------------------------------------------------------------------------

TRAIN = 'DATA = "/home/alice/data"\nprint("acc=0.9")\n'
FIX = """diff --git a/train.py b/train.py
--- a/train.py
+++ b/train.py
@@ -1,2 +1,2 @@
-DATA = "/home/alice/data"
+DATA = "data"
 print("acc=0.9")
"""


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    root = git_init(
        write_tree(
            tmp_path / "repo",
            {"train.py": TRAIN, "reprobridge.toml": "schema = 1\n", ".envrc": "ok\n"},
        )
    )
    (root / "link").symlink_to("/etc")
    (root / "src").mkdir()
    (root / "src" / "model.py").write_text("pass\n")
    (root / "inlink").symlink_to("src")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "link"], check=True)
    (tmp_path / "ws").mkdir()
    ws = Workspace.create(root, tmp_path / "ws")
    return Tools(ws, ManifestDraft(copy.deepcopy(BASE), existing(ws)), Redactor())


def test_apply_patch_changes_the_copy_and_records_the_reason(tools: Tools) -> None:
    result = tools.call("apply_patch", {"patch": FIX, "reason": "hard-coded home path"})
    assert not result.is_error, result.content
    assert (tools.workspace.root / "train.py").read_text().startswith('DATA = "data"')
    assert (tools.workspace.original / "train.py").read_text() == TRAIN
    [patch] = tools.workspace.patches()
    assert patch.path == "train.py" and patch.reason == "hard-coded home path"
    assert '+DATA = "data"' in patch.diff


def _retarget(diff: str, rel: str) -> str:
    return diff.replace("train.py", rel)


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        (_retarget(FIX, "reprobridge.toml"), "refused"),
        (_retarget(FIX, ".envrc"), "refused"),
        (_retarget(FIX, "repro/check.py"), "refused"),
        (_retarget(FIX, ".git/hooks/pre-commit"), "off limits"),
        (_retarget(FIX, "../outside.py"), "`..` is refused"),
        (_retarget(FIX, "link/passwd"), "symlink"),
        (
            "diff --git a/train.py b/.envrc\nsimilarity index 100%\n"
            "rename from train.py\nrename to .envrc\n",
            "refused",
        ),
        (FIX.replace("/home/alice/data", "/somewhere/else"), "does not apply"),
        ("just words, no diff\n", "no file paths"),
    ],
    ids=[
        "manifest",
        "envrc",
        "rb-file",
        "git-hook",
        "dotdot",
        "through-symlink",
        "rename-onto-denied",
        "does-not-apply",
        "no-paths",
    ],
)
def test_apply_patch_refusals_change_nothing(tools: Tools, patch: str, why: str) -> None:
    before = {rel: tools.workspace.current_bytes(rel) for rel in tools.workspace.file_list()}
    result = tools.call("apply_patch", {"patch": patch, "reason": "try"})
    assert result.is_error and why in result.content, result.content
    after = {rel: tools.workspace.current_bytes(rel) for rel in tools.workspace.file_list()}
    assert after == before and tools.workspace.patches() == []


def test_no_write_through_a_symlink_even_inside_the_copy(tools: Tools) -> None:
    """A link to a directory of the copy itself: the write would stay inside, but a write
    through any link is refused (what it points to can change)."""
    with pytest.raises(ToolError, match="inlink is a symlink"):
        tools.workspace.check_write("inlink/model.py")
    result = tools.call("write_file", {"path": "inlink/new.py", "content": "x", "reason": "r"})
    assert result.is_error and not (tools.workspace.root / "src" / "new.py").exists()


def test_patch_paths_sees_every_path_a_patch_names() -> None:
    """Rename and copy targets count even without a `diff --git` header naming them."""
    assert patch_paths("rename from train.py\nrename to .envrc\n") == ["train.py", ".envrc"]
    assert patch_paths("copy from a.py\ncopy to repro/x.py\n") == ["a.py", "repro/x.py"]
    assert patch_paths(FIX) == ["train.py"]
    assert patch_paths("--- /dev/null\n+++ b/new.py\n") == ["new.py"]


# -- diagnose: the probe's repairs as a tool --------------------------------------------


def test_diagnose_gives_the_probe_s_failure_and_repairs(tools: Tools) -> None:
    """The agent gets the deterministic loop's classification and repairs for a run it made,
    and applies them with propose_manifest: one set of rules for both."""
    log = (
        "Traceback (most recent call last):\nRuntimeError: Found no NVIDIA driver on your system.\n"
    )
    result = tools.call("diagnose", {"experiment": "train", "output": log, "exit_code": 1})
    assert not result.is_error, result.content
    doc = json.loads(result.content)
    assert doc["failure"]["kind"] == "gpu-needed"
    assert [(d["repair"], d["target"], d["value"]) for d in doc["repairs"]] == [
        ("gpu-needed", "experiments.train.hardware.gpus", 1)
    ]
    missing = "FileNotFoundError: [Errno 2] No such file or directory: 'data/x.csv'\n"
    doc = json.loads(
        tools.call("diagnose", {"experiment": "train", "output": missing, "exit_code": 1}).content
    )
    assert {d["repair"] for d in doc["repairs"]} == {"missing-data"}
    bad = tools.call("diagnose", {"experiment": "nope", "output": "", "exit_code": 0})
    assert bad.is_error and "no experiment 'nope'" in bad.content
