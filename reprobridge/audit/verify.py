"""`rb verify`: trust nothing in a bundle's summaries; re-check and re-derive everything.

Hashes (SHA256SUMS and every run's status.json), the journal's hash chain and the
signature are checked by :mod:`reprobridge.evidence.verify`; then every run is judged again
from its stored logs and output copies with the manifest the audit recorded, the verdicts
are derived again, and every value of ``audit.json`` that differs from them (a verdict, a
metric's statistics, a claim, the outcome) is a problem naming the value, the recorded and
the re-derived one. A corrupt or malformed record (``status.json``, ``plan.json``, ...) is a
problem too, never a traceback.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge._fs import read_regular
from reprobridge.audit.judge import RunJudgement
from reprobridge.audit.verdicts import judgement_json, rejudge_run, summarize
from reprobridge.errors import AuditError, ManifestError
from reprobridge.evidence.layout import AUDIT_FILE, ENVIRONMENT_FILE, PLAN_FILE, STATUS_FILE
from reprobridge.evidence.provenance import provenance
from reprobridge.evidence.records import Plan, RecordError, RunRecord
from reprobridge.evidence.store import bundle_state
from reprobridge.evidence.verify import VerifyResult, verify_bundle
from reprobridge.manifest.io import parse_document, validate_document
from reprobridge.manifest.schema import Manifest


@dataclass
class VerifyOutcome(VerifyResult):
    """Everything `rb verify` found; ``ok`` when there is no problem."""

    runs: dict[str, str] = field(default_factory=dict)
    passed: bool | None = None
    #: The re-derived overall verdict (PASS, FAIL, INCOMPLETE, NOT JUDGED) and its gaps;
    #: None unknown.
    verdict: str | None = None
    incomplete: list[str] = field(default_factory=list)
    #: Whose bundle this is (:class:`~reprobridge.evidence.provenance.Provenance`'s label):
    #: a valid signature on a foreign bundle says who signed it, not that you audited it.
    provenance: str = ""

    def to_json(self) -> dict[str, Any]:
        """The `rb verify --json` document (stable keys)."""
        return {
            **super().to_json(),
            "provenance": self.provenance,
            "runs": self.runs,
            "passed": self.passed,
            "verdict": self.verdict,
            "incomplete": self.incomplete,
        }


_MAX_DIFFERENCES = 8
#: audit.json keys added with the INCOMPLETE verdict (absent from older bundles).
_SINCE_INCOMPLETE = ("verdict", "incomplete")


def differences(recorded: object, derived: object, where: str) -> list[str]:
    """Every leaf where ``recorded`` (read from a JSON file) and ``derived`` (re-computed)
    differ, as ``where.key[i]...: recorded X, re-derived Y`` (two NaNs are equal)."""
    if isinstance(recorded, dict) and isinstance(derived, dict):
        out: list[str] = []
        for key in sorted(set(recorded) | set(derived), key=str):
            if key not in derived:
                out.append(f"{where}.{key}: recorded but not re-derived")
            elif key not in recorded:
                out.append(f"{where}.{key}: missing (re-derived {_shown(derived[key])})")
            else:
                out += differences(recorded[key], derived[key], f"{where}.{key}")
        return out
    if isinstance(recorded, list) and isinstance(derived, list) and len(recorded) == len(derived):
        return [
            d
            for i, (r, v) in enumerate(zip(recorded, derived, strict=True))
            for d in differences(r, v, f"{where}[{i}]")
        ]
    same = recorded == derived or (
        isinstance(recorded, float)
        and isinstance(derived, float)
        and math.isnan(recorded)
        and math.isnan(derived)
    )
    if same and type(recorded) is type(derived):
        return []
    return [f"{where}: recorded {_shown(recorded)}, re-derived {_shown(derived)}"]


def _shown(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class _Records:
    """The bundle's records verify re-derives from, each checked for shape."""

    manifest: Manifest
    plan: Plan
    recorded: dict[str, object]
    environment_ok: bool
    environment_reason: str
    environment_substituted: bool = False
    environment_not_judged: bool = False


def _read_records(path: Path, out: VerifyOutcome) -> _Records | None:
    """The records, or None after recording (in ``out``) why they cannot be used."""
    try:
        manifest_text = read_regular(path / "inputs/reprobridge.toml").decode("utf-8")
        manifest = validate_document(
            parse_document(manifest_text, path="inputs/reprobridge.toml"),
            path="inputs/reprobridge.toml",
        )
    except OSError as exc:
        out.problems.append(f"inputs/reprobridge.toml: cannot be read ({exc.strerror or exc})")
        return None
    except (UnicodeDecodeError, ManifestError) as exc:
        out.problems.append(f"inputs/reprobridge.toml: cannot be used ({exc})")
        return None
    docs: dict[str, dict[str, object]] = {}
    for name in (PLAN_FILE, AUDIT_FILE, ENVIRONMENT_FILE):
        try:
            doc: object = json.loads(read_regular(path / name))
        except OSError as exc:
            out.problems.append(f"{name}: cannot be read ({exc.strerror or exc})")
            return None
        except ValueError as exc:
            out.problems.append(f"{name}: cannot be read ({exc})")
            return None
        if not isinstance(doc, dict):
            out.problems.append(f"{name}: not a JSON object")
            return None
        docs[name] = doc
    raw_plan, env = docs[PLAN_FILE], docs[ENVIRONMENT_FILE]
    if not isinstance(raw_plan.get("tier"), str):
        out.problems.append("plan.json: no tier")
        return None
    runs = raw_plan.get("runs")
    for run in runs if isinstance(runs, list) else [runs]:
        exp_id: object = run.get("experiment") if isinstance(run, dict) else None
        k: object = run.get("k") if isinstance(run, dict) else None
        if not isinstance(exp_id, str) or not isinstance(k, int) or isinstance(k, bool):
            out.problems.append(f"plan.json: malformed run entry {_shown(run)}")
            return None
        if exp_id not in manifest.experiments:
            out.problems.append(
                f"plan.json: run of {exp_id!r}, which inputs/reprobridge.toml does not declare"
            )
            return None
    try:
        plan = Plan.from_json(raw_plan)
    except RecordError as exc:
        out.problems.append(f"plan.json: malformed ({exc.message})")
        return None
    return _Records(
        manifest,
        plan,
        docs[AUDIT_FILE],
        bool(env.get("ok")),
        str(env.get("reason", "")),
        bool(env.get("substituted") or env.get("python_mismatch")),
        env.get("not_judged") is True,
    )


