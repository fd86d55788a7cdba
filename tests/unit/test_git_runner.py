"""The one git runner (:func:`reprobridge._proc.git`): the only module that starts git,
and what it starts runs no program a repository's config or attributes name, with none
of the operator's environment."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from hostile_git import arm, ran, traps_are_real

import reprobridge
from reprobridge import _proc

PACKAGE = Path(reprobridge.__file__).parent
RUNNER = PACKAGE / "_proc" / "__init__.py"
#: ``git --version`` (rb doctor's probe) runs in no repository and reads no config.
HARMLESS = {("git", "--version")}


def _starts_git(node: ast.Call) -> tuple[str, ...] | None:
    """The literal argv head of a call whose first argument is a list or tuple literal
    starting with the string "git" (``run(["git", ...])``, ``Popen(("git", ...))``), or a
    command string that starts with the word git (``run("git add -A", shell=True)``)."""
    first = node.args[0] if node.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        words = first.value.split()
        # Two words at least: a bare "git" is a name (a doctor check), not a command.
        return tuple(words) if words[:1] == ["git"] and len(words) > 1 else None
    if not isinstance(first, ast.List | ast.Tuple):
        return None
    elts = node.args[0].elts
    if not elts or not (isinstance(elts[0], ast.Constant) and elts[0].value == "git"):
        return None
    head = []
    for e in elts:
        if not (isinstance(e, ast.Constant) and isinstance(e.value, str)):
            break
        head.append(e.value)
    return tuple(head)


def test_only_the_runner_starts_git() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == RUNNER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                head = _starts_git(node)
                if head is not None and head not in HARMLESS:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {head}")
    assert offenders == [], "start git through reprobridge._proc.git: " + ", ".join(offenders)


def test_the_grep_sees_a_git_call(tmp_path: Path) -> None:
    """The check above finds the forms it forbids (else it would pass vacuously)."""
    code = 'subprocess.run(["git", "add", "-A"], env=env)\nos.system("git status")\n'
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)]
    found = [_starts_git(c) for c in calls if _starts_git(c)]
    assert found == [("git", "add", "-A"), ("git", "status")]


@pytest.fixture
def hostile(make_repo, tmp_path: Path) -> tuple[Path, Path]:
    root = make_repo({"train.py": "print('acc=0.9')\n", "notes.txt": "n\n"})
    marks = tmp_path / "marks"
    arm(root, marks)
    traps_are_real(root, marks)
    return root, marks


def test_runner_runs_no_program_the_repository_names(hostile: tuple[Path, Path]) -> None:
    root, marks = hostile
    (root / "train.py").write_text("print('acc=0.8')\n")  # dirty: status and diff read it
    (root / "new.txt").write_text("new\n")
    ident = ("-c", "user.name=t", "-c", "user.email=t@example.invalid")
    for args in (
        ("status", "--porcelain"),
        ("diff", "HEAD"),
        ("diff", "HEAD", "--stat"),
        ("log", "-1", "-p"),
        ("log", "-1", "--format=%H %G?"),
        ("show", "HEAD"),
        ("show", "-s", "--format=%ct", "HEAD"),
        ("archive", "--format=tar", "HEAD"),
        ("ls-files", "-co", "--exclude-standard"),
        ("hash-object", "train.py"),
        ("add", "--intent-to-add", "new.txt"),
        ("add", "-A"),
        (*ident, "commit", "-q", "-m", "by the runner"),
        ("checkout", "-q", "HEAD~1", "--", "train.py"),
        ("stash",),
    ):
        got = _proc.git(root, *args, check=False)
        assert got.returncode == 0, (args, got.stderr)
        assert ran(marks) == [], args
    with _proc.git_stream(root, "archive", "--format=tar", "HEAD") as pipe:
        assert pipe.read()
    assert ran(marks) == []


def test_a_driver_name_git_would_misparse_in_c_is_still_overridden(make_repo, tmp_path) -> None:
    """A driver name is the repository's: one with ``=`` and a space would split wrongly
    as ``-c name=value``; the runner passes keys and values apart."""
    root = make_repo({"a.txt": "a\n"})
    marker = tmp_path / "marker"
    subprocess.run(
        ["git", "-C", str(root), "config", "filter.a=b c.clean", f"touch {marker}; cat"],
        check=True,
    )
    (root / ".gitattributes").write_text("* filter=a=b\\ c\n")
    (root / "a.txt").write_text("changed\n")
    assert _proc.git_driver_overrides(root)[0][0] == "filter.a=b c.clean"
    _proc.git(root, "add", "-A")
    _proc.git(root, "diff", "--cached")
    assert not marker.exists()


def test_git_environment_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /tmp/x'")
    monkeypatch.setenv("GIT_SSH_COMMAND", "touch /tmp/x")
    env = _proc.git_env()
    extra = {k for k in env if not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}
    assert extra <= {"PATH", "HOME", "LC_ALL", "TZ", "GIT_CONFIG_COUNT", *_proc._GIT_SAFE_ENV}
    home = Path(env["HOME"])
    assert home.is_dir() and list(home.iterdir()) == []
    with pytest.raises(ValueError, match="AWS_SECRET_ACCESS_KEY"):
        _proc.git(".", "status", extra_env={"AWS_SECRET_ACCESS_KEY": "x"})
