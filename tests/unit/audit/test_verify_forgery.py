"""`rb verify` against a forger who can rewrite files and re-seal SHA256SUMS consistently
(an unsigned bundle): every verdict, metric and claim in ``audit.json`` is re-derived from
the logs and compared value by value; a corrupt or malformed record is a finding, never a
traceback."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import differences, verify_audit

CLAIM = '\n[[claims]]\nexpr = "main.acc > 0.8"\n'


def _reseal(bundle: Path) -> None:
    """Rewrite SHA256SUMS so it matches the files again, as a forger would."""
    sums = bundle / "SHA256SUMS"
    lines = []
    for line in sums.read_text().splitlines():
        _digest, rel = line.split("  ", 1)
        lines.append(f"{hashlib.sha256((bundle / rel).read_bytes()).hexdigest()}  {rel}")
    sums.write_text("\n".join(lines) + "\n")


def _forge(bundle: Path, rel: str, change: Callable[[Any], None]) -> None:
    doc = json.loads((bundle / rel).read_text())
    change(doc)
    (bundle / rel).write_text(json.dumps(doc, indent=1, sort_keys=True))
    _reseal(bundle)


def _audited(tiny_repo: Callable[..., Path], script: str) -> Path:
    root = tiny_repo(script)
    with (root / "reprobridge.toml").open("a") as fh:
        fh.write(CLAIM)
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "claim"], check=True)
    return run_audit(root, AuditOptions(runs=1, backend="host")).path


@pytest.fixture
def failing_bundle(tiny_repo: Callable[..., Path]) -> Path:
    """A sealed audit that failed: acc=0.3 against min 0.5 and the claim acc > 0.8."""
    bundle = _audited(tiny_repo, "echo acc=0.3\n")
    out = verify_audit(bundle)
    assert out.ok and out.passed is False, out.problems
    return bundle


def test_forged_pass_is_caught_and_named(failing_bundle: Path) -> None:
    def to_pass(doc: Any) -> None:
        doc["passed"] = True
        main = doc["experiments"]["main"]
        main["metric"]["status"] = "pass"
        main["per_metric"]["acc"]["stats"]["mean"] = 0.9
        doc["claims"][0]["holds"] = True

    _forge(failing_bundle, "audit.json", to_pass)
    out = verify_audit(failing_bundle)
    assert not out.ok and out.passed is False
    text = "\n".join(out.problems)
    assert "audit.json: passed: recorded true, re-derived false" in text
    assert 'audit.json: experiments.main.metric.status: recorded "pass", re-derived "fail"' in text
    assert "experiments.main.per_metric.acc.stats.mean: recorded 0.9, re-derived 0.3" in text
    assert "audit.json: claims[0].holds: recorded true, re-derived false" in text
    # Nothing else is wrong: the seal was redone consistently.
    assert all(p.startswith("audit.json: ") for p in out.problems), out.problems


@pytest.mark.parametrize(
    ("where", "forgery", "named"),
    [
        (
            "metric value",
            lambda d: d["experiments"]["main"]["per_metric"]["acc"]["values"].__setitem__(0, 0.31),
            "values[0]",
        ),
        (
            "verdict reason",
            lambda d: d["experiments"]["main"]["procedure"].__setitem__("reason", "fine"),
            "procedure.reason",
        ),
        ("dropped claim", lambda d: d.__setitem__("claims", []), "claims: recorded [], re-derived"),
        ("dropped experiment", lambda d: d["experiments"].pop("main"), "experiments.main: missing"),
        ("tier", lambda d: d.__setitem__("tier", "smoke"), 'tier: recorded "smoke"'),
    ],
)
def test_each_forged_value_is_named(
    failing_bundle: Path, where: str, forgery: Callable[[Any], None], named: str
) -> None:
    _forge(failing_bundle, "audit.json", forgery)
    out = verify_audit(failing_bundle)
    assert not out.ok, where
    assert any(named in p for p in out.problems), out.problems


def test_corrupt_status_json_is_a_finding_not_a_traceback(failing_bundle: Path) -> None:
    status = failing_bundle / "runs/main/0/status.json"
    status.write_text('{"sealed": true, "record": ')
    out = verify_audit(failing_bundle)
    assert not out.ok and out.passed is None
    assert any("runs/main/0/status.json: unreadable" in p for p in out.problems), out.problems
    # The same through the CLI: problems listed, exit 1, no traceback.
    proc = subprocess.run(
        [sys.executable, "-m", "reprobridge", "verify", str(failing_bundle)],
        capture_output=True,
        text=True,
        env=os.environ,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "problem: runs/main/0/status.json" in proc.stdout


@pytest.mark.parametrize(
    "record",
    [None, [], {"termination": "exit"}, {"not_started": {"no": "reason"}}],
    ids=["null", "list", "termination-string", "not-started-without-reason"],
)
def test_malformed_run_record_is_a_finding(failing_bundle: Path, record: Any) -> None:
    _forge(failing_bundle, "runs/main/0/status.json", lambda d: d.__setitem__("record", record))
    out = verify_audit(failing_bundle)
    assert not out.ok and out.passed is None
    assert any("runs/main/0/status.json" in p for p in out.problems), out.problems


@pytest.mark.parametrize(
    ("rel", "content", "named"),
    [
        ("plan.json", "[1, 2]", "plan.json: not a JSON object"),
        ("plan.json", '{"tier": "full", "runs": [{"experiment": "ghost", "k": 0}]}', "'ghost'"),
        ("plan.json", '{"tier": "full", "runs": [{"experiment": "main"}]}', "malformed run entry"),
        ("environment.json", "{", "environment.json: cannot be read"),
        ("audit.json", "nope", "audit.json: cannot be read"),
    ],
)
def test_corrupt_bundle_records_are_findings(
    failing_bundle: Path, rel: str, content: str, named: str
) -> None:
    (failing_bundle / rel).write_text(content)
    _reseal(failing_bundle)
    out = verify_audit(failing_bundle)
    assert any(named in p for p in out.problems), out.problems


def test_differences_names_paths_and_treats_nan_as_equal() -> None:
    nan = float("nan")
    assert differences({"a": [1, nan]}, {"a": [1, nan]}, "x") == []
    assert differences({"a": [1, 2]}, {"a": [1, 3]}, "x") == ["x.a[1]: recorded 2, re-derived 3"]
    assert differences({"a": 1}, {"a": 1.0}, "x") == ["x.a: recorded 1, re-derived 1.0"]
    assert differences(True, 1, "x") == ["x: recorded true, re-derived 1"]


def test_a_forged_run_metrics_json_is_named(failing_bundle: Path) -> None:
    """The report reads each run's numbers from its metrics.json: verify must compare that
    file with the judgement re-derived from the run's logs, not only audit.json."""
    (run_dir,) = (failing_bundle / "runs" / "main").iterdir()
    rel = f"runs/main/{run_dir.name}/metrics.json"

    def to_pass(doc: Any) -> None:
        acc = doc["metrics"]["acc"]
        acc["value"], acc["status"] = 0.9, "ok"

    _forge(failing_bundle, rel, to_pass)
    # A forger re-seals the run's listing too, so only the re-judgement can tell.
    data = (failing_bundle / rel).read_bytes()
    _forge(
        failing_bundle,
        f"runs/main/{run_dir.name}/status.json",
        lambda d: d["files"].__setitem__(
            "metrics.json", {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        ),
    )
    out = verify_audit(failing_bundle)
    assert not out.ok
    (problem,) = out.problems
    assert problem.startswith(f"{rel}: differs from the judgement re-derived from the logs")
    assert "metrics.json.metrics.acc.value: recorded 0.9, re-derived 0.3" in problem
