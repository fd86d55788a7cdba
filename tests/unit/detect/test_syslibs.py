"""SystemLibsDetector: apt commands, apt.txt, Python packages' native needs."""

from __future__ import annotations

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.derived.syslibs import apt_packages
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(
        RepoIndex.from_directory(root), only=detectors({"requirements", "conda", "syslibs"})
    )


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("sudo apt-get install -y libsndfile1 ffmpeg", ["libsndfile1", "ffmpeg"]),
        ("apt install git && pip install torch", ["git"]),
        ("RUN apt-get -qq install --no-install-recommends sox; rm -rf x", ["sox"]),
        ("apt-get install -y $PKGS libgl1=1.2 libc6:amd64", ["libgl1", "libc6"]),
        ("apt-get update", []),
        ("`apt-get install graphviz`.", ["graphviz"]),
    ],
)
def test_apt_packages(line: str, names: list[str]) -> None:
    assert apt_packages(line) == names


def test_python_packages_imply_libraries(make_repo) -> None:
    ctx = run(make_repo, {"requirements.txt": "librosa==0.10.1\nh5py\nopencv-python-headless\n"})
    got = {f.key: f.confidence for f in ctx.of_kind("system_library")}
    assert got == {"libsndfile": "medium", "hdf5": "low", "glib": "low"}
    libsndfile = next(f for f in ctx.of_kind("system_library") if f.key == "libsndfile")
    assert libsndfile.sources() == ["requirements.txt:1"]
    assert "librosa" in libsndfile.note


def test_conda_system_packages_are_reported_by_conda(make_repo) -> None:
    ctx = run(make_repo, {"environment.yml": "dependencies:\n  - ffmpeg\n  - pip\n"})
    assert [(f.detector, f.key) for f in ctx.of_kind("system_library")] == [("conda", "ffmpeg")]


def test_dockerfile_variants_and_skips(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "Dockerfile.gpu": (
                "RUN apt-get update && \\\n"
                "    apt-get install -y cuda-toolkit-12-1 nvidia-utils-535 python3.10-dev \\\n"
                "    libcudnn8 build-essential wget\n"
            ),
            "env/.venv/README.md": "apt-get install should-not-be-read\n",
        },
    )
    assert [(f.key, f.sources()) for f in ctx.of_kind("system_library")] == [
        ("wget", ["Dockerfile.gpu:1"])
    ]
