"""RequirementsDetector: pip's line format, includes, limits and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.declared.requirements import is_requirements_file, logical_lines
from reprobridge.detect.findings import IndexValue, PythonVersionValue
from reprobridge.detect.index import MAX_TEXT_BYTES, RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.errors import DetectionError


def run(make_repo, files: dict[str, str | bytes], *names: str):
    root = make_repo(files, git=False)
    return detect_repo(
        RepoIndex.from_directory(root), only=detectors(set(names or ("requirements",)))
    )


def reqs(ctx) -> dict[str, str]:
    return {f.key: f.value.requirement for f in ctx.of_kind("python_requirement")}


def test_file_above_the_size_limit_is_an_error(tmp_path: Path) -> None:
    big = tmp_path / "requirements.txt"
    with open(big, "wb") as fh:
        fh.write(b"numpy\n")
        fh.truncate(MAX_TEXT_BYTES + 1)  # sparse: cheap to create
    ctx_index = RepoIndex.from_directory(tmp_path)
    with pytest.raises(DetectionError, match=r"requirements\.txt: .*above the 5 MB limit"):
        detect_repo(ctx_index, only=detectors({"requirements"}))


def test_self_include_and_mutual_include_terminate(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": "-r requirements.txt\n-r requirements-gpu.txt\nnumpy\n",
            "requirements-gpu.txt": "--requirement=requirements.txt\ncupy-cuda12x\n",
        },
    )
    keys = [f.key for f in ctx.of_kind("python_requirement")]
    assert sorted(keys) == ["cupy-cuda12x", "numpy"]


def test_compact_include_and_index_url(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": "-rdeps/base.in\n--index-url https://mirror.example/simple\n",
            "deps/base.in": "einops==0.7.0\n",
        },
    )
    assert reqs(ctx) == {"einops": "einops==0.7.0"}
    (index,) = ctx.of_kind("python_index")
    assert index.value == IndexValue("https://mirror.example/simple", "index")
    assert index.sources() == ["requirements.txt:2"]


def test_include_outside_the_repository_is_warned_not_read(make_repo) -> None:
    ctx = run(make_repo, {"requirements.txt": "-r /etc/passwd\n-r ../../x.txt\nnumpy\n"})
    assert reqs(ctx) == {"numpy": "numpy"}
    assert [w.message for w in ctx.warnings] == [
        "line 1: requirements file /etc/passwd is outside the repository",
        "line 2: requirements file ../../x.txt is outside the repository",
    ]


def test_bad_line_in_an_included_file_names_that_file(make_repo) -> None:
    files = {"requirements.txt": "-r sub/more.txt\n", "sub/more.txt": "ok\nnot a requirement!\n"}
    with pytest.raises(DetectionError) as info:
        run(make_repo, files)
    assert str(info.value).startswith("sub/more.txt: line 2: not a valid requirement")
    assert "\n" not in str(info.value)


def test_vcs_urls_editables_and_local_paths(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": (
                "-e git+https://github.com/a/foo.git@v2#egg=foo&subdirectory=py\n"
                "git+https://github.com/NVIDIA/apex.git\n"
                "https://example.org/dist/bar-1.2.tar.gz\n"
                "-e .\n"
                "./wheels/baz-1.0-py3-none-any.whl\n"
                "file:///opt/pkg\n"
                "libs/local_pkg\n"
            )
        },
    )
    assert reqs(ctx) == {
        "foo": "foo @ git+https://github.com/a/foo.git@v2#subdirectory=py",
        "apex": "apex @ git+https://github.com/NVIDIA/apex.git",
        "bar": "bar @ https://example.org/dist/bar-1.2.tar.gz",
    }


def test_python_listed_as_requirement_is_a_python_version(make_repo) -> None:
    ctx = run(make_repo, {"requirements.txt": "python>=3.8\nnumpy\n"})
    (version,) = ctx.of_kind("python_version")
    assert version.value == PythonVersionValue(specifier=">=3.8")
    assert "python" not in reqs(ctx)


def test_constraints_annotate_but_never_add(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": "-c constraints.txt\nnumpy\n",
            "constraints.txt": "numpy==1.26.4\nscipy==1.11.0\n",
        },
    )
    (numpy,) = ctx.of_kind("python_requirement")
    assert numpy.value.requirement == "numpy"
    assert numpy.note == "constrained to numpy==1.26.4 by constraints.txt:1"


def test_per_requirement_options_and_markers(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": (
                "torch==2.1.2 --hash=sha256:aa --hash=sha256:bb\n"
                "pywin32 ; sys_platform == 'win32'\n"
            )
        },
    )
    assert reqs(ctx) == {
        "torch": "torch==2.1.2",
        "pywin32": 'pywin32; sys_platform == "win32"',
    }


def test_logical_lines_join_continuations_and_strip_comments() -> None:
    text = "a \\\n  >=1 # c\n# only a comment\n\nurl#egg=x\nb # trailing \\\nc\n"
    assert logical_lines(text) == [(1, "a >=1"), (5, "url#egg=x"), (6, "b"), (7, "c")]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("requirements.txt", True),
        ("requirements-dev.txt", True),
        ("dev_requirements.txt", True),
        ("requirements/base.txt", True),
        ("docs/requirements.txt", True),
        ("requirements.in", False),
        ("notes.txt", False),
        (".venv/lib/requirements.txt", False),
    ],
)
def test_which_files_are_read(path: str, expected: bool) -> None:
    assert is_requirements_file(path) is expected
