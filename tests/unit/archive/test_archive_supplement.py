"""Issue 13's pieces without the network: the wheel plan from uv.lock, the streamed
source (order, links, filter drivers), --max-size, datasets and DATA.md, `rb archive
--check`, the offline install's fail-fast checks, and the repository `rb unpack` makes."""

from __future__ import annotations

import hashlib
import io
import json
import random
import subprocess
import tarfile
from pathlib import Path

import pytest
from archive_helpers import read_members

from reprobridge import _proc
from reprobridge.archive import wheels
from reprobridge.archive.build import ArchiveOptions, build_archive
from reprobridge.archive.check import check_offline
from reprobridge.archive.datasets import plan_data, render_data_md
from reprobridge.archive.pack import Member, write_archive
from reprobridge.archive.restore import make_repository
from reprobridge.archive.source import parse_tar
from reprobridge.archive.supplement import parse_size
from reprobridge.archive.verify import unpack
from reprobridge.audit.offline import offline_requirements
from reprobridge.errors import ArchiveError, AuditError
from reprobridge.manifest.io import parse_document, validate_document

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
H = {k: hashlib.sha256(k.encode()).hexdigest() for k in "abcdefgh"}
LINUX = wheels.Machine((3, 11), wheels.expand_platform("manylinux_2_28_x86_64"))
MAC = wheels.Machine((3, 11), wheels.expand_platform("macosx_14_0_arm64"))

LOCK = f"""
version = 1
requires-python = "==3.11.*"

[[package]]
name = "proj"
version = "0"
source = {{ virtual = "." }}
dependencies = [
    {{ name = "pure" }},
    {{ name = "native", extra = ["fast"] }},
    {{ name = "winonly", marker = "sys_platform == 'win32'" }},
    {{ name = "fromgit" }},
]

[package.dev-dependencies]
dev = [{{ name = "onlysdist" }}]

[[package]]
name = "pure"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://x/pure-1.0-py3-none-any.whl", hash = "sha256:{H["a"]}", size = 10 }}]

[[package]]
name = "native"
version = "2.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://x/native-2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", hash = "sha256:{H["b"]}", size = 20 }},
    {{ url = "https://x/native-2.0-cp311-cp311-macosx_11_0_arm64.whl", hash = "sha256:{H["c"]}", size = 30 }},
    {{ url = "https://x/native-2.0-cp311-cp311-win_amd64.whl", hash = "sha256:{H["d"]}", size = 40 }},
]

[package.optional-dependencies]
fast = [{{ name = "speedup", marker = "platform_machine == 'x86_64'" }}]

[[package]]
name = "speedup"
version = "3.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://x/speedup-3.0-py3-none-any.whl", hash = "sha256:{H["e"]}", size = 5 }}]

[[package]]
name = "winonly"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://x/winonly-1.0-py3-none-any.whl", hash = "sha256:{H["f"]}", size = 5 }}]

[[package]]
name = "fromgit"
version = "0.1"
source = {{ git = "https://example.invalid/x.git?rev=abc#abc" }}

[[package]]
name = "onlysdist"
version = "0.5"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://x/onlysdist-0.5.tar.gz", hash = "sha256:{H["g"]}", size = 7 }}
""".encode()


def test_plan_follows_markers_extras_and_groups_and_reports_the_rest() -> None:
    plan = wheels.plan_wheels(LOCK, [LINUX])
    assert [d.filename for d in plan.wheels] == [
        "native-2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "pure-1.0-py3-none-any.whl",
        "speedup-3.0-py3-none-any.whl",  # the extra, its marker holds on x86_64
    ]
    assert plan.wheels[0].sha256 == H["b"]
    assert plan.sdists == ["onlysdist 0.5"]  # a dev group's package: reported, not dropped
    assert plan.missing == ["fromgit 0.1: from a git source, not an index; not carried"]
    assert plan.size == 35


def test_plan_for_two_machines_is_the_union() -> None:
    plan = wheels.plan_wheels(LOCK, [LINUX, MAC])
    names = [d.filename for d in plan.wheels]
    assert "native-2.0-cp311-cp311-macosx_11_0_arm64.whl" in names
    assert "native-2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl" in names
    assert not [n for n in names if "win" in n]


