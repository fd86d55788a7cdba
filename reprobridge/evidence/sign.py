"""Ed25519 signatures over a bundle: a DSSE envelope around an in-toto Statement v1.

The statement's only subject is ``SHA256SUMS`` (by sha256), and SHA256SUMS pins every
other file, so one signature covers the whole bundle. The predicate (``PREDICATE_TYPE``)
carries the audit id, the rb version, the caller's verdict summary, start and end times
and the materials (git commit, flake.lock and manifest digests).

Trust (reliability.md B1, B7): the auditor signs, never the agent, and its private key
lives outside every repository and sandbox (:func:`generate_key` refuses a path inside a
git work tree). ``keyid`` in an envelope is only a hint; :func:`verify_signature` checks
against the key it is given, and without one only against the bundle's own ``signer.pub``,
which proves integrity but not origin (it says so).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from reprobridge import __version__
from reprobridge._fs import write_atomic
from reprobridge.evidence.bundle import (
    SIGNER_PUB_FILE,
    STATEMENT_FILE,
    SUMS_FILE,
    Bundle,
    canonical_json,
)
from reprobridge.evidence.errors import SignatureError
from reprobridge.evidence.hashing import sha256_file

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://reprobridge.dev/audit/v1"
#: verify_signature's entry when it had no trusted key (verify.py maps it to a status).
UNTRUSTED_KEY_NOTE = "signature checked against the key in the bundle only (not trusted)"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 <len> <type> <len> <body>`` (lengths in bytes)."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def keyid_of(public_key: Ed25519PublicKey) -> str:
    """sha256 hex of the raw 32-byte public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def _public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _inside_git_work_tree(path: Path) -> Path | None:
    for d in [path, *path.parents]:
        if (d / ".git").exists():
            return d
    return None


def generate_key(private_path: Path) -> tuple[Path, str]:
    """Create an Ed25519 key: ``private_path`` (PKCS8 PEM, mode 0600) and ``<private>.pub``.

    Returns ``(public key path, keyid)``. Refuses to overwrite either file and refuses a
    location inside a git work tree (a committed or sandbox-readable signing key would let
    the signed party forge the auditor). Parent directories are created with mode 0700.
    """
    # The real directory (symlinks resolved): a link into a repository is still inside it.
    private_path = Path(private_path).absolute().parent.resolve() / Path(private_path).name
    public_path = private_path.with_name(private_path.name + ".pub")
    repo = _inside_git_work_tree(private_path.parent)
    if repo is not None:
        raise SignatureError(
            f"refusing to put a signing key inside the git work tree at {repo}",
            path=str(private_path),
            hint="keep the key outside every repository, e.g. ~/.config/rb/signing.key",
        )
    for p in (private_path, public_path):
        if p.exists() or p.is_symlink():
            raise SignatureError("already exists; refusing to overwrite a key", path=str(p))
    private_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # O_EXCL: no race with another writer; created 0600 so the key is never readable by others.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(private_path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        private_path.unlink(missing_ok=True)
        raise
    os.close(fd)
    write_atomic(public_path, _public_pem(key.public_key()), mode=0o644)
    return public_path, keyid_of(key.public_key())


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Load an Ed25519 PEM private key; refuse one readable by group or others (as ssh does)."""
    try:
        st = Path(path).stat()
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SignatureError(
            f"cannot read the signing key ({exc.strerror})", path=str(path)
        ) from exc
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise SignatureError(
            f"signing key is accessible by others (mode {stat.S_IMODE(st.st_mode):o})",
            path=str(path),
            hint=f"chmod 600 {path}",
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"not a PEM private key ({exc})", path=str(path)) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError("not an Ed25519 key", path=str(path))
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 PEM public key (SignatureError naming the file otherwise)."""
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(f"not a readable PEM public key ({exc})", path=str(path)) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError("not an Ed25519 public key", path=str(path))
    return key


def make_predicate(
    *,
    audit_id: str,
    verdicts: Any,
    started_on: str,
    finished_on: str,
    git_commit: str | None,
    flake_lock_sha256: str | None,
    manifest_sha256: str | None,
) -> dict[str, Any]:
    """The audit predicate in its documented shape (times are RFC 3339 UTC strings)."""
    return {
        "audit_id": audit_id,
        "rb_version": __version__,
        "verdicts": verdicts,
        "startedOn": started_on,
        "finishedOn": finished_on,
        "materials": {
            "git_commit": git_commit,
            "flake_lock_sha256": flake_lock_sha256,
            "manifest_sha256": manifest_sha256,
        },
    }


def sign_bundle(bundle: Bundle, private_key: Path, predicate: dict[str, Any]) -> Path:
    """Sign a sealed bundle: write ``statement.dsse.json`` and ``signer.pub``; return the former.

    ``predicate`` gets ``audit_id`` (must equal the bundle's if given) and ``rb_version``
    filled in when absent. Needs SHA256SUMS (seal first) and the bundle lock.
    """
    sums = bundle.path / SUMS_FILE
    if not sums.is_file():
        raise SignatureError("the bundle is not sealed yet (no SHA256SUMS)", path=str(sums))
    if predicate.get("audit_id", bundle.audit_id) != bundle.audit_id:
        raise SignatureError(
            f"predicate audit_id {predicate['audit_id']!r} is not this bundle's {bundle.audit_id!r}"
        )
    key = load_private_key(private_key)
    digest, _size = sha256_file(sums)
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": SUMS_FILE, "digest": {"sha256": digest}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"audit_id": bundle.audit_id, "rb_version": __version__, **predicate},
    }
    payload = json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": keyid_of(key.public_key()), "sig": base64.b64encode(sig).decode("ascii")}
        ],
    }
    bundle.write_bytes(SIGNER_PUB_FILE, _public_pem(key.public_key()))
    return bundle.write_bytes(STATEMENT_FILE, canonical_json(envelope))


