"""``rb verify``'s integrity layer: re-hash a bundle and check its journal and signature.

Nothing in the bundle is trusted: SHA256SUMS is compared with the files, each run's
``status.json`` with its run's files, the journal's hash chain is re-walked, and the
signature is checked over the actual SHA256SUMS. Read-only (no lock, no repair).
Re-deriving verdicts from the raw evidence is the orchestrator's layer on top of this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge.evidence.bundle import Bundle
from reprobridge.evidence.errors import EvidenceError
from reprobridge.evidence.layout import STATEMENT_FILE


@dataclass
class VerifyResult:
    """What a verify verb (`rb verify`, `rb archive verify`) found about ``path``:
    ``problems``, one line each (none: ``ok``), and the ``signature``'s state."""

    path: Path
    problems: list[str] = field(default_factory=list)
    signature: str = "absent"

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The keys every verify verb's ``--json`` document has; each adds its own."""
        return {
            "path": str(self.path),
            "ok": self.ok,
            "problems": self.problems,
            "signature": self.signature,
        }


@dataclass
class VerifyReport:
    """Outcome of :func:`verify_bundle`.

    ``problems``: one line each, starting with the file it is about (empty = intact).
    ``signature``: ``"valid"`` (checked against the given key), ``"valid (untrusted key)"``
    (checked only against the bundle's own signer.pub), ``"absent"``, or ``"invalid: ..."``.
    ``runs``: ``"<exp-id>/<k>"`` -> ``missing|partial|sealed|corrupt``.
    """

    problems: list[str] = field(default_factory=list)
    signature: str = "absent"
    runs: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No problem found (the signature may still be absent or untrusted: see ``signature``)."""
        return not self.problems


def verify_bundle(path: Path, public_key: Path | None = None) -> VerifyReport:
    """Check everything in the bundle at ``path`` that can be checked without the manifest."""
    bundle = Bundle.open(path)
    report = VerifyReport()
    # One walk, one hash per file: the same digests check SHA256SUMS and every run.
    problems, states = bundle.inspect()
    report.problems.extend(problems)
    report.runs.update((f"{exp_id}/{k}", state) for (exp_id, k), state in states.items())
    try:
        bundle.journal_records(repair=False)
    except EvidenceError as exc:
        report.problems.append(str(exc))
    if not (path / STATEMENT_FILE).exists():
        report.signature = "absent"
        if public_key is not None:
            report.problems.append(
                f"{STATEMENT_FILE}: absent, but a public key was given to check it"
            )
        return report
    from reprobridge.evidence.sign import UNTRUSTED_KEY_NOTE, verify_signature

    sig_problems = verify_signature(path, public_key)
    untrusted = UNTRUSTED_KEY_NOTE in sig_problems
    sig_problems = [p for p in sig_problems if p != UNTRUSTED_KEY_NOTE]
    if sig_problems:
        report.signature = f"invalid: {sig_problems[0]}"
        report.problems.extend(sig_problems)
    else:
        report.signature = "valid (untrusted key)" if untrusted else "valid"
    return report