def test_expand_platform_takes_older_manylinux() -> None:
    tags = wheels.expand_platform("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert "manylinux2014_x86_64" in tags and "linux_x86_64" in tags
    assert "manylinux_2_29_x86_64" not in tags
    assert wheels.expand_platform("win_amd64") == ("win_amd64",)


def test_parse_size() -> None:
    assert parse_size("500M") == 500_000_000
    assert parse_size("1.5GiB") == int(1.5 * 2**30)
    assert parse_size("1000") == 1000
    for bad in ("", "lots", "-1M", "5X"):
        with pytest.raises(ArchiveError):
            parse_size(bad)


# --- the streamed source --------------------------------------------------------------


def _repo(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "reprobridge.toml").write_text('schema = 1\n[project]\nname = "t"\n')
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", "c"], check=True)
    return root


def test_source_pipe_is_widened(tmp_path: Path) -> None:
    """Issue 14: `git archive`'s 64 KiB pipe made a 40 MB stream 640 hand-offs between git
    and rb, each a wait for a core on a busy machine; git_stream asks for 1 MiB."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("no F_GETPIPE_SZ (not Linux)")
    if int(Path("/proc/sys/fs/pipe-max-size").read_text()) < _proc.PIPE_SIZE:
        pytest.skip("pipe-max-size is below 1 MiB here")
    root = _repo(tmp_path, {"a.txt": b"a\n"})
    with _proc.git_stream(root, "archive", "--format=tar", "HEAD") as pipe:
        assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == _proc.PIPE_SIZE
        assert any(m.path == "a.txt" for m in parse_tar(pipe))


def test_source_streams_in_git_order_merged_with_artifacts(tmp_path: Path) -> None:
    big = bytes(range(256)) * 5000  # over one chunk: read through the bounded reader
    root = _repo(
        tmp_path,
        {
            "a-b.txt": b"dash\n",
            "a/x.py": b"x\n",
            "a.txt": b"dot\n",
            "run.sh": b"#!/bin/sh\n",
            "big.bin": big,
            "\u00e9t\u00e9/" + "n" * 120 + ".txt": b"long non-ascii\n",
        },
    )
    (root / "run.sh").chmod(0o755)
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", "x"], check=True)
    out = tmp_path / "s.tar.gz"
    build_archive(root, out, ArchiveOptions(evidence=["none"], with_source=True))
    members = read_members(out)
    assert members["big.bin"] == big
    assert members["\u00e9t\u00e9/" + "n" * 120 + ".txt"] == b"long non-ascii\n"
    with tarfile.open(out) as tar:
        infos = tar.getmembers()
    names = [i.name for i in infos]
    # Sorted with a directory as "name/": a-b.txt < a.txt < a/ < a/x.py.
    assert names.index("a-b.txt") < names.index("a.txt") < names.index("a") < names.index("a/x.py")
    assert next(i for i in infos if i.name == "run.sh").mode == 0o755
    assert len(names) == len(set(names))


def test_parse_tar_reads_pax_path_and_refuses_links() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("d/" + "y" * 200)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    it = parse_tar(io.BytesIO(buf.getvalue()))
    first = next(it)
    assert (first.path, first.data) == ("d/" + "y" * 200, b"abc")
    with pytest.raises(ArchiveError, match="link or special file"):
        next(it)


def test_source_symlink_in_commit_is_refused(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"a.txt": b"a\n"})
    (root / "l").symlink_to("/etc/passwd")
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", "l"], check=True)
    out = tmp_path / "s.tar.gz"
    with pytest.raises(ArchiveError, match="link or special file") as exc:
        build_archive(root, out, ArchiveOptions(evidence=["none"], with_source=True))
    assert exc.value.path == "l"
    assert not out.exists()


def test_source_does_not_run_the_repositorys_filter_driver(tmp_path: Path) -> None:
    # Regression: `rb archive --with-source` ran `git archive` without switching off the
    # repository's filter drivers, so its smudge command ran on the host.
    root = _repo(tmp_path, {"a.txt": b"a\n", ".gitattributes": b"*.txt filter=evil\n"})
    marker = tmp_path / "pwned"
    subprocess.run(
        ["git", "-C", str(root), "config", "filter.evil.smudge", f"touch {marker}; cat"],
        check=True,
    )
    build_archive(root, tmp_path / "s.tar.gz", ArchiveOptions(evidence=["none"], with_source=True))
    assert not marker.exists()


def test_source_reserved_name_is_refused(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"MANIFEST.json": b"{}"})
    with pytest.raises(ArchiveError, match="reserves"):
        build_archive(
            root, tmp_path / "s.tar.gz", ArchiveOptions(evidence=["none"], with_source=True)
        )


def test_max_size_refuses_and_leaves_output(tmp_path: Path) -> None:
    src = tmp_path / "f.bin"
    src.write_bytes(random.Random(0).randbytes(100_000))  # incompressible
    out = tmp_path / "a.tar.gz"
    out.write_bytes(b"previous")
    with pytest.raises(ArchiveError, match="--max-size"):
        write_archive([Member("f.bin", source=src)], out, mtime=0, max_size=1000)
    assert out.read_bytes() == b"previous"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    write_archive([Member("f.bin", source=src)], out, mtime=0, max_size=10**7)


# --- datasets ---------------------------------------------------------------------------


def _manifest(datasets: str) -> object:
    text = f'schema = 1\n[project]\nname = "t"\n{datasets}'
    return validate_document(parse_document(text, path="m"), path="m")


def test_data_carried_only_with_hash_and_redistributable_licence(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ok.csv").write_bytes(b"1,2\n")
    (tmp_path / "data" / "closed.csv").write_bytes(b"3,4\n")
    good = hashlib.sha256(b"1,2\n").hexdigest()
    closed = hashlib.sha256(b"3,4\n").hexdigest()
    m = _manifest(
        f'[datasets.ok]\npath = "data/ok.csv"\nsha256 = "{good}"\nlicense = "CC-BY-4.0"\n'
        f'[datasets.closed]\npath = "data/closed.csv"\nsha256 = "{closed}"\n'
        'license = "LicenseRef-proprietary"\nurl = "https://example.invalid/closed"\n'
        f'[datasets.wrong]\npath = "data/ok.csv"\nsha256 = "{"0" * 64}"\nlicense = "CC0-1.0"\n'
        '[datasets.nohash]\nurl = "https://example.invalid/x"\nlicense = "CC0-1.0"\n'
    )
    plan = plan_data(tmp_path, m, carry=True)  # type: ignore[arg-type]
    assert plan.carried == {"ok": "data/ok.csv"}
    assert "not known to allow redistribution" in plan.left_out["closed"]
    assert "hashes to" in plan.left_out["wrong"]
    assert "no sha256" in plan.left_out["nohash"]
    md = render_data_md(m, plan).decode()  # type: ignore[arg-type]
    assert "## closed" in md and "https://example.invalid/closed" in md
    assert f"`{closed}`" in md and "in this archive: no:" in md
    assert "in this archive: yes, at `data/ok.csv`" in md
    assert md == render_data_md(m, plan).decode()  # type: ignore[arg-type]


# --- rb archive --check, the offline install's checks, rb unpack's repository -------------


def test_check_reports_what_lacks(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"a.txt": b"a\n"})
    out = tmp_path / "plain.tar.gz"
    build_archive(root, out, ArchiveOptions(evidence=["none"]))
    rep = check_offline(out)
    got = {i.what: i.status for i in rep.items}
    assert got == {
        "archive": "ok",
        "source": "lacks",
        "wheels": "n/a",
        "data": "n/a",
        "closure": "lacks",
    }
    assert not rep.complete
    doc = rep.as_json()
    assert doc["host_complete"] is False and doc["nix_complete"] is False
    full = tmp_path / "full.tar.gz"
    build_archive(root, full, ArchiveOptions(evidence=["none"], with_source=True))
    assert check_offline(full).host_complete


def _unpacked_lock(tmp_path: Path, lock: bytes) -> Path:
    root = tmp_path / "u"
    (root / "repro" / "python").mkdir(parents=True)
    (root / "repro" / "python" / "uv.lock").write_bytes(lock)
    (root / "wheels").mkdir()
    return root


def test_offline_fails_fast_naming_the_missing_wheel(tmp_path: Path) -> None:
    data = b"not really a wheel"
    digest = hashlib.sha256(data).hexdigest()
    lock = f"""
version = 1
[[package]]
name = "proj"
version = "0"
source = {{ virtual = "." }}
dependencies = [{{ name = "pure" }}]

[[package]]
name = "pure"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://x/pure-1.0-py3-none-any.whl", hash = "sha256:{digest}" }}]
""".encode()
    root = _unpacked_lock(tmp_path, lock)
    with pytest.raises(AuditError, match=r"pure 1\.0 \(pure-1\.0-py3-none-any\.whl\) is not in"):
        offline_requirements(root, root / "wheels", "3.11")
    (root / "wheels" / "pure-1.0-py3-none-any.whl").write_bytes(b"tampered")
    with pytest.raises(AuditError, match="the lock pins"):
        offline_requirements(root, root / "wheels", "3.11")
    (root / "wheels" / "pure-1.0-py3-none-any.whl").write_bytes(data)
    assert offline_requirements(root, root / "wheels", "3.11") == [
        f"pure==1.0 --hash=sha256:{digest}"
    ]


def test_offline_refuses_sdist_git_and_no_lock(tmp_path: Path) -> None:
    root = _unpacked_lock(tmp_path, LOCK)
    with pytest.raises(AuditError, match=r"onlysdist 0\.5 has no wheel"):
        offline_requirements(root, root / "wheels", "3.11")
    (root / "repro" / "python" / "uv.lock").unlink()
    with pytest.raises(AuditError, match="there is no lock"):
        offline_requirements(root, root / "wheels", "3.11")


def test_unpack_makes_a_deterministic_repository(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"a.txt": b"a\n", "wheels/x.whl": b"not in the commit\n"})
    out = tmp_path / "s.tar.gz"
    build_archive(root, out, ArchiveOptions(evidence=["none"], with_source=True))
    heads = []
    for name in ("u1", "u2"):
        rep = unpack(out, tmp_path / name)
        heads.append(make_repository(tmp_path / name, rep.manifest or {}))
    assert heads[0] is not None and heads[0] == heads[1]
    tracked = subprocess.run(
        ["git", "-C", str(tmp_path / "u1"), "ls-files"], capture_output=True, text=True
    ).stdout.split()
    assert "a.txt" in tracked and "wheels/x.whl" not in tracked
    assert json.loads((tmp_path / "u1" / "MANIFEST.json").read_text())["with_source"] is True
    plain = tmp_path / "p.tar.gz"
    build_archive(root, plain, ArchiveOptions(evidence=["none"]))
    rep = unpack(plain, tmp_path / "u3")
    assert make_repository(tmp_path / "u3", rep.manifest or {}) is None


def test_canonical_json_equals_the_standard_library() -> None:
    from reprobridge.evidence.dsse import canonical_json as canonical
    from reprobridge.evidence.errors import EvidenceError

    rng = random.Random(7)
    alphabet = 'ab"\\\n\té€\x00\x1f/\U0001f600'

    def gen(depth: int = 0) -> object:
        c = rng.randint(0, 7 if depth < 4 else 4)
        if c == 0:
            return rng.randint(-(10**20), 10**20)
        if c == 1:
            return rng.random() * 1e10
        if c == 2:
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        if c == 3:
            return rng.choice([True, False, None])
        if c == 4:
            return []
        if c == 5:
            return [gen(depth + 1) for _ in range(rng.randint(0, 4))]
        return {
            "".join(rng.choice('kz"é') for _ in range(rng.randint(0, 3))): gen(depth + 1)
            for _ in range(rng.randint(0, 4))
        }

    for _ in range(2000):
        doc = gen()
        want = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
        assert canonical(doc) == (want + "\n").encode()
    with pytest.raises(EvidenceError, match="cannot be stored as JSON"):
        canonical({"x": float("nan")})


def test_cache_public_key_is_printed_only_in_its_exact_shape(tmp_path: Path) -> None:
    from reprobridge.archive.closure import PUBLIC_KEY_FILE, cache_public_key

    cache = tmp_path / "nix-cache"
    cache.mkdir()
    assert cache_public_key(cache) is None
    good = "rb-archive-abc:" + "A" * 43 + "="
    (cache / PUBLIC_KEY_FILE).write_text(good + "\n")
    assert cache_public_key(cache) == good
    # Archive content reaches the terminal: escape sequences and extra text are refused.
    (cache / PUBLIC_KEY_FILE).write_text("x:\x1b[2J" + "A" * 43 + "=")
    assert cache_public_key(cache) is None
    (cache / PUBLIC_KEY_FILE).write_text(good + "\ntrusted-public-keys = evil:" + "B" * 43 + "=")
    assert cache_public_key(cache) is None
