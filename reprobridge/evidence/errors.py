"""Errors of the evidence store (all are :class:`~reprobridge.errors.AuditError`, exit 9).

They live here rather than in ``reprobridge/errors.py`` so the store can grow its own
cases without touching the shared tree::

    AuditError                      9
    └── EvidenceError               a bundle cannot be written, read or trusted
        ├── BundleLockedError       another auditor holds ``<bundle>/.lock``
        ├── SecretFoundError        a run or file about to be sealed holds a secret
        └── SignatureError          a key cannot be made or used for signing
"""

from __future__ import annotations

from reprobridge.errors import AuditError


class EvidenceError(AuditError):
    """The evidence bundle cannot be written, read or trusted (names the file)."""


class BundleLockedError(EvidenceError):
    """Another auditor holds the bundle's lock; ``path`` names the lock file."""


class SecretFoundError(EvidenceError):
    """A file about to be sealed matches a secret rule; ``findings`` are ``file:line: rule``."""

    def __init__(self, message: str, *, findings: list[str], path: str | None = None) -> None:
        super().__init__(
            message,
            path=path,
            hint="the redactor missed it: fix the redaction, remove the file, then seal again",
        )
        self.findings = findings


class SignatureError(EvidenceError):
    """A signing key cannot be generated, loaded or used."""
