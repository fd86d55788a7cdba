"""`rb archive` on the bundled example, end to end: pack, verify, unpack, rerun the audit
from the unpacked tree; determinism of the whole package; the RO-Crate; signatures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from archive_helpers import read_members, rewrite
from rbcli import rb

from reprobridge.archive.build import ArchiveOptions, build_archive
from reprobridge.archive.verify import unpack, verify_archive
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.errors import ArchiveError
from reprobridge.evidence.sign import generate_key
from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository

GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]


def _commit(root: Path, msg: str = "rb init") -> None:
    subprocess.run(["git", *GIT_ID, "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", *GIT_ID, "-C", str(root), "commit", "-q", "-m", msg], check=True)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example, initialised, committed and audited once (host backend)."""
    repo = copy_example(tmp_path_factory.mktemp("ex") / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    _commit(repo)
    result = run_audit(repo, AuditOptions(runs=1, backend="host"))
    assert result.passed, json.dumps(result.summary, indent=1)
    return repo


@pytest.fixture(scope="module")
def packed(audited: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out") / "supplement.tar.gz"
    # Empty SOURCE_DATE_EPOCH: the documented default, the commit time.
    proc = rb(
        "archive",
        "--evidence",
        "all",
        "--with-source",
        "-o",
        str(out),
        cwd=audited,
        env={"SOURCE_DATE_EPOCH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_pack_verify_unpack_and_rerun(packed: Path, tmp_path: Path) -> None:
    proc = rb("archive", "verify", str(packed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "archive: OK" in proc.stdout
    dest = tmp_path / "clean"
    proc = rb("unpack", str(packed), str(dest), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in (
        "reprobridge.toml",
        "flake.nix",
        "REPRODUCE.md",
        "MANIFEST.json",
        "ro-crate-metadata.json",
    ):
        assert (dest / name).is_file(), name
    assert list((dest / "repro" / "evidence").iterdir())
    # An archive with the source unpacks as a git repository (one commit, the evidence
    # left out of it), so the audit reruns there as is.
    head = subprocess.run(
        ["git", "-C", str(dest), "log", "--format=%s", "-1"], capture_output=True, text=True
    )
    assert head.stdout.startswith("Unpacked by rb: the source of "), head.stderr
    tracked = subprocess.run(
        ["git", "-C", str(dest), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "train.py" in tracked
    assert not [t for t in tracked if t.startswith("repro/evidence/")]
    result = run_audit(dest, AuditOptions(runs=1, backend="host"))
    assert result.passed, json.dumps(result.summary, indent=1)


def test_repack_is_byte_identical(audited: Path, packed: Path, tmp_path: Path) -> None:
    # Touch every file, change umask and TZ: the archive must not change.
    for p in audited.rglob("*"):
        if p.is_file() and ".git" not in p.parts:
            os.utime(p, (1, 1))
    again = tmp_path / "again.tar.gz"
    env = {"TZ": "America/St_Johns", "LANG": "C", "SOURCE_DATE_EPOCH": ""}
    proc = subprocess.run(
        [
            "sh",
            "-c",
            f'umask 077; exec "{sys.executable}" -m reprobridge archive --evidence all --with-source -o "{again}"',
        ],
        cwd=audited,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert again.read_bytes() == packed.read_bytes()


def test_source_date_epoch_sets_mtime_and_bad_value_names_variable(
    audited: Path, tmp_path: Path
) -> None:
    out = tmp_path / "s.tar.gz"
    res = build_archive(
        audited, out, ArchiveOptions(evidence=["none"], environ={"SOURCE_DATE_EPOCH": "1234"})
    )
    assert res.epoch == 1234
    commit_time = int(
        subprocess.run(
            ["git", "-C", str(audited), "show", "-s", "--format=%ct"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    res2 = build_archive(
        audited,
        tmp_path / "e.tar.gz",
        ArchiveOptions(evidence=["none"], environ={"SOURCE_DATE_EPOCH": ""}),
    )
    assert res2.epoch == commit_time
    proc = rb(
        "archive",
        "--evidence",
        "none",
        "-o",
        str(tmp_path / "x.tar.gz"),
        cwd=audited,
        env={"SOURCE_DATE_EPOCH": "1.5"},
    )
    assert proc.returncode == 10 and "SOURCE_DATE_EPOCH" in proc.stderr


def test_rocrate_structure(packed: Path) -> None:
    crate = json.loads(read_members(packed)["ro-crate-metadata.json"] or b"")
    assert crate["@context"] == "https://w3id.org/ro/crate/1.1/context"
    graph = {e["@id"]: e for e in crate["@graph"]}
    desc = graph["ro-crate-metadata.json"]
    assert desc["conformsTo"] == {"@id": "https://w3id.org/ro/crate/1.1"} and desc["about"] == {
        "@id": "./"
    }
    root = graph["./"]
    assert root["@type"] == "Dataset" and root["name"] and root["datePublished"]
    for part in root["hasPart"]:
        assert part["@id"] in graph
    assert graph["reprobridge.toml"]["sha256"]
    assert any(e["@type"] == "SoftwareSourceCode" for e in graph.values())
    actions = [e for e in graph.values() if e["@type"] == "CreateAction"]
    assert actions and all(
        {"startTime", "endTime", "instrument", "result"} <= set(a) for a in actions
    )
    for a in actions:
        assert a["result"][0]["@id"] in graph


def test_evidence_with_symlink_or_fifo_is_refused(audited: Path, tmp_path: Path) -> None:
    bundle = next((audited / "repro" / "evidence").iterdir())
    link = bundle / "passwd"
    link.symlink_to("/etc/passwd")
    try:
        with pytest.raises(ArchiveError, match="symlink"):
            build_archive(audited, tmp_path / "a.tar.gz", ArchiveOptions(evidence=["all"]))
    finally:
        link.unlink()
    fifo = bundle / "pipe"
    os.mkfifo(fifo)
    try:
        with pytest.raises(ArchiveError, match="FIFO"):
            build_archive(audited, tmp_path / "a.tar.gz", ArchiveOptions(evidence=["all"]))
    finally:
        fifo.unlink()
    assert not (tmp_path / "a.tar.gz").exists()


def test_signature_valid_invalid_and_tamper(audited: Path, tmp_path: Path) -> None:
    keydir = tmp_path / "keys"
    pub, _keyid = generate_key(keydir / "signing.key")
    other, _ = generate_key(keydir / "other.key")
    out = tmp_path / "signed.tar.gz"
    build_archive(audited, out, ArchiveOptions(evidence=["all"], sign_key=keydir / "signing.key"))
    rep = verify_archive(out, pub)
    assert rep.ok and rep.signature == "valid (given key)"
    own = verify_archive(out)
    assert own.ok and "not origin" in own.signature
    wrong = verify_archive(out, other)
    assert not wrong.ok and any("no signature verifies" in p for p in wrong.problems)
    # Archive changed after signing: MANIFEST.json rewritten consistently with a member.
    members = read_members(out)
    doc = json.loads(members["MANIFEST.json"] or b"")
    tampered = rewrite(
        out,
        tmp_path / "t.tar.gz",
        {"MANIFEST.json": json.dumps({**doc, "commit": "0" * 40}).encode()},
    )
    rep = verify_archive(tampered, pub)
    assert any("modified after signing" in p for p in rep.problems)
    # An unsigned archive with a key required.
    plain = tmp_path / "plain.tar.gz"
    build_archive(audited, plain, ArchiveOptions(evidence=["none"]))
    assert any("absent" in p for p in verify_archive(plain, pub).problems)


def test_tampered_member_and_truncation(packed: Path, tmp_path: Path) -> None:
    t = rewrite(packed, tmp_path / "t.tar.gz", {"REPRODUCE.md": b"# hacked\n"})
    rep = verify_archive(t)
    assert any(
        p.startswith("REPRODUCE.md:") and ("size" in p or "modified" in p) for p in rep.problems
    )
    with pytest.raises(ArchiveError, match=r"REPRODUCE\.md"):
        unpack(t, tmp_path / "d")
    assert not (tmp_path / "d").exists()
    data = packed.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    rep = verify_archive(cut)
    assert any("truncated or corrupt" in p for p in rep.problems)
    proc = rb("archive", "verify", str(cut), cwd=tmp_path)
    assert proc.returncode == 1 and "truncated" in proc.stdout
    proc = rb("unpack", str(cut), str(tmp_path / "e"), cwd=tmp_path)
    assert proc.returncode == 10 and "truncated" in proc.stderr
    assert not (tmp_path / "e").exists()
    assert [p for p in tmp_path.iterdir() if "rb-unpack" in p.name] == []


def test_invalid_manifest_in_archive_is_refused(packed: Path, tmp_path: Path) -> None:
    members = read_members(packed)
    bad_toml = b"schema = 1\n[project]\nnam = 'x'\n"
    doc = json.loads(members["MANIFEST.json"] or b"")
    import hashlib

    for f in doc["files"]:
        if f["path"] == "reprobridge.toml":
            f["sha256"], f["size"] = hashlib.sha256(bad_toml).hexdigest(), len(bad_toml)
    t = rewrite(
        packed,
        tmp_path / "m.tar.gz",
        {"reprobridge.toml": bad_toml, "MANIFEST.json": json.dumps(doc).encode()},
    )
    rep = verify_archive(t)
    assert [p for p in rep.problems if p.startswith("reprobridge.toml: does not validate")], (
        rep.problems
    )