def _b64decode(s: Any) -> bytes:
    """Standard or URL-safe base64, padded or not (DSSE: verifiers MUST accept both)."""
    if not isinstance(s, str):
        raise ValueError("not a string")
    t = s.strip().replace("-", "+").replace("_", "/")
    t += "=" * (-len(t) % 4)
    try:
        return base64.b64decode(t, validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from exc


def verify_signature(bundle_path: Path, public_key: Path | None) -> list[str]:
    """Problems with the bundle's signature (empty = valid), each naming what failed.

    Checks: the envelope parses; ``payloadType`` is in-toto's; at least one signature
    verifies over PAE(payloadType, payload) with ``public_key`` (every signature is tried,
    whatever its keyid claims); the statement is an in-toto v1 statement of our predicate
    type whose ``SHA256SUMS`` subject digest equals the bundle's actual SHA256SUMS. With
    ``public_key=None`` the bundle's own ``signer.pub`` is used and
    :data:`UNTRUSTED_KEY_NOTE` is added to the list.
    """
    problems: list[str] = []
    env_path = bundle_path / STATEMENT_FILE
    try:
        envelope = json.loads(env_path.read_bytes())
    except FileNotFoundError:
        return [f"{STATEMENT_FILE}: absent (the bundle is not signed)"]
    except (OSError, ValueError) as exc:
        return [f"{STATEMENT_FILE}: not valid JSON ({exc})"]
    if not isinstance(envelope, dict):
        return [f"{STATEMENT_FILE}: not a DSSE envelope"]
    ptype = envelope.get("payloadType")
    if not isinstance(ptype, str):
        return [f"{STATEMENT_FILE}: payloadType missing"]
    if ptype != PAYLOAD_TYPE:
        problems.append(f"{STATEMENT_FILE}: payloadType is {ptype!r}, expected {PAYLOAD_TYPE!r}")
    try:
        payload = _b64decode(envelope.get("payload"))
    except ValueError as exc:
        return [*problems, f"{STATEMENT_FILE}: payload is not base64 ({exc})"]

    if public_key is not None:
        try:
            key = load_public_key(public_key)
        except SignatureError as exc:
            return [*problems, str(exc)]
    else:
        try:
            key = load_public_key(bundle_path / SIGNER_PUB_FILE)
        except SignatureError as exc:
            return [*problems, f"{SIGNER_PUB_FILE}: no usable key in the bundle ({exc.message})"]

    sigs = envelope.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        problems.append(f"{STATEMENT_FILE}: no signatures")
    else:
        message = pae(ptype, payload)
        verified = False
        for entry in sigs:
            try:
                sig = _b64decode(entry.get("sig") if isinstance(entry, dict) else None)
                key.verify(sig, message)
            except (ValueError, InvalidSignature):
                continue
            verified = True
            break
        if not verified:
            problems.append(
                f"{STATEMENT_FILE}: no signature verifies with "
                f"{'the given key' if public_key is not None else SIGNER_PUB_FILE} "
                f"(keyid {keyid_of(key)[:16]}…; tampered payload or payloadType, or signed by another key)"
            )

    try:
        statement = json.loads(payload)
    except ValueError:
        statement = None
    if not isinstance(statement, dict):
        problems.append(f"{STATEMENT_FILE}: payload is not a JSON statement")
        return problems
    if statement.get("_type") != STATEMENT_TYPE:
        problems.append(f"{STATEMENT_FILE}: _type is {statement.get('_type')!r}, not in-toto v1")
    if statement.get("predicateType") != PREDICATE_TYPE:
        problems.append(f"{STATEMENT_FILE}: predicateType is {statement.get('predicateType')!r}")
    subjects = statement.get("subject")
    claimed = None
    if isinstance(subjects, list):
        for s in subjects:
            if (
                isinstance(s, dict)
                and s.get("name") == SUMS_FILE
                and isinstance(s.get("digest"), dict)
            ):
                claimed = s["digest"].get("sha256")
    try:
        actual, _size = sha256_file(bundle_path / SUMS_FILE)
    except OSError:
        actual = None
    if claimed is None:
        problems.append(f"{STATEMENT_FILE}: no {SUMS_FILE} subject with a sha256 digest")
    elif actual is None:
        problems.append(f"{SUMS_FILE}: missing, but the statement signs it")
    elif claimed != actual:
        problems.append(
            f"{SUMS_FILE}: digest {actual[:12]}… differs from the signed subject {str(claimed)[:12]}… "
            "(modified after signing)"
        )
    if public_key is None:
        problems.append(UNTRUSTED_KEY_NOTE)
    return problems
