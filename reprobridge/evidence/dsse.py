"""DSSE envelopes around in-toto v1 statements, signed with Ed25519: the one implementation
behind bundle signing (:mod:`reprobridge.evidence.sign`, over ``SHA256SUMS``) and archive
signing (:mod:`reprobridge.archive.build`, over ``MANIFEST.json``), and the one JSON form
rb writes evidence in (:func:`canonical_json`).

A valid signature, for both: the envelope is a JSON object whose ``payloadType`` is
in-toto's; at least one of its signatures verifies over PAE(payloadType, payload) with the
key the caller trusts (every signature is tried, whatever its ``keyid`` claims: a keyid is
only a hint); the payload is an in-toto v1 statement of the caller's predicate type; and
its subject of the caller's name carries a sha256 equal to the file's actual digest.

``cryptography`` is imported by the functions that sign or verify, not with this module:
writing a bundle needs :func:`canonical_json` only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reprobridge.evidence.errors import EvidenceError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


def canonical_json(data: Any) -> bytes:
    """rb's one JSON form for files (evidence, archive metadata, envelopes): sorted keys,
    indent 2, UTF-8, trailing newline, no NaN. EvidenceError for data JSON cannot hold.

    The bytes of ``json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False,
    allow_nan=False) + "\\n"`` (a unit test compares them), written by :func:`_canon`:
    with ``indent`` the standard library falls back to its generator-based Python encoder,
    which took seconds for the 20k-entry MANIFEST.json and RO-Crate of a source tree."""
    out: list[str] = []
    try:
        _canon(data, "\n", out)
    except (TypeError, ValueError) as exc:
        raise EvidenceError(f"cannot be stored as JSON: {exc}") from exc
    out.append("\n")
    return "".join(out).encode("utf-8")


def _canon(o: Any, nl: str, out: list[str]) -> None:
    """Append ``o`` in :func:`canonical_json`'s form; ``nl`` is the newline plus the indent
    of the line ``o`` starts on."""
    t = type(o)
    if t is str:
        out.append(json_str(o))
    elif t is dict:
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for key in sorted(o):
            if type(key) is not str:
                raise TypeError(f"canonical JSON keys are strings, not {type(key).__name__}")
            value = o[key]
            vt = type(value)
            if vt is str:
                out.append(sep + json_str(key) + ": " + json_str(value))
            elif vt is int:
                out.append(sep + json_str(key) + ": " + int.__repr__(value))
            else:
                out.append(sep + json_str(key) + ": ")
                _canon(value, inner, out)
            sep = "," + inner
        out.append(nl + "}")
    elif t is list or t is tuple:
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for item in o:
            out.append(sep)
            _canon(item, inner, out)
            sep = "," + inner
        out.append(nl + "]")
    elif t is int:
        out.append(int.__repr__(o))
    else:
        # Other scalars (float, bool, None, subclasses) through json itself: the same
        # spelling, and the same refusal of NaN and infinities.
        out.append(json.dumps(o, allow_nan=False))


#: One JSON string as :func:`canonical_json` writes it (non-ASCII kept, quotes escaped).
json_str = json.encoder.encode_basestring


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 <len> <type> <len> <body>`` (lengths in bytes)."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def keyid_of(public_key: Ed25519PublicKey) -> str:
    """sha256 hex of the raw 32-byte public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    """The key as PEM (SubjectPublicKeyInfo), as ``signer.pub`` holds it."""
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def public_key_from_pem(data: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM bytes; ValueError for anything else."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a readable PEM public key ({exc})") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


def b64decode(s: Any) -> bytes:
    """Standard or URL-safe base64, padded or not (DSSE: verifiers MUST accept both);
    ValueError otherwise."""
    if not isinstance(s, str):
        raise ValueError("not a string")
    t = s.strip().replace("-", "+").replace("_", "/")
    t += "=" * (-len(t) % 4)
    try:
        return base64.b64decode(t, validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from exc


def sign(
    key: Ed25519PrivateKey,
    *,
    subject: str,
    digest: str,
    predicate_type: str,
    predicate: dict[str, Any],
) -> bytes:
    """The DSSE envelope (:func:`canonical_json`) of an in-toto v1 statement whose one
    subject is ``subject`` with sha256 ``digest``. Ed25519 is deterministic: the same
    statement and key give the same bytes."""
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject, "digest": {"sha256": digest}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    payload = json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    return canonical_json(
        {
            "payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": [
                {"keyid": keyid_of(key.public_key()), "sig": base64.b64encode(sig).decode("ascii")}
            ],
        }
    )


@dataclass
class Checked:
    """What :func:`verify` found, each line saying what failed without a file name (the
    caller prefixes its own): ``problems`` with the envelope, its signatures and its
    statement, and ``subject_problem``, the signed file's digest not matching (or the file
    missing). Valid when both are empty."""

    problems: list[str] = field(default_factory=list)
    subject_problem: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.subject_problem is None


def verify(
    raw: bytes,
    key: Ed25519PublicKey,
    *,
    key_name: str,
    subject: str,
    actual_digest: str | None,
    predicate_type: str,
) -> Checked:
    """Check the envelope ``raw`` against ``key`` (named ``key_name`` in problems), for
    a statement of ``predicate_type`` whose ``subject`` has ``actual_digest`` (None: the
    file is missing). See the module docstring for what valid means."""
    from cryptography.exceptions import InvalidSignature

    out = Checked()
    try:
        envelope = json.loads(raw)
    except ValueError as exc:
        out.problems.append(f"not valid JSON ({exc})")
        return out
    if not isinstance(envelope, dict):
        out.problems.append("not a DSSE envelope")
        return out
    ptype = envelope.get("payloadType")
    if not isinstance(ptype, str):
        out.problems.append("payloadType missing")
        return out
    if ptype != PAYLOAD_TYPE:
        out.problems.append(f"payloadType is {ptype!r}, expected {PAYLOAD_TYPE!r}")
    try:
        payload = b64decode(envelope.get("payload"))
    except ValueError as exc:
        out.problems.append(f"payload is not base64 ({exc})")
        return out
    sigs = envelope.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        out.problems.append("no signatures")
    else:
        message = pae(ptype, payload)
        for entry in sigs:
            try:
                key.verify(
                    b64decode(entry.get("sig") if isinstance(entry, dict) else None), message
                )
            except (ValueError, InvalidSignature):
                continue
            break
        else:
            out.problems.append(
                f"no signature verifies with {key_name} (keyid {keyid_of(key)[:16]}…; "
                "tampered payload or payloadType, or signed by another key)"
            )
    try:
        statement = json.loads(payload)
    except ValueError:
        statement = None
    if not isinstance(statement, dict):
        out.problems.append("payload is not a JSON statement")
        return out
    if statement.get("_type") != STATEMENT_TYPE:
        out.problems.append(f"_type is {statement.get('_type')!r}, not in-toto v1")
    if statement.get("predicateType") != predicate_type:
        out.problems.append(f"predicateType is {statement.get('predicateType')!r}")
    claimed = None
    subjects = statement.get("subject")
    for s in subjects if isinstance(subjects, list) else []:
        if isinstance(s, dict) and s.get("name") == subject and isinstance(s.get("digest"), dict):
            claimed = s["digest"].get("sha256")
    if claimed is None:
        out.problems.append(f"no {subject} subject with a sha256 digest")
    elif actual_digest is None:
        out.subject_problem = "missing, but the statement signs it"
    elif claimed != actual_digest:
        out.subject_problem = (
            f"digest {actual_digest[:12]}… differs from the signed subject "
            f"{str(claimed)[:12]}… (modified after signing)"
        )
    return out
