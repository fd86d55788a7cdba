"""Signing: DSSE PAE vector, round trip, every rejection of case 26/27, key handling."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from evidence_helpers import build_bundle

from reprobridge import __version__
from reprobridge.evidence import (
    Bundle,
    SignatureError,
    generate_key,
    sign_bundle,
    verify_bundle,
    verify_signature,
)
from reprobridge.evidence.dsse import PAYLOAD_TYPE, keyid_of, pae
from reprobridge.evidence.sign import PREDICATE_TYPE, UNTRUSTED_KEY_NOTE, load_public_key


@pytest.fixture
def keydir(tmp_path: Path) -> Path:
    d = tmp_path / "keys"  # tmp_path is not inside a git work tree
    d.mkdir()
    return d


def _signed(tmp_path: Path, keydir: Path) -> tuple[Bundle, Path, Path]:
    bundle = build_bundle(tmp_path / "repo")
    pub, _keyid = generate_key(keydir / "signing.key")
    # The shape the auditor signs (auditor._predicate).
    predicate = {
        "audit_id": bundle.audit_id,
        "passed": True,
        "verdict": "PASS",
        "startedOn": "2026-01-01T00:00:00Z",
        "finishedOn": "2026-01-01T01:00:00Z",
        "materials": {
            "git_commit": "a" * 40,
            "manifest_sha256": "c" * 64,
            "flake_lock_sha256": "b" * 64,
        },
    }
    with bundle.lock():
        sign_bundle(bundle, keydir / "signing.key", predicate)
    return bundle, keydir / "signing.key", pub


def _envelope(bundle: Bundle) -> dict:
    return json.loads((bundle.path / "statement.dsse.json").read_bytes())


def _put(bundle: Bundle, env: dict) -> None:
    (bundle.path / "statement.dsse.json").write_text(json.dumps(env))


def test_pae_spec_vector() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t", "é".encode()) == "DSSEv1 1 t 2 é".encode()  # lengths are in bytes


def test_generate_key(keydir: Path) -> None:
    priv = keydir / "sub" / "signing.key"
    pub, keyid = generate_key(priv)
    assert pub == priv.with_name("signing.key.pub")
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600
    assert stat.S_IMODE(priv.parent.stat().st_mode) == 0o700
    assert priv.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert keyid == keyid_of(load_public_key(pub)) and len(keyid) == 64
    with pytest.raises(SignatureError, match="overwrite"):
        generate_key(priv)


def test_generate_key_refuses_a_git_work_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "deep" / "er").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pytest.raises(SignatureError, match="git work tree"):
        generate_key(repo / "deep" / "er" / "signing.key")
    assert not (repo / "deep" / "er" / "signing.key").exists()
    # A symlink from outside into the repository does not get around it.
    (tmp_path / "link").symlink_to(repo / "deep")
    with pytest.raises(SignatureError, match="git work tree"):
        generate_key(tmp_path / "link" / "signing.key")


def test_round_trip(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    assert verify_signature(bundle.path, pub) == []
    assert verify_signature(bundle.path, None) == [UNTRUSTED_KEY_NOTE]
    env = _envelope(bundle)
    assert env["payloadType"] == PAYLOAD_TYPE
    statement = json.loads(base64.b64decode(env["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == PREDICATE_TYPE
    assert statement["subject"][0]["name"] == "SHA256SUMS"
    pred = statement["predicate"]
    assert pred["audit_id"] == bundle.audit_id and pred["rb_version"] == __version__
    assert pred["materials"]["git_commit"] == "a" * 40
    assert (bundle.path / "signer.pub").read_bytes() == pub.read_bytes()
    report = verify_bundle(bundle.path, pub)
    assert report.problems == [] and report.signature == "valid"
    untrusted = verify_bundle(bundle.path)
    assert untrusted.problems == [] and untrusted.signature == "valid (untrusted key)"


def test_url_safe_base64_is_accepted(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    env = _envelope(bundle)
    env["payload"] = base64.urlsafe_b64encode(base64.b64decode(env["payload"])).decode().rstrip("=")
    env["signatures"][0]["sig"] = base64.urlsafe_b64encode(
        base64.b64decode(env["signatures"][0]["sig"])
    ).decode()
    _put(bundle, env)
    assert verify_signature(bundle.path, pub) == []


def test_flipped_payload_byte(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    env = _envelope(bundle)
    payload = bytearray(base64.b64decode(env["payload"]))
    i = payload.index(b'"PASS"') + 1
    payload[i] ^= 0x20  # PASS -> pASS
    env["payload"] = base64.b64encode(bytes(payload)).decode()
    _put(bundle, env)
    problems = verify_signature(bundle.path, pub)
    assert any("no signature verifies" in p for p in problems), problems


def test_swapped_payload_type(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    env = _envelope(bundle)
    env["payloadType"] = "application/json"
    _put(bundle, env)
    problems = verify_signature(bundle.path, pub)
    assert problems[0].startswith("statement.dsse.json: payloadType is 'application/json'")
    assert any("no signature verifies" in p for p in problems)


def test_signature_from_another_key_with_a_misleading_keyid(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    env = _envelope(bundle)
    payload = base64.b64decode(env["payload"])
    mallory = Ed25519PrivateKey.generate()
    trusted_keyid = env["signatures"][0]["keyid"]
    # Valid signature by another key, claiming to be the trusted key.
    env["signatures"] = [
        {
            "keyid": trusted_keyid,
            "sig": base64.b64encode(mallory.sign(pae(PAYLOAD_TYPE, payload))).decode(),
        }
    ]
    _put(bundle, env)
    assert any("no signature verifies" in p for p in verify_signature(bundle.path, pub))


def test_keyid_is_only_a_hint(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    env = _envelope(bundle)
    env["signatures"][0]["keyid"] = "not-the-right-id"
    _put(bundle, env)
    assert verify_signature(bundle.path, pub) == []  # the signature decides, not the keyid


def test_empty_signatures(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    env = _envelope(bundle)
    env["signatures"] = []
    _put(bundle, env)
    assert "statement.dsse.json: no signatures" in verify_signature(bundle.path, pub)


def test_bundle_modified_after_signing(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    # An attacker edits a log and re-writes SHA256SUMS consistently: only the signature knows.
    log = bundle.path / "runs/train/1/stdout.log"
    log.write_bytes(b"acc=0.99\n")
    sums = (bundle.path / "SHA256SUMS").read_text()
    import hashlib

    new = "".join(
        f"{hashlib.sha256((bundle.path / line.split('  ', 1)[1]).read_bytes()).hexdigest()}  {line.split('  ', 1)[1]}\n"
        for line in sums.splitlines()
    )
    (bundle.path / "SHA256SUMS").write_text(new)
    problems = verify_signature(bundle.path, pub)
    assert any(
        p.startswith("SHA256SUMS: digest") and "modified after signing" in p for p in problems
    )
    report = verify_bundle(bundle.path, pub)
    assert report.signature.startswith("invalid: SHA256SUMS: digest")
    assert any("runs/train/1/stdout.log" in p for p in report.problems)  # status.json still knows


def test_attacker_resigning_with_own_key_is_untrusted_only(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    (bundle.path / "statement.dsse.json").unlink()
    (bundle.path / "signer.pub").unlink()
    generate_key(keydir / "mallory.key")
    with bundle.lock():
        sign_bundle(bundle, keydir / "mallory.key", {})
    assert verify_signature(bundle.path, None) == [UNTRUSTED_KEY_NOTE]  # consistent, but...
    assert any("no signature verifies" in p for p in verify_signature(bundle.path, pub))
    assert verify_bundle(bundle.path, pub).signature.startswith("invalid:")


def test_sign_requires_sealed_bundle_and_private_key_mode(tmp_path: Path, keydir: Path) -> None:
    generate_key(keydir / "k")
    unsealed = build_bundle(tmp_path / "u", seal=False)
    with unsealed.lock(), pytest.raises(SignatureError, match="not sealed"):
        sign_bundle(unsealed, keydir / "k", {})
    sealed = build_bundle(tmp_path / "s")
    (keydir / "k").chmod(0o644)
    with sealed.lock(), pytest.raises(SignatureError, match="accessible by others"):
        sign_bundle(sealed, keydir / "k", {})
    (keydir / "k").chmod(0o600)
    with sealed.lock(), pytest.raises(SignatureError, match="audit_id"):
        sign_bundle(sealed, keydir / "k", {"audit_id": "other"})


def test_verify_with_wrong_kind_of_key_file(tmp_path: Path, keydir: Path) -> None:
    bundle, priv, _pub = _signed(tmp_path, keydir)
    problems = verify_signature(bundle.path, priv)  # a private key is not a public key
    assert problems and "not a readable PEM public key" in problems[0]


def test_garbage_envelopes(tmp_path: Path, keydir: Path) -> None:
    bundle, _priv, pub = _signed(tmp_path, keydir)
    for bad in (
        "{",
        "[]",
        '{"payloadType": "x"}',
        json.dumps({"payloadType": PAYLOAD_TYPE, "payload": "!!", "signatures": []}),
    ):
        (bundle.path / "statement.dsse.json").write_text(bad)
        problems = verify_signature(bundle.path, pub)
        assert problems and problems[0].startswith("statement.dsse.json:"), bad
    (bundle.path / "statement.dsse.json").unlink()
    assert verify_bundle(bundle.path).signature == "absent"
    assert verify_bundle(bundle.path, pub).problems == [
        "statement.dsse.json: absent, but a public key was given to check it"
    ]


def test_evidence_submodules_load_without_cryptography() -> None:
    """``evidence/__init__`` is lazy: hashing, writing a bundle and reading its records
    need neither cryptography nor the signer (issue 11: importing evidence.hashing loaded
    cryptography)."""
    code = (
        "import sys\n"
        "import reprobridge.evidence.hashing, reprobridge.evidence.bundle\n"
        "import reprobridge.evidence.records, reprobridge.evidence.store\n"
        "from reprobridge.evidence import sha256_file, Bundle\n"
        "bad = sorted(m for m in sys.modules if m.startswith('cryptography')\n"
        "             or m == 'reprobridge.evidence.sign')\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_validly_signed_statement_of_another_predicate_type_is_refused() -> None:
    """The same key may sign other in-toto statements (a build's provenance, another
    tool's attestation over a file named SHA256SUMS): only rb's audit predicate counts."""
    from reprobridge.evidence import dsse

    key = Ed25519PrivateKey.generate()
    digest = "ab" * 32
    other = dsse.sign(
        key,
        subject="SHA256SUMS",
        digest=digest,
        predicate_type="https://slsa.dev/provenance/v1",
        predicate={"passed": True},
    )
    checked = dsse.verify(
        other,
        key.public_key(),
        key_name="the given key",
        subject="SHA256SUMS",
        actual_digest=digest,
        predicate_type=PREDICATE_TYPE,
    )
    assert checked.problems == ["predicateType is 'https://slsa.dev/provenance/v1'"]
    assert not checked.ok
