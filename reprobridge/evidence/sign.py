"""Ed25519 signatures over a bundle: a DSSE envelope around an in-toto Statement v1
(:mod:`reprobridge.evidence.dsse` makes and checks envelopes; this module holds the keys
and what a bundle's statement says).

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

import os
import stat
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from reprobridge import __version__
from reprobridge._fs import read_regular, write_atomic
from reprobridge.evidence import dsse
from reprobridge.evidence.bundle import Bundle
from reprobridge.evidence.dsse import keyid_of
from reprobridge.evidence.errors import SignatureError
from reprobridge.evidence.hashing import sha256_file
from reprobridge.evidence.layout import SIGNER_PUB_FILE, STATEMENT_FILE, SUMS_FILE

PREDICATE_TYPE = "https://reprobridge.dev/audit/v1"
#: verify_signature's entry when it had no trusted key (verify.py maps it to a status).
UNTRUSTED_KEY_NOTE = "signature checked against the key in the bundle only (not trusted)"


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
    write_atomic(public_path, dsse.public_pem(key.public_key()), mode=0o644)
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
        return dsse.public_key_from_pem(read_regular(Path(path)))
    except OSError as exc:
        raise SignatureError(f"not a readable PEM public key ({exc})", path=str(path)) from exc
    except ValueError as exc:
        raise SignatureError(str(exc), path=str(path)) from exc


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
    envelope = dsse.sign(
        key,
        subject=SUMS_FILE,
        digest=digest,
        predicate_type=PREDICATE_TYPE,
        predicate={"audit_id": bundle.audit_id, "rb_version": __version__, **predicate},
    )
    bundle.write_bytes(SIGNER_PUB_FILE, dsse.public_pem(key.public_key()))
    return bundle.write_bytes(STATEMENT_FILE, envelope)


def verify_signature(bundle_path: Path, public_key: Path | None) -> list[str]:
    """Problems with the bundle's signature (empty = valid), each naming the file it is
    about: :func:`reprobridge.evidence.dsse.verify` of ``statement.dsse.json`` for our
    predicate type over the bundle's actual ``SHA256SUMS``. With ``public_key=None`` the
    bundle's own ``signer.pub`` is used and :data:`UNTRUSTED_KEY_NOTE` is added."""
    try:
        raw = read_regular(bundle_path / STATEMENT_FILE)
    except FileNotFoundError:
        return [f"{STATEMENT_FILE}: absent (the bundle is not signed)"]
    except OSError as exc:
        return [f"{STATEMENT_FILE}: unreadable ({exc.strerror or exc})"]
    key: Ed25519PublicKey
    try:
        key = load_public_key(public_key or bundle_path / SIGNER_PUB_FILE)
    except SignatureError as exc:
        if public_key is not None:
            return [str(exc)]
        return [f"{SIGNER_PUB_FILE}: no usable key in the bundle ({exc.message})"]
    try:
        actual: str | None = sha256_file(bundle_path / SUMS_FILE)[0]
    except OSError:
        actual = None
    checked = dsse.verify(
        raw,
        key,
        key_name="the given key" if public_key is not None else SIGNER_PUB_FILE,
        subject=SUMS_FILE,
        actual_digest=actual,
        predicate_type=PREDICATE_TYPE,
    )
    problems = [f"{STATEMENT_FILE}: {p}" for p in checked.problems]
    if checked.subject_problem is not None:
        problems.append(f"{SUMS_FILE}: {checked.subject_problem}")
    if public_key is None:
        problems.append(UNTRUSTED_KEY_NOTE)
    return problems
