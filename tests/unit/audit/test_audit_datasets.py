"""Dataset checksums before a run: files, directory trees, mismatches, missing data."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reprobridge.audit.datasets import UNVERIFIED, check_datasets, tree_sha256
from reprobridge.errors import AuditError
from reprobridge.manifest.schema import Manifest


def manifest(datasets: dict[str, dict[str, Any]]) -> Manifest:
    return Manifest.model_validate(
        {
            "project": {"name": "p"},
            "datasets": datasets,
            "experiments": {"exp": {"command": "python t.py", "datasets": sorted(datasets)}},
        }
    )


def expected_tree(files: dict[str, bytes]) -> str:
    lines = b"".join(
        hashlib.sha256(data).hexdigest().encode() + b"  " + rel.encode() + b"\n"
        for rel, data in sorted(files.items(), key=lambda kv: kv[0].encode())
    )
    return hashlib.sha256(lines).hexdigest()


FILES = {
    "train/a.bin": b"aaa",
    "train/b.bin": b"b" * 5000,
    "test/c.csv": b"x,y\n1,2\n",
    "Z.txt": b"",
}


def write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_file_checksum(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"hello")
    good = hashlib.sha256(b"hello").hexdigest()
    [c] = check_datasets(manifest({"d": {"path": "data.bin", "sha256": good}}), "exp", tmp_path)
    assert (c.ok, c.actual_sha256, c.kind, c.size) == (True, good, "file", 5)
    assert c.reason == "sha256 matches (file)"


def test_directory_tree_hash_is_the_documented_one(tmp_path: Path) -> None:
    write(tmp_path / "data", FILES)
    (tmp_path / "data/empty-dir").mkdir()
    digest, count, size = tree_sha256(tmp_path / "data")
    assert digest == expected_tree(FILES)
    assert (count, size) == (4, sum(len(v) for v in FILES.values()))
    [c] = check_datasets(manifest({"d": {"path": "data", "sha256": digest}}), "exp", tmp_path)
    assert c.ok and c.kind == "directory" and c.files == 4


def test_tree_hash_equals_the_shell_recipe(tmp_path: Path) -> None:
    if shutil.which("sha256sum") is None or shutil.which("find") is None:
        pytest.skip("coreutils/findutils not available")
    write(tmp_path, FILES)
    recipe = "find -L . -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum"
    out = subprocess.run(
        ["sh", "-c", recipe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.split()[0] == tree_sha256(tmp_path)[0]


def test_tree_hash_is_independent_of_creation_order_and_mtime(tmp_path: Path) -> None:
    write(tmp_path / "one", FILES)
    write(tmp_path / "two", dict(reversed(list(FILES.items()))))
    os.utime(tmp_path / "two/Z.txt", (0, 0))
    assert tree_sha256(tmp_path / "one")[0] == tree_sha256(tmp_path / "two")[0]
    (tmp_path / "two/Z.txt").write_bytes(b"changed")
    assert tree_sha256(tmp_path / "one")[0] != tree_sha256(tmp_path / "two")[0]
    # a rename changes the hash too: paths are part of it
    (tmp_path / "one/Z.txt").rename(tmp_path / "one/Y.txt")
    assert tree_sha256(tmp_path / "one")[0] != expected_tree(FILES)


def test_links_followed_loops_and_special_files_skipped(tmp_path: Path) -> None:
    write(tmp_path / "blobs", {"x": b"payload"})
    data = tmp_path / "data"
    data.mkdir()
    (data / "file.bin").symlink_to(tmp_path / "blobs/x")  # a symlink farm (HF snapshots)
    (data / "loop").symlink_to(data)  # a loop back to the top
    (data / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(data / "fifo")  # never opened: it would block
    digest, count, _ = tree_sha256(data, within=tmp_path)
    assert (digest, count) == (expected_tree({"file.bin": b"payload"}), 1)


def test_links_out_of_the_repository_are_never_followed_nor_hashed(tmp_path: Path) -> None:
    """The checks run on the host: ``data -> /etc/shadow`` put a host file's sha256 and
    size in datasets.json, ``data -> /etc`` hashed a thousand host files."""
    root, host = tmp_path / "repo", tmp_path / "host"
    write(host, {"secret": b"host secret"})
    write(root / "data", {"inside.bin": b"in"})
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "etc").symlink_to("/etc")
    (root / "via").symlink_to(host)  # a directory on the path leads out
    (root / "data/leak").symlink_to(host / "secret")
    (root / "data/hostdir").symlink_to(host)
    (root / "data/up").symlink_to(root / "data/inside.bin")  # inside: followed
    checks = check_datasets(
        manifest(
            {
                "f": {"path": "passwd", "sha256": "0" * 64},
                "d": {"path": "etc"},
                "v": {"path": "via/secret"},
                "t": {"path": "data"},
            }
        ),
        "exp",
        root,
        hash_undeclared=True,
    )
    by_id = {c.id: c for c in checks}
    for key in ("f", "d", "v"):
        c = by_id[key]
        assert (c.actual_sha256, c.kind, c.files, c.size) == (None, None, None, None), c
        assert "links out of the repository (never followed, never hashed)" in c.reason
    assert by_id["f"].ok is False and by_id["d"].ok is True
    tree = by_id["t"]
    assert tree.actual_sha256 == expected_tree({"inside.bin": b"in", "up": b"in"})
    assert tree.links_out == ("hostdir", "leak")
    assert "2 link(s) out of the repository left out" in tree.reason


def test_an_archive_never_carries_a_dataset_with_links_out(tmp_path: Path) -> None:
    from reprobridge.archive.datasets import plan_data

    root = tmp_path / "repo"
    write(root / "data", {"inside.bin": b"in"})
    (root / "data/leak").symlink_to("/etc/passwd")
    digest = expected_tree({"inside.bin": b"in"})
    m = manifest({"t": {"path": "data", "sha256": digest, "license": "CC0-1.0"}})
    plan = plan_data(root, m, carry=True)
    assert plan.carried == {}
    assert plan.left_out["t"] == "data holds links out of the repository (leak, ...)"


def test_mismatch_and_missing_are_not_ok(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"tampered")
    m = manifest(
        {
            "a": {"path": "data.bin", "sha256": "0" * 64},
            "b": {"path": "absent", "sha256": "1" * 64},
            "c": {"sha256": "2" * 64},
        }
    )
    a, b, c = check_datasets(m, "exp", tmp_path)
    assert not a.ok and a.reason.startswith("sha256 mismatch (file): expected 000")
    assert a.actual_sha256 == hashlib.sha256(b"tampered").hexdigest()
    assert not b.ok and b.reason == "absent does not exist" and b.actual_sha256 is None
    assert not c.ok and "no `path`" in c.reason


def test_no_checksum_is_ok_but_unverified(tmp_path: Path) -> None:
    (tmp_path / "d.bin").write_bytes(b"x")
    m = manifest(
        {
            "a": {"path": "d.bin"},
            "b": {"name": "CIFAR10"},
            "c": {"path": "data/cifar", "url": "https://example.org/cifar.tgz"},
        }
    )
    checks = check_datasets(m, "exp", tmp_path)
    assert [(c.ok, c.actual_sha256) for c in checks] == [(True, None)] * 3
    assert [c.reason for c in checks[:2]] == [UNVERIFIED] * 2
    # absent but obtainable by the run (a URL, a library name, generated): not missing
    assert (
        checks[2].reason
        == f"data/cifar does not exist yet (the run downloads or generates it); {UNVERIFIED}"
    )
    a, b, c = check_datasets(m, "exp", tmp_path, hash_undeclared=True)
    assert a.ok and a.actual_sha256 == hashlib.sha256(b"x").hexdigest() and a.reason == UNVERIFIED
    assert b.ok and b.actual_sha256 is None
    assert c.ok


def test_a_missing_dataset_folder_is_missing_not_unverified(tmp_path: Path) -> None:
    """Issue 9: a dataset folder that is not there was reported "ok (unverified)"."""
    [c] = check_datasets(manifest({"a": {"path": "data/shakespeare"}}), "exp", tmp_path)
    assert not c.ok
    assert c.reason == (
        "data/shakespeare does not exist: missing (no URL, library name or generator to obtain it)"
    )


def test_unknown_experiment(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="no experiment 'nope'"):
        check_datasets(manifest({}), "nope", tmp_path)


def test_json_ready(tmp_path: Path) -> None:
    import json

    (tmp_path / "d.bin").write_bytes(b"x")
    [c] = check_datasets(manifest({"a": {"path": "d.bin"}}), "exp", tmp_path)
    assert json.loads(json.dumps(c.to_json()))["reason"] == UNVERIFIED
