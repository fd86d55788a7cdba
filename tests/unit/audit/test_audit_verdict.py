"""No verdict passes on nothing (issue 8, items 7 and 8), with real audits.

An experiment without metrics, a metric without a threshold, or a smoke tier whose only
thresholds are the paper's (they describe full runs) gave PASS and exit 0 on the old main;
the bundled example's smoke audit FAILed the paper's claim on two-epoch models. Now each
is INCOMPLETE (exit 20) with a line naming the manifest key to add, `rb verify` derives
the same, and the full tier of the example still passes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rbcli import rb

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.judge import ExperimentVerdict, Verdict
from reprobridge.audit.verdicts import overall_verdict
from reprobridge.audit.verify import verify_audit
from reprobridge.errors import EXIT_INCOMPLETE
from reprobridge.evidence.bundle import Bundle
from reprobridge.evidence.records import ClaimResult
from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository

AuditCli = Callable[..., tuple[int, dict[str, Any]]]


@pytest.fixture
def audit_cli() -> AuditCli:
    """``audit_cli(root, *extra)`` -> (exit status, the --json summary) of one host run."""

    def _run(root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
        out = rb(
            "audit", "--runs", "1", "--backend", "host", "--json", "-q", "-C", str(root), *extra
        )
        assert out.stdout, out.stderr
        return out.returncode, json.loads(out.stdout)

    return _run


def test_experiment_without_metrics_is_incomplete_exit_20(
    tiny_repo: Callable[..., Path], audit_cli: AuditCli
) -> None:
    root = tiny_repo("echo done\n", metric=False)
    code, summary = audit_cli(root)
    assert code == EXIT_INCOMPLETE == 20, summary
    assert summary["verdict"] == "INCOMPLETE" and summary["passed"] is False
    [line] = summary["incomplete"]
    assert line.startswith("main: metric not-applicable: no metrics declared for tier full")
    assert "[experiments.<id>.metrics.<name>]" in line
    # Human output: the gap and the verdict.
    out = rb("audit", "--runs", "1", "--backend", "host", "-q", "-C", str(root))
    assert out.returncode == 20
    assert "not judged: main: metric not-applicable" in out.stdout
    assert "verdict: INCOMPLETE" in out.stdout


def test_metric_without_threshold_is_incomplete_and_verify_agrees(
    tiny_repo: Callable[..., Path],
) -> None:
    root = tiny_repo("echo acc=0.9 loss=0.3\n")
    manifest = root / "reprobridge.toml"
    manifest.write_text(
        manifest.read_text()
        + '\n[experiments.main.metrics.loss]\nsource = {regex = "loss=([0-9.]+)"}\n'
    )
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    s = result.summary
    assert (s["verdict"], s["passed"], result.verdict) == ("INCOMPLETE", False, "INCOMPLETE")
    metric = s["experiments"]["main"]["metric"]
    assert metric["status"] == "incomplete"
    assert "[experiments.main.metrics.loss]" in metric["reason"]
    assert s["experiments"]["main"]["per_metric"]["loss"]["outcome"] == "unjudged"
    assert s["experiments"]["main"]["per_metric"]["acc"]["outcome"] == "pass"
    assert s["incomplete"] == [f"main: metric incomplete: {metric['reason']}"]

    checked = verify_audit(result.path)
    assert checked.ok, checked.problems
    assert checked.verdict == "INCOMPLETE" and checked.incomplete == s["incomplete"]

    # A forged PASS, re-sealed: verify re-derives INCOMPLETE and reports it.
    forged = json.loads((result.path / "audit.json").read_text())
    forged.update(verdict="PASS", passed=True, incomplete=[])
    (result.path / "audit.json").write_text(json.dumps(forged))
    (result.path / "SHA256SUMS").unlink()
    bundle = Bundle.open(result.path)
    with bundle.lock():
        bundle.write_sha256sums()
    problems = verify_audit(result.path).problems
    assert any(p.startswith("audit.json: passed") for p in problems), problems
    assert any(p.startswith("audit.json: verdict") for p in problems), problems


def test_a_failure_wins_over_a_gap(tiny_repo: Callable[..., Path], audit_cli: AuditCli) -> None:
    root = tiny_repo("echo acc=0.1\n")  # below min 0.5
    manifest = root / "reprobridge.toml"
    manifest.write_text(
        manifest.read_text() + '\n[experiments.main.metrics.x]\nsource = {regex = "x=(.*)"}\n'
    )
    code, summary = audit_cli(root)
    assert (code, summary["verdict"]) == (1, "FAIL")


def test_a_metric_with_a_threshold_that_holds_passes(
    tiny_repo: Callable[..., Path], audit_cli: AuditCli
) -> None:
    code, summary = audit_cli(tiny_repo("echo acc=0.9\n"))
    assert (code, summary["verdict"], summary["incomplete"]) == (0, "PASS", [])


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = copy_example(tmp_path_factory.mktemp("example") / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    return repo


def test_smoke_tier_of_the_example_is_incomplete_not_fail(
    example: Path, audit_cli: AuditCli
) -> None:
    """`rb audit --tier smoke`, as REPRODUCE.md recommends it: the paper's targets and claim
    describe 400-epoch runs; after 2 epochs they are not applicable, never a failure."""
    assert "rb audit --tier smoke" in (example / "REPRODUCE.md").read_text()
    # Both experiments by name: a plain smoke audit runs the main one only
    # (tests/unit/audit/test_plan_smoke_main.py), and the claim compares the two.
    code, summary = audit_cli(example, "--tier", "smoke", "baseline", "mixup")
    assert code == 20, summary
    assert summary["verdict"] == "INCOMPLETE"
    for exp_id in ("baseline", "mixup"):
        v = summary["experiments"][exp_id]  # type: ignore[index]
        assert v["procedure"]["status"] == "pass"
        assert v["metric"]["status"] == "incomplete"
        assert f"[experiments.{exp_id}.tiers.smoke.metrics.<name>]" in v["metric"]["reason"]
    [claim] = summary["claims"]  # type: ignore[misc]
    assert claim["holds"] is None and claim["skipped"] is True
    assert "not applicable in tier smoke" in claim["reason"]
    assert "claims[0].tiers" in claim["reason"]


def test_smoke_tier_judges_what_it_declares(
    example: Path, tmp_path: Path, audit_cli: AuditCli
) -> None:
    """A smoke tier with thresholds of its own, and a claim that lists the tier: judged."""
    text = (example / "reprobridge.toml").read_text()
    repo = tmp_path / "declared"
    subprocess.run(["cp", "-a", str(example), str(repo)], check=True)
    for exp_id in ("baseline", "mixup"):
        table = f'[experiments.{exp_id}.tiers.smoke]\nparams = {{epochs = 2}}\ntimeout = "10m"\n'
        assert table in text
        text = text.replace(
            table,
            table + f"[experiments.{exp_id}.tiers.smoke.metrics.test_accuracy]\n"
            'source = {regex = "test_accuracy=([0-9.]+)"}\nmin = 0.0\nmax = 1.0\n',
        )
    (repo / "reprobridge.toml").write_text(text)
    code, summary = audit_cli(repo, "--tier", "smoke", "baseline", "mixup")
    assert (code, summary["verdict"]) == (0, "PASS"), summary
    # The claim lists smoke too now (rb init wrote the default `tiers = ["full"]`): judged
    # on 2-epoch values, where it may hold or not.
    assert text.count('tiers = ["full"]\n') == 1
    (repo / "reprobridge.toml").write_text(
        text.replace('tiers = ["full"]\n', 'tiers = ["full", "smoke"]\n')
    )
    code, summary = audit_cli(repo, "--tier", "smoke", "baseline", "mixup")
    [claim] = summary["claims"]  # type: ignore[misc]
    assert not claim.get("skipped")
    # Judged like any claim: significance over the runs decides between holds and a gap.
    expected = {"holds": "PASS", "does-not-hold": "FAIL", "holds-not-significant": "INCOMPLETE"}
    assert summary["verdict"] == expected[claim["outcome"]], claim


def test_overall_verdict_rules() -> None:
    ok = Verdict("pass", "")
    exp = ExperimentVerdict("e", ok, ok, ok, {}, 1)
    assert overall_verdict({"e": exp}, []).verdict == "PASS"
    assert overall_verdict({}, []).verdict == "INCOMPLETE"
    undecided = ClaimResult("a.x > b.x", None, None, "", "no values", skipped=False)
    got = overall_verdict({"e": exp}, [undecided])
    assert got.verdict == "INCOMPLETE" and got.incomplete[0].startswith("claim a.x > b.x")
    skipped = replace(undecided, skipped=True)
    assert overall_verdict({"e": exp}, [skipped]).verdict == "PASS"
    assert overall_verdict({"e": exp}, [replace(undecided, holds=False)]).verdict == "FAIL"
    na = replace(exp, metric=Verdict("not-applicable", "none"))
    assert overall_verdict({"e": na}, []).verdict == "INCOMPLETE"
    skipped_run = replace(exp, procedure=Verdict("skipped", "not run"))
    assert overall_verdict({"e": skipped_run}, []).verdict == "INCOMPLETE"
    failed = replace(exp, environment=Verdict("fail", "no nix"))
    assert overall_verdict({"e": failed}, []).verdict == "FAIL"


def test_claim_json_keeps_its_stored_keys() -> None:
    """audit.json's claims are re-derived by rb verify and compared: an evaluated claim's
    object has no ``skipped`` key, a skipped claim's has it (as bundles always had)."""
    evaluated = ClaimResult("a.x > 1", None, True, "2.0 > 1", "", skipped=False)
    assert evaluated.to_json() == {
        "expr": "a.x > 1",
        "provenance": None,
        "holds": True,
        "substituted": "2.0 > 1",
        "reason": "",
    }
    skipped = replace(evaluated, holds=None, substituted="", reason="not evaluated", skipped=True)
    assert skipped.to_json()["skipped"] is True


def test_archive_metadata_says_incomplete_not_failed(tmp_path: Path) -> None:
    from reprobridge.archive.members import Audit
    from reprobridge.archive.rocrate import build_crate
    from reprobridge.evidence.records import AuditSummary
    from reprobridge.manifest.schema import Manifest

    manifest = Manifest.model_validate({"schema": 1, "project": {"name": "p"}})

    def described(summary: dict[str, Any]) -> str:
        audit = Audit("a1", tmp_path, AuditSummary.from_json(summary), None)
        crate = build_crate(manifest, [], audits=[audit], commit="c" * 40, epoch=0)
        [action] = [e for e in crate["@graph"] if e.get("@type") == "CreateAction"]
        return str(action["description"])

    assert described({"passed": False, "verdict": "INCOMPLETE"}).endswith(
        "incomplete (nothing failed, but not everything was judged)."
    )
    assert described({"passed": False, "verdict": "FAIL"}).endswith("failed.")
    assert described({"passed": True, "verdict": "PASS"}).endswith("passed.")
