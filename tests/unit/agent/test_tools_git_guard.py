"""The agent's write guard refuses repository metadata in any spelling (issue 8).

The old guard compared the first component with ``.git`` exactly, so ``.GIT/config`` (the
same file on a case-insensitive file system) and a submodule's ``sub/.git/hooks/x`` (a hook
git runs) were writable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.agent.workspace import ToolError, Workspace, check_rel


@pytest.mark.parametrize(
    "rel",
    [
        ".git/config",
        ".GIT/config",
        ".Git/hooks/pre-commit",
        "sub/.git/hooks/x",
        "a/b/.GiT/config",
        ".git./config",
        ".git",
        "sub/.git",
        ".GITHUB/workflows/ci.yml",
        "sub/.ENVRC",
        "REPROBRIDGE.TOML",
    ],
)
def test_metadata_is_refused_in_any_case_and_any_directory(rel: str, make_repo) -> None:
    with pytest.raises(ToolError):
        check_rel(rel, write=True)
    root: Path = make_repo({"a.py": "x = 1\n"})
    parent = root.parent / "ws"
    parent.mkdir()
    ws = Workspace.create(root, parent)
    with pytest.raises(ToolError):
        ws.write(rel, b"[core]\n\thooksPath = /tmp/evil\n")
    assert not any(p.name.casefold() == "config" for p in ws.root.rglob("*"))


@pytest.mark.parametrize("rel", ["src/gitlab.py", "docs/.gitkeep", "my.git.txt", "sub/git/x"])
def test_ordinary_names_stay_writable(rel: str) -> None:
    assert check_rel(rel, write=True) == rel
