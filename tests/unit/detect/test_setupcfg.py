"""SetupCfgDetector: the declarative setuptools config."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"setupcfg"}))


def test_file_directive_defers_to_that_file(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "setup.cfg": "[options]\ninstall_requires = file: deps/run.txt\n",
            "deps/run.txt": "numpy==1.26.4\n",
        },
    )
    (numpy,) = ctx.of_kind("python_requirement")
    assert numpy.value.requirement == "numpy==1.26.4"
    assert numpy.sources() == ["deps/run.txt:1"]
    assert "setup.cfg:2" in numpy.note


def test_no_options_section_gives_nothing(make_repo) -> None:
    ctx = run(make_repo, {"setup.cfg": "[flake8]\nmax-line-length = 100\n"})
    assert ctx.findings == []


def test_percent_signs_are_not_interpolated(make_repo) -> None:
    ctx = run(
        make_repo, {"setup.cfg": "[options]\ninstall_requires =\n    foo @ https://x/a%20b.whl\n"}
    )
    (foo,) = ctx.of_kind("python_requirement")
    assert foo.value.requirement == "foo @ https://x/a%20b.whl"
