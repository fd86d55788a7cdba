"""The evidence store of ``rb audit`` and ``rb verify``.

* :class:`Bundle` writes ``repro/evidence/<audit-id>/`` crash-safely: atomic files, runs
  sealed by a ``status.json`` written last, a hash-chained journal, one writer at a time,
  and ``SHA256SUMS`` over everything at the end.
* :mod:`~reprobridge.evidence.records` types what a bundle holds; :class:`EvidenceStore`
  says which bundles are finished.
* :mod:`~reprobridge.evidence.redact` keeps secrets out of logs, records and env snapshots.
* :mod:`~reprobridge.evidence.sign` signs ``SHA256SUMS`` (Ed25519, DSSE, in-toto v1;
  envelopes by :mod:`~reprobridge.evidence.dsse`).
* :func:`verify_bundle` re-checks all of it without trusting any summary.

The names below load their module on first use: importing one submodule
(``reprobridge.evidence.hashing``) must not import the others (``cryptography``, filelock).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reprobridge.evidence.bundle import Bundle, RunState
    from reprobridge.evidence.dsse import canonical_json
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
    from reprobridge.evidence.sign import generate_key, sign_bundle, verify_signature
    from reprobridge.evidence.store import EvidenceStore
    from reprobridge.evidence.verify import VerifyReport, verify_bundle

_WHERE = {
    "Bundle": "bundle",
    "RunState": "bundle",
    "canonical_json": "dsse",
    "BundleLockedError": "errors",
    "EvidenceError": "errors",
    "SecretFoundError": "errors",
    "SignatureError": "errors",
    "sha256_file": "hashing",
    "DEFAULT_ENV_ALLOWLIST": "redact",
    "Redactor": "redact",
    "StreamRedactor": "redact",
    "scan_for_secrets": "redact",
    "scrub_env": "redact",
    "secrets_from_env": "redact",
    "generate_key": "sign",
    "sign_bundle": "sign",
    "verify_signature": "sign",
    "EvidenceStore": "store",
    "VerifyReport": "verify",
    "verify_bundle": "verify",
}

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "Bundle",
    "BundleLockedError",
    "EvidenceError",
    "EvidenceStore",
    "Redactor",
    "RunState",
    "SecretFoundError",
    "SignatureError",
    "StreamRedactor",
    "VerifyReport",
    "canonical_json",
    "generate_key",
    "scan_for_secrets",
    "scrub_env",
    "secrets_from_env",
    "sha256_file",
    "sign_bundle",
    "verify_bundle",
    "verify_signature",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
