"""RB_CI_REQUIRE_TOOLS: in CI, a test skipped because a tool .ci/run installed is missing
fails instead (tests/conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

SKIPS = """
import pytest

def test_needs_shellcheck():
    pytest.skip("shellcheck is not installed")

@pytest.mark.skipif(True, reason="sandbox unusable: no user namespaces")
def test_needs_bwrap():
    pass

def test_other_reason():
    pytest.skip("no working python3.8 on this machine")

@pytest.mark.xfail(reason="chromium renders this wrong", strict=True)
def test_expected_failure():
    assert False
"""


def run_pytest(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    env = {k: v for k, v in os.environ.items() if k != "RB_CI_REQUIRE_TOOLS"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT)])
    if require is not None:
        env["RB_CI_REQUIRE_TOOLS"] = require
    return subprocess.run(
        # The project's conftest as a plugin: the hook under test, on a throwaway test file.
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "conftest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            str(tmp_path / "test_skips.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_without_the_variable_missing_tools_are_skips(tmp_path: Path) -> None:
    out = run_pytest(tmp_path, None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 skipped, 1 xfailed" in out.stdout


def test_required_tools_turn_their_skips_into_failures(tmp_path: Path) -> None:
    out = run_pytest(tmp_path, "shellcheck, bwrap git")
    assert out.returncode == 1, out.stdout + out.stderr
    # A skip in the call is a failure, a skipif (setup) an error: either fails the run.
    assert "1 failed, 1 skipped, 1 xfailed, 1 error" in out.stdout
    assert "RB_CI_REQUIRE_TOOLS requires shellcheck, but the test was skipped" in out.stdout
    assert "RB_CI_REQUIRE_TOOLS requires bwrap" in out.stdout


def test_an_unknown_tool_name_is_a_usage_error(tmp_path: Path) -> None:
    out = run_pytest(tmp_path, "shelcheck")
    assert out.returncode == 4, out.stdout + out.stderr
    assert "unknown tool(s) shelcheck" in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("reason", "tool"),
    [
        ("nix is not installed (apt-get install nix-bin)", "nix"),
        ("nix-trixie is not installed", "nix-trixie"),
        ("nix-instantiate is not installed", "nix"),
        ("/usr/bin/bwrap missing", "bwrap"),
        ("bubblewrap unusable here: no userns", "bwrap"),
        ("chromium is not installed (apt-get install chromium; .ci/run does)", "chromium"),
        ("coreutils/findutils not available", None),
        ("golden files rewritten", None),
    ],
)
def test_skip_reasons_map_to_tools(reason: str, tool: str | None) -> None:
    # By path: under a whole-suite run, ``import conftest`` may give another directory's.
    spec = importlib.util.spec_from_file_location("rb_tests_root_conftest", TESTS / "conftest.py")
    assert spec is not None and spec.loader is not None
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    assert root_conftest.required_tool_skipped(reason, root_conftest.TOOL_SKIP_REASONS) == tool
