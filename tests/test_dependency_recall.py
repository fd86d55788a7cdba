"""Dependency recall and precision over the fixture repositories that state a ground truth.

A fixture's ``expected.toml`` may hold ``[truth] requirements = [...]``: the distributions
(canonical names) its experiments need to run, written by hand. rb's manifest
(``environment.python_requirements``) must cover at least :data:`MIN_RECALL` of them over
all such fixtures (issue 9's target) and list nothing a fixture marks as not needed (a test's
import, another sub-project's requirement): precision is held to :data:`MIN_PRECISION`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.recovery.merge import merge_findings

REPOS = Path(__file__).parent / "fixtures" / "repos"
MIN_RECALL = 0.95
MIN_PRECISION = 0.95


def _cases() -> list[tuple[Path, set[str]]]:
    out = []
    for spec_path in sorted(REPOS.glob("*/expected.toml")):
        truth = tomllib.loads(spec_path.read_text()).get("truth", {}).get("requirements")
        if truth is not None:
            out.append((spec_path.parent, {canonicalize_name(t) for t in truth}))
    return out


def _recovered(case: Path) -> set[str]:
    full = RepoIndex.from_directory(case)
    index = RepoIndex(full.root, [f for f in full.files if f.path != "expected.toml"])
    manifest = merge_findings(detect_repo(index), repo_name=case.name).manifest
    return {
        canonicalize_name(Requirement(r).name) for r in manifest.environment.python_requirements
    }


def test_dependency_recall_and_precision() -> None:
    cases = _cases()
    assert len(cases) >= 10
    hits = wanted = listed = 0
    report = []
    for case, truth in cases:
        got = _recovered(case)
        hits += len(truth & got)
        wanted += len(truth)
        listed += len(got)
        if truth != got:
            report.append(
                f"{case.name}: missing {sorted(truth - got)}, extra {sorted(got - truth)}"
            )
    recall, precision = hits / wanted, hits / listed
    assert recall >= MIN_RECALL, f"recall {recall:.3f}\n" + "\n".join(report)
    assert precision >= MIN_PRECISION, f"precision {precision:.3f}\n" + "\n".join(report)
