"""`rb verify`: trust nothing in a bundle's summaries; re-check and re-derive everything.

Hashes (SHA256SUMS and every run's status.json), the journal's hash chain and the
signature are checked by :mod:`reprobridge.evidence.verify`; then every run is judged again
from its stored logs and output copies with the manifest the audit recorded, the verdicts
are derived again, and any difference from ``audit.json`` is a problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge.audit.auditor import _jsonable, rejudge_run, summarize
from reprobridge.audit.backends import EnvironmentState
from reprobridge.errors import AuditError
from reprobridge.manifest.io import parse_document, validate_document


@dataclass
class VerifyOutcome:
    """Everything `rb verify` found; ``ok`` when there is no problem."""

    path: Path
    problems: list[str] = field(default_factory=list)
    signature: str = "absent"
    runs: dict[str, str] = field(default_factory=dict)
    passed: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_audit(path: Path, public_key: Path | None = None) -> VerifyOutcome:
    """Verify the bundle at ``path`` (see the module docstring). Raises AuditError when the
    path is not a bundle at all."""
    from reprobridge.evidence.verify import verify_bundle

    path = path.resolve()
    if not (path / "plan.json").is_file():
        raise AuditError("is not an evidence bundle (no plan.json)", path=str(path))
    report = verify_bundle(path, public_key)
    out = VerifyOutcome(path, list(report.problems), report.signature, dict(report.runs))
    audit_file = path / "audit.json"
    if not audit_file.is_file():
        out.problems.append("audit.json: missing (the audit did not finish; resume it first)")
        return out
    try:
        manifest_text = (path / "inputs/reprobridge.toml").read_text(encoding="utf-8")
        manifest = validate_document(
            parse_document(manifest_text, path="inputs/reprobridge.toml"),
            path="inputs/reprobridge.toml",
        )
        plan = json.loads((path / "plan.json").read_text())
        recorded = json.loads(audit_file.read_text())
        env_state = json.loads((path / "environment.json").read_text())
    except (OSError, ValueError) as exc:
        out.problems.append(f"cannot read the bundle's records: {exc}")
        return out
    tier = plan["tier"]
    judgements: dict[str, list[Any]] = {}
    for run in plan["runs"]:
        exp_id, k = run["experiment"], run["k"]
        run_dir = path / "runs" / exp_id / str(k)
        status_file = run_dir / "status.json"
        if not status_file.is_file():
            out.problems.append(f"runs/{exp_id}/{k}: not sealed")
            continue
        status = json.loads(status_file.read_text())
        record = status["record"]
        again = _jsonable(rejudge_run(manifest.experiments[exp_id], tier, run_dir, record))
        stored_file = run_dir / "metrics.json"
        stored = json.loads(stored_file.read_text()) if stored_file.is_file() else None
        if stored != again:
            out.problems.append(
                f"runs/{exp_id}/{k}/metrics.json: differs from the judgement re-derived from the logs"
            )
        judgements.setdefault(exp_id, []).append(
            rejudge_run(manifest.experiments[exp_id], tier, run_dir, record)
        )
    state = EnvironmentState(
        backend=str(env_state.get("backend", "")),
        ok=bool(env_state.get("ok")),
        reason=str(env_state.get("reason", "")),
        hermetic=bool(env_state.get("hermetic")),
    )
    derived = summarize(manifest, tier, judgements, state)
    for key in ("experiments", "claims", "passed"):
        if derived[key] != recorded.get(key):
            out.problems.append(
                f"audit.json: `{key}` differs from the verdicts re-derived from the evidence"
            )
    out.passed = bool(derived["passed"])
    return out
