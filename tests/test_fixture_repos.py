"""One test per fixture repository: ``tests/fixtures/repos/<case>/expected.toml``.

The expected.toml format is documented in tests/conftest.py. Adding a scenario means adding
a directory, not writing code. The fixtures are data: pytest never collects inside them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from reprobridge import errors
from reprobridge.detect import detect_repo
from reprobridge.detect.findings import FindingValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors

REPOS = Path(__file__).parent / "fixtures" / "repos"
CASES = sorted(p.parent for p in REPOS.glob("*/expected.toml"))


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list) and any(isinstance(v, dict) for v in expected):
        # Tables in a list (outputs, a tier's edits): each a subset of its counterpart, so
        # an expected.toml need not spell the None values TOML cannot write.
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            return abs(float(expected) - float(actual)) < 1e-9
        except (TypeError, ValueError):
            return False
    return bool(expected == actual)


def _plain(value: Any) -> Any:
    """A finding's value as the dict expected.toml describes (typed kinds: ``to_json()``)."""
    return value.to_json() if isinstance(value, FindingValue) else value


def _describe(findings: list[Any], kind: str) -> str:
    return "\n".join(
        f"  {f.key} {f.value} {f.sources()} {f.confidence}" for f in findings if f.kind == kind
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fixture_repo(case: Path) -> None:
    spec = tomllib.loads((case / "expected.toml").read_text())
    full = RepoIndex.from_directory(case)
    index = RepoIndex(full.root, [f for f in full.files if f.path != "expected.toml"])
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
            and _subset(want.get("value", {}), _plain(f.value))
            and ("evidence" not in want or want["evidence"] in f.sources())
            and ("confidence" not in want or want["confidence"] == f.confidence)
        ]
        assert matches, (
            f"no finding matches {want}\nfindings of that kind:\n{_describe(findings, want['kind'])}"
        )
    for absent in spec.get("absent", []):
        hits = [
            f
            for f in findings
            if f.kind == absent["kind"] and ("key" not in absent or f.key == absent["key"])
        ]
        assert not hits, f"unexpected findings for {absent}: {[(f.key, f.value) for f in hits]}"
    if "manifest" in spec or "merge" in spec:
        from reprobridge.recovery.merge import merge_findings

        merged = merge_findings(ctx, repo_name=case.name, paper_path=spec.get("paper"))
        _check_merge(spec.get("merge", {}), merged)
    if "manifest" in spec:
        as_dict = merged.manifest.model_dump(mode="json", by_alias=True)
        assert _subset(spec["manifest"], as_dict), (
            f"manifest differs from the expected subset\nexpected: {spec['manifest']}\nactual: {as_dict}"
        )


def _check_merge(want: dict[str, Any], merged: Any) -> None:
    """``[merge]``: ``experiments`` (the ids, in order), and substrings each of which some
    ``dropped``/``warnings``/``unmatched``/``decisions`` entry must contain."""
    if "experiments" in want:
        assert list(merged.manifest.experiments) == want["experiments"], (
            f"experiments differ; dropped: {merged.notes.dropped_experiments}"
        )
    for key, attr in (
        ("dropped", "dropped_experiments"),
        ("warnings", "warnings"),
        ("unmatched", "unmatched_targets"),
        ("decisions", "decisions"),
    ):
        have = getattr(merged.notes, attr)
        for text in want.get(key, []):
            assert any(text in h for h in have), f"no {attr} entry contains {text!r}: {have}"