def _run_record(run_dir: Path, rel: str, out: VerifyOutcome) -> RunRecord | None:
    """The ``record`` of a run's status.json, or None after recording why it is unusable
    (a corrupt status.json is a finding, never a traceback)."""
    try:
        raw = read_regular(run_dir / STATUS_FILE)
    except FileNotFoundError:
        out.problems.append(f"{rel}: not sealed")
        return None
    except OSError as exc:
        out.problems.append(
            f"{rel}/status.json: unreadable ({exc.strerror or exc}), its verdict cannot be "
            "re-derived"
        )
        return None
    try:
        status: object = json.loads(raw)
    except ValueError as exc:
        out.problems.append(
            f"{rel}/status.json: unreadable, its verdict cannot be re-derived ({exc})"
        )
        return None
    record = status.get("record") if isinstance(status, dict) else None
    if not isinstance(record, dict):
        out.problems.append(f"{rel}/status.json: no run record, its verdict cannot be re-derived")
        return None
    try:
        return RunRecord.from_json(record, f"{rel}/status.json: record")
    except RecordError as exc:
        out.problems.append(f"{rel}/status.json: malformed run record ({exc.message})")
        return None


def verify_audit(path: Path, public_key: Path | None = None) -> VerifyOutcome:
    """Verify the bundle at ``path`` (see the module docstring). Raises AuditError when the
    path is not a bundle at all; everything wrong inside a bundle (a corrupt or forged
    record included) is a problem in the outcome, never an exception."""
    path = path.resolve()
    if not (path / PLAN_FILE).is_file():
        raise AuditError("is not an evidence bundle (no plan.json)", path=str(path))
    report = verify_bundle(path, public_key)
    out = VerifyOutcome(path, list(report.problems), report.signature, dict(report.runs))
    out.provenance = provenance(path).label
    if bundle_state(path) == "unfinished":
        # The one meaning of "finished" (reprobridge.evidence.store): sealed. An audit
        # killed after writing audit.json but before the seal is unfinished too.
        out.problems.append(
            f"{path.name}: not finished (not sealed); resume it first: "
            f"rb audit --resume {path.name}"
        )
        return out
    if not os.path.lexists(path / AUDIT_FILE):
        out.problems.append("audit.json: missing (removed after the bundle was sealed)")
        return out
    records = _read_records(path, out)
    if records is None:
        return out
    tier = records.plan.tier
    judgements: dict[str, list[RunJudgement | None]] = {}
    complete = True
    for run in records.plan.runs:
        rel = f"runs/{run.experiment}/{run.k}"
        run_dir = path / rel
        record = _run_record(run_dir, rel, out)
        if record is None:
            complete = False
            continue
        try:
            judgement = rejudge_run(
                records.manifest.experiments[run.experiment], tier, run_dir, record
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            out.problems.append(
                f"{rel}/status.json: malformed run record ({type(exc).__name__}: {exc})"
            )
            complete = False
            continue
        again: object = judgement_json(judgement)
        stored: object
        try:
            stored = json.loads(read_regular(run_dir / "metrics.json"))
        except FileNotFoundError:
            stored = None
        except (OSError, ValueError):
            stored = "unreadable"
        if stored != again:
            diff = differences(stored, again, "metrics.json") if isinstance(stored, dict) else []
            out.problems.append(
                f"{rel}/metrics.json: differs from the judgement re-derived from the logs"
                + (f" ({'; '.join(diff[:3])})" if diff else "")
            )
        judgements.setdefault(run.experiment, []).append(judgement)
    if not complete:
        out.problems.append("audit.json: not compared (a run's record cannot be re-judged)")
        return out
    derived: dict[str, object] = json.loads(
        json.dumps(
            summarize(
                records.manifest,
                tier,
                judgements,
                environment_ok=records.environment_ok,
                environment_reason=records.environment_reason,
                environment_substituted=records.environment_substituted,
                environment_not_judged=records.environment_not_judged,
            )
        )
    )
    found: list[str] = []
    for key in sorted(derived):
        if key in _SINCE_INCOMPLETE and key not in records.recorded:
            # A bundle from before the INCOMPLETE verdict: these are derived from
            # `experiments` and `claims`, which are compared.
            continue
        found += differences(records.recorded.get(key), derived[key], f"audit.json: {key}")
    out.problems += found[:_MAX_DIFFERENCES]
    if len(found) > _MAX_DIFFERENCES:
        out.problems.append(f"audit.json: and {len(found) - _MAX_DIFFERENCES} more differences")
    incomplete = derived["incomplete"]
    out.passed = bool(derived["passed"])
    out.verdict = str(derived["verdict"])
    out.incomplete = [str(s) for s in incomplete] if isinstance(incomplete, list) else []
    return out
