"""Shared fixtures and the fixture-repository collector.

Every ``tests/fixtures/repos/<case>/expected.toml`` becomes a test (tests/test_fixture_repos.py,
parametrized, so pytest never walks into fixture code): the directory
(minus ``expected.toml``) is indexed, the detectors run, and the expectations are checked:

.. code-block:: toml

    detectors = ["requirements"]      # optional: run only these (by Detector.name)
    paper = "paper.md"                # optional: passed as --paper

    [[finding]]                       # a finding that must exist (value: subset match)
    kind = "python_requirement"
    key = "torch"
    value = { requirement = "torch==2.1.2" }
    evidence = "requirements.txt:3"   # optional: one of its evidence strings
    confidence = "high"               # optional

    [[absent]]                        # no finding with this kind (and key, if given)
    kind = "python_requirement"
    key = "os"

    [error]                           # detection must fail with this error
    type = "DetectionError"
    match = "requirements.txt"

    [manifest]                        # optional: subset of the merged manifest (dict form)
    environment = { python = "3.10" }

    [merge]                           # optional: the merge's result
    experiments = ["train"]           # the experiment ids, in order
    dropped = ["tutorials/a.ipynb"]   # substrings of "other candidates" entries
    warnings = ["no experiment"]      # also: unmatched, decisions
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from pep517 import backend_source, pyproject

FIXTURES = Path(__file__).parent / "fixtures"
REPOS = FIXTURES / "repos"

collect_ignore_glob = ["fixtures/*"]

#: RB_CI_REQUIRE_TOOLS names tools that must be there (``.ci/run`` installs them): a test
#: skipped with a reason that names one of them fails instead. Without the variable a
#: missing tool is a skip, as a developer's machine may lack it.
REQUIRE_TOOLS_VAR = "RB_CI_REQUIRE_TOOLS"
#: Tool -> what a skip reason for that tool says (the reasons the tests give today).
TOOL_SKIP_REASONS: dict[str, re.Pattern[str]] = {
    "nix": re.compile(r"\bnix(-instantiate)? is not installed|\bnix needs root|nix stub needs"),
    "nix-trixie": re.compile(r"\bnix-trixie\b"),
    "bwrap": re.compile(r"\bbwrap\b|bubblewrap|sandbox unusable"),
    "chromium": re.compile(r"\bchromium\b"),
    "shellcheck": re.compile(r"\bshellcheck\b"),
    "git": re.compile(r"\bgit\b"),
    "uv": re.compile(r"\buv is not installed"),
    "slurm": re.compile(r"^slurm: "),
}


def required_tools() -> dict[str, re.Pattern[str]]:
    """The tools RB_CI_REQUIRE_TOOLS names (space or comma separated); an unknown name is a
    usage error, so a typo cannot quietly require nothing."""
    names = [n for n in re.split(r"[\s,]+", os.environ.get(REQUIRE_TOOLS_VAR, "")) if n]
    unknown = sorted(set(names) - set(TOOL_SKIP_REASONS))
    if unknown:
        raise pytest.UsageError(
            f"{REQUIRE_TOOLS_VAR}: unknown tool(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(TOOL_SKIP_REASONS))}"
        )
    return {n: TOOL_SKIP_REASONS[n] for n in names}


def required_tool_skipped(reason: str, tools: dict[str, re.Pattern[str]]) -> str | None:
    """The required tool a skip ``reason`` is about, or None."""
    return next((name for name, pattern in tools.items() if pattern.search(reason)), None)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REQUIRED] = required_tools()


_REQUIRED = pytest.StashKey[dict[str, re.Pattern[str]]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under RB_CI_REQUIRE_TOOLS, a skip for a required tool is a failure (CI installed it,
    so the skip means the install or the tool is broken, and the tests did not run)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    tools = item.config.stash.get(_REQUIRED, {})
    if not (tools and report.skipped and isinstance(report.longrepr, tuple)):
        return
    if hasattr(report, "wasxfail"):  # an expected failure, not a missing tool
        return
    reason = str(report.longrepr[2])
    tool = required_tool_skipped(reason, tools)
    if tool is not None:
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_TOOLS_VAR} requires {tool}, but the test was skipped: {reason}"


# Property tests are deterministic: the same examples on every run and every machine, and
# no example database (.hypothesis/) carrying failures from one run into the next, so a
# test cannot pass or fail by chance in CI. HYPOTHESIS_PROFILE=explore draws random
# examples instead, to hunt for new cases by hand.
# too_slow is a property of the machine's load, not of the code: a busy CI machine must not
# fail a deterministic property test for generating its examples slowly.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", derandomize=False, database=None, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_SECRET_VARS = re.compile(
    r"^(ANTHROPIC_|NIX_|CUDA_VISIBLE_DEVICES$|GIT_|UV_|VIRTUAL_ENV$|RB_(BACKEND|SIGN_KEY|AGENT_))"
)


@pytest.fixture(scope="session", autouse=True)
def _isolate_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """rb's state directory (the bundles this operator started,
    reprobridge.evidence.provenance) is the operator's, not the tests'. Session-wide, so
    that session fixtures that run an audit record it where the tests look."""
    state = tmp_path_factory.getbasetemp() / "xdg-state"
    state.mkdir(exist_ok=True)
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(state)
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's API keys, nix settings, git identity or rb settings."""
    for name in list(os.environ):
        if _SECRET_VARS.match(name):
            monkeypatch.delenv(name, raising=False)
    # `rb init` probes by default (runs the draft's experiments): the tests of static
    # recovery switch it off as an operator would; tests/unit/probe turn it on.
    monkeypatch.setenv("RB_PROBE", "0")
    # rb's user config ($XDG_CONFIG_HOME/rb/config.toml) is the operator's: not the tests'.
    xdg = tmp_path_factory.getbasetemp() / "xdg-config"
    xdg.mkdir(exist_ok=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    # ... and so is its state (the bundles it started, reprobridge.evidence.provenance).
    state = tmp_path_factory.getbasetemp() / "xdg-state"
    state.mkdir(exist_ok=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.org")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.org")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    # Commit dates become environment.exclude_newer: fixed, so runs render the same bytes.
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2023-11-14T22:13:20+00:00")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2023-11-14T22:13:20+00:00")


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> content) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def git_init(root: Path, *, commit: bool = True) -> Path:
    """Make ``root`` a git repository, optionally with everything committed."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    if commit:
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(
            ["git", "-C", str(root), "commit", "-q", "--allow-empty", "-m", "initial"], check=True
        )
    return root


@pytest.fixture
def repo_at():
    """``repo_at(path, files)`` -> ``path`` made into a committed git repository of ``files``."""

    def _at(root: Path, files: dict[str, str | bytes]) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        write_tree(root, files)
        return git_init(root)

    return _at


@pytest.fixture
def make_repo(tmp_path: Path):
    """``make_repo({"train.py": "...", ...}, git=True)`` -> path of a fresh repository."""
    counter = iter(range(1000))

    def _make(files: dict[str, str | bytes], *, git: bool = True, commit: bool = True) -> Path:
        root = tmp_path / f"repo{next(counter)}"
        root.mkdir()
        write_tree(root, files)
        if git:
            git_init(root, commit=commit)
        return root

    return _make


@pytest.fixture
def tiny_repo(make_repo):
    """``tiny_repo(script, timeout=, metric=, files=, name=)`` -> a committed repository after
    `rb init`, whose one experiment ``main`` runs ``bash run.sh`` (``script``) and, with
    ``metric``, is judged on ``acc=<value>`` with ``min = 0.5``."""
    import sys

    from reprobridge.initializer import init_repository

    def _make(
        script: str = "echo acc=0.9\n",
        *,
        timeout: str = "10m",
        metric: bool = True,
        files: dict[str, str] | None = None,
        name: str = "tiny",
    ) -> Path:
        manifest = f"""schema = 1
