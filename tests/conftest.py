"""Shared fixtures and the fixture-repository collector.

Every ``tests/fixtures/repos/<case>/expected.toml`` becomes a test item: the directory
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
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPOS = FIXTURES / "repos"

collect_ignore_glob = ["fixtures/*"]

_SECRET_VARS = re.compile(r"^(ANTHROPIC_|NIX_|CUDA_VISIBLE_DEVICES$|GIT_|UV_|VIRTUAL_ENV$)")


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's API keys, nix settings or git identity."""
    for name in list(os.environ):
        if _SECRET_VARS.match(name):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.org")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.org")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")


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


# -- fixture repositories as tests --------------------------------------------------------


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name == "expected.toml" and REPOS in file_path.parents:
        return ExpectedFile.from_parent(parent, path=file_path)
    return None


class ExpectedFile(pytest.File):
    def collect(self):  # type: ignore[no-untyped-def]
        yield ExpectedItem.from_parent(self, name=self.path.parent.name)


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            return abs(float(expected) - float(actual)) < 1e-9
        except (TypeError, ValueError):
            return False
    return expected == actual


class ExpectedItem(pytest.Item):
    def runtest(self) -> None:
        from reprobridge import errors
        from reprobridge.detect import detect_repo
        from reprobridge.detect.index import RepoIndex
        from reprobridge.detect.registry import detectors

        spec = tomllib.loads(self.path.read_text())
        root = self.path.parent
        index = RepoIndex.from_directory(root)
        index = RepoIndex(index.root, [f for f in index.files if f.path != "expected.toml"])
        only = detectors(set(spec["detectors"])) if "detectors" in spec else None
        if "error" in spec:
            err_type = getattr(errors, spec["error"]["type"])
            with pytest.raises(err_type, match=spec["error"].get("match", "")):
                detect_repo(index, paper_path=spec.get("paper"), only=only)
            return
        ctx = detect_repo(index, paper_path=spec.get("paper"), only=only)
        findings = ctx.findings
        for want in spec.get("finding", []):
            matches = [
                f
                for f in findings
                if f.kind == want["kind"]
                and ("key" not in want or f.key == want["key"])
                and _subset(want.get("value", {}), f.value)
                and ("evidence" not in want or want["evidence"] in f.sources())
                and ("confidence" not in want or want["confidence"] == f.confidence)
            ]
            assert matches, f"no finding matches {want}\nfindings of that kind:\n" + "\n".join(
                f"  {f.key} {f.value} {f.sources()} {f.confidence}"
                for f in findings
                if f.kind == want["kind"]
            )
        for absent in spec.get("absent", []):
            hits = [
                f
                for f in findings
                if f.kind == absent["kind"] and ("key" not in absent or f.key == absent["key"])
            ]
            assert not hits, f"unexpected findings for {absent}: {[(f.key, f.value) for f in hits]}"
        if "manifest" in spec:
            from reprobridge.recovery.merge import merge_findings

            merged = merge_findings(ctx, repo_name=root.name).manifest
            as_dict = merged.model_dump(mode="json", by_alias=True)
            assert _subset(spec["manifest"], as_dict), (
                f"manifest differs from expected subset\nexpected: {spec['manifest']}\nactual: {as_dict}"
            )

    def repr_failure(self, excinfo, style=None):  # type: ignore[no-untyped-def]
        return f"{self.path}: {excinfo.getrepr(style='short')}"

    def reportinfo(self):  # type: ignore[no-untyped-def]
        return self.path, 0, f"fixture repo: {self.name}"
