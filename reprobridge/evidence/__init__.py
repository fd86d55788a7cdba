"""The evidence store of ``rb audit`` and ``rb verify``.

* :class:`Bundle` writes ``repro/evidence/<audit-id>/`` crash-safely: atomic files, runs
  sealed by a ``status.json`` written last, a hash-chained journal, one writer at a time,
  and ``SHA256SUMS`` over everything at the end.
* :mod:`~reprobridge.evidence.redact` keeps secrets out of logs, records and env snapshots.
* :mod:`~reprobridge.evidence.sign` signs ``SHA256SUMS`` (Ed25519, DSSE, in-toto v1).
* :func:`verify_bundle` re-checks all of it without trusting any summary.
"""

from __future__ import annotations

from reprobridge.evidence.bundle import Bundle, RunState, canonical_json
from reprobridge.evidence.errors import (
    BundleLockedError,
    EvidenceError,
    SecretFoundError,
    SignatureError,
)
from reprobridge.evidence.hashing import sha256_file
from reprobridge.evidence.redact import (
    DEFAULT_ENV_ALLOWLIST,
    Redactor,
    StreamRedactor,
    scan_for_secrets,
    scrub_env,
    secrets_from_env,
)
from reprobridge.evidence.sign import generate_key, make_predicate, sign_bundle, verify_signature
from reprobridge.evidence.verify import VerifyReport, verify_bundle

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "Bundle",
    "BundleLockedError",
    "EvidenceError",
    "Redactor",
    "RunState",
    "SecretFoundError",
    "SignatureError",
    "StreamRedactor",
    "VerifyReport",
    "canonical_json",
    "generate_key",
    "make_predicate",
    "scan_for_secrets",
    "scrub_env",
    "secrets_from_env",
    "sha256_file",
    "sign_bundle",
    "verify_bundle",
    "verify_signature",
]
