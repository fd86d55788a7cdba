"""PythonVersionDetector: declared versions and syntax lower bounds."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"pyversion"}))


def values(ctx) -> list[tuple[dict[str, str], list[str]]]:
    return [(f.value.to_json(), f.sources()) for f in ctx.of_kind("python_version")]


def test_python_version_file_with_system_is_a_warning(make_repo) -> None:
    ctx = run(make_repo, {".python-version": "system\n"})
    assert values(ctx) == []
    assert ctx.warnings[0].path == ".python-version"


def test_pyenv_and_binder_runtime(make_repo) -> None:
    assert values(run(make_repo, {".python-version": "# pinned\n3.11.6\n"})) == [
        ({"exact": "3.11"}, [".python-version:2"])
    ]
    # a binder/ directory replaces the root's files (repo2docker's rule)
    ctx = run(
        make_repo, {".python-version": "# pinned\n3.11.6\n", "binder/runtime.txt": "python-3.8\n"}
    )
    assert values(ctx) == [({"exact": "3.8"}, ["binder/runtime.txt:1"])]


def test_except_star(make_repo) -> None:
    code = "try:\n    pass\nexcept* ValueError:\n    pass\n"
    assert values(run(make_repo, {"a.py": code})) == [({"specifier": ">=3.11"}, ["a.py:1"])]


def test_fstring_debug_specifier_but_not_explicit_repr(make_repo) -> None:
    assert values(run(make_repo, {"a.py": 'x = 1\nprint(f"x={x!r}", f"{x==1}")\n'})) == []
    got = values(run(make_repo, {"b.py": 'x = 1\n\nprint(f"{x = :>4}")\n'}))
    assert got == [({"specifier": ">=3.8"}, ["b.py:3"])]


def test_unparsable_and_hintless_files_are_ignored(make_repo) -> None:
    files = {
        "py2.py": "print 'x'\nif (a := 1): pass\n",
        "plain.py": "def f(a, b):\n    return a + b\n",
        "comment.py": "# match x:\ns = 'y := 2'\n",
    }
    assert values(run(make_repo, files)) == []


def test_posonly_in_lambda(make_repo) -> None:
    got = values(run(make_repo, {"a.py": "f = lambda a, /, b: a\n"}))
    assert got == [({"specifier": ">=3.8"}, ["a.py:1"])]