[project]
name = "{name}"
[environment]
python = "{sys.version_info.major}.{sys.version_info.minor}"
nixpkgs = {{release = "nixos-25.11", rev = "b6018f87da91d19d0ab4cf979885689b469cdd41", narHash = "sha256-twXPFqFsrrY5r28Zh7Homgcp2gUMBgQ6WDS98Q/3xFI=", lastModified = 1782847189}}
[experiments.main]
command = "bash run.sh"
timeout = "{timeout}"
"""
        if metric:
            manifest += (
                '[experiments.main.metrics.acc]\nsource = {regex = "acc=([0-9.]+)"}\nmin = 0.5\n'
            )
        root = make_repo({"run.sh": script, "reprobridge.toml": manifest, **(files or {})})
        init_repository(root, lock="never")
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "rb init"], check=True)
        return root

    return _make


def tar_member(name: str, kind: bytes = b"0", **attrs: object):
    """A ``tarfile.TarInfo`` named ``name`` of type ``kind`` (default: regular file) with
    ``attrs`` set, for crafting (hostile) archives."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


@pytest.fixture
def no_tar_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    """This Python's tarfile as Debian 12's 3.11.2 has it: no ``data_filter``, no
    ``FilterError``, and ``extract``/``extractall`` that refuse a ``filter=`` keyword."""
    import tarfile

    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    monkeypatch.delattr(tarfile, "FilterError", raising=False)
    for method in ("extract", "extractall"):
        original = getattr(tarfile.TarFile, method)

        def no_filter(self, *args, _original=original, _method=method, **kwargs):
            if "filter" in kwargs:
                raise TypeError(f"TarFile.{_method}() got an unexpected keyword argument 'filter'")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(tarfile.TarFile, method, no_filter)


@pytest.fixture
def hostile_package():
    """``hostile_package(dir, escape)`` -> the files of ``evilpkg`` (no wheel; its version
    is dynamic, so even resolving it needs its build backend) under ``dir``, whose build
    writes to the host path ``escape``."""

    def _files(directory: str, escape: Path) -> dict[str, str]:
        # Building it "attacks" (issue 8), then makes a real wheel whose module records
        # what the build saw (``evilpkg.SEEN``).
        backend = backend_source("evilpkg", "1.0", '"SEEN = %r\\n" % seen', escape=escape)
        return {
            f"{directory}/pyproject.toml": pyproject("evilpkg"),
            f"{directory}/backend.py": backend,
        }

    return _files
