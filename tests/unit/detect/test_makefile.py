"""MakefileDetector: targets whose recipes run Python."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.makefile import expand, parse_makefile
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"makefile"}))


def test_parse_variables_phony_and_multi_target_rules() -> None:
    variables, phony, rules = parse_makefile(
        "PY := python\nCFG ?= a.yaml\n.PHONY: a b\na b: dep ; $(PY) x.py\n\t$(PY) y.py --cfg ${CFG}\n"
        "%.o: %.c\n\tgcc $<\nX = a:b\n"
    )
    assert variables == {"PY": "python", "CFG": "a.yaml", "X": "a:b"}
    assert phony == {"a", "b"}
    assert [r.target for r in rules] == ["a", "b", "%.o"]
    assert [line for _, line in rules[0].recipe] == ["$(PY) x.py", "$(PY) y.py --cfg ${CFG}"]
    assert (
        expand("$(PY) y.py --cfg ${CFG} $(UNKNOWN)", variables)
        == "python y.py --cfg a.yaml $(UNKNOWN)"
    )


def test_subdirectory_makefile_and_skipped_targets(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "exp/Makefile": "run:\n\tpython main.py\nlint:\n\tpython -m ruff .\ntest:\n\tpython t.py\n"
            "%.json: %.yaml\n\tpython conv.py $<\n$(OUT):\n\tpython o.py\n",
        },
    )
    assert [(f.key, f.value.command) for f in ctx.findings] == [("exp-run", "make -C exp run")]


def test_target_without_python_is_not_an_experiment(make_repo) -> None:
    ctx = run(make_repo, {"Makefile": "data:\n\twget http://x/y.zip\nbuild:\n\tgcc a.c\n"})
    assert ctx.findings == []


def test_unreadable_files_are_skipped_with_one_warning_each(make_repo) -> None:
    # A Makefile, shell script and notebook that are not text (a NUL byte) are skipped, each
    # with the same warning naming it (DetectContext.text_or_warn); nothing fails.
    root = make_repo(
        {"Makefile": b"run:\x00\n", "run.sh": b"python x.py\x00\n", "nb.ipynb": b"{\x00}"},
        git=False,
    )
    ctx = detect_repo(
        RepoIndex.from_directory(root), only=detectors({"makefile", "shell", "notebooks"})
    )
    assert ctx.findings == []
    why = "not readable as text (binary, too large or unsafe)"
    assert sorted((w.path, w.message) for w in ctx.warnings) == [
        ("Makefile", f"skipped: {why}"),
        ("nb.ipynb", f"skipped notebook: {why}"),
        ("run.sh", f"skipped: {why}"),
    ]


def test_vendored_and_excluded_files_are_neither_read_nor_warned(make_repo) -> None:
    # DetectContext.own_texts: files under a skip_path directory (here a virtualenv) are not
    # the repository's own, and a shell script named as a non-experiment (install.sh) is
    # filtered before it is read: unreadable as they are, none of them is warned about.
    root = make_repo(
        {
            ".venv/Makefile": b"run:\x00\n",
            ".venv/run.sh": b"python x.py\x00\n",
            ".venv/nb.ipynb": b"{\x00}",
            "install.sh": b"python setup.py\x00\n",
            "run.sh": "python train.py\n",
        },
        git=False,
    )
    ctx = detect_repo(
        RepoIndex.from_directory(root), only=detectors({"makefile", "shell", "notebooks"})
    )
    assert ctx.warnings == []
    assert [f.value.entry for f in ctx.findings] == ["run.sh"]
