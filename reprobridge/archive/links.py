"""`rb check-links`: which flake inputs and dataset URLs still resolve, and which the
archive itself covers.

Contract of :func:`check_links`: reads ``flake.lock`` and ``reprobridge.toml`` from a
repository directory or from an archive (never unpacking it), and returns one
:class:`LinkResult` per locked flake input and per dataset with a URL. Each gets

* ``status``: ``ok`` (HEAD, or a one-byte ranged GET where HEAD is refused, answered
  2xx/3xx), ``broken`` (an HTTP error status: the reason names it), ``unchecked`` (could
  not check: offline, DNS, timeout, TLS; the reason says which) or ``local`` (a path or
  other input with nothing to fetch). Never an exception for a network failure;
* ``covered``: the archive holds it anyway: a flake input whose store path (computed from
  its ``narHash``) is in the archive's ``nix-cache/``, or a dataset whose sha256 matches a
  file of the archive.

Run it yearly on a published supplement: what is ``broken`` and not ``covered`` is lost.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from reprobridge.archive.verify import ArchiveReport, _scan
from reprobridge.constants import FLAKE_LOCK_FILE, MANIFEST_FILE
from reprobridge.errors import ArchiveError, ManifestError
from reprobridge.manifest.io import parse_document, validate_document

Status = Literal["ok", "broken", "unchecked", "local"]
TIMEOUT = 10.0
_NIX32 = "0123456789abcdfghijklmnpqrsvwxyz"


@dataclass
class LinkResult:
    """One link: what it is, where it points, whether it resolves, whether it is covered."""

    kind: Literal["flake-input", "dataset"]
    name: str
    url: str | None
    status: Status
    reason: str
    covered: bool
    covered_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """One row of `rb check-links --json`: every field."""
        return asdict(self)


def nix_base32(data: bytes) -> str:
    """Nix's base-32 (its own alphabet, least significant 5-bit group last)."""
    n = len(data)
    out_len = (n * 8 - 1) // 5 + 1
    chars = []
    for k in range(out_len - 1, -1, -1):
        b = k * 5
        i, j = divmod(b, 8)
        c = (data[i] >> j) | ((data[i + 1] << (8 - j)) if i + 1 < n else 0)
        chars.append(_NIX32[c & 0x1F])
    return "".join(chars)


def source_store_hash(nar_hash: str, name: str = "source") -> str:
    """The hash part of the store path Nix gives a locked input with ``narHash`` (SRI
    ``sha256-...``): the fixed-output, recursive path ``/nix/store/<hash>-<name>``."""
    algo, _, b64 = nar_hash.partition("-")
    if algo != "sha256":
        raise ValueError(f"unsupported narHash {nar_hash!r}")
    digest = base64.b64decode(b64)
    fingerprint = f"source:sha256:{digest.hex()}:/nix/store:{name}".encode()
    h = hashlib.sha256(fingerprint).digest()
    folded = bytearray(20)
    for i, byte in enumerate(h):
        folded[i % 20] ^= byte
    return nix_base32(bytes(folded))


def input_url(locked: dict[str, Any]) -> str | None:
    """An HTTPS URL that serves a locked flake input, or None (path, unsupported)."""
    kind = locked.get("type")
    owner, repo, rev = locked.get("owner"), locked.get("repo"), locked.get("rev")
    if kind == "github" and owner and repo and rev:
        return f"https://github.com/{owner}/{repo}/archive/{rev}.tar.gz"
    if kind == "gitlab" and owner and repo and rev:
        return f"https://gitlab.com/{owner}/{repo}/-/archive/{rev}/{repo}-{rev}.tar.gz"
    if kind == "sourcehut" and owner and repo and rev:
        return f"https://git.sr.ht/{owner}/{repo}/archive/{rev}.tar.gz"
    url = locked.get("url")
    if (
        kind in ("tarball", "file")
        and isinstance(url, str)
        and url.startswith(("http://", "https://"))
    ):
        return url
    if kind == "git" and isinstance(url, str) and url.startswith(("http://", "https://")):
        return url.rstrip("/") + "/info/refs?service=git-upload-pack"
    return None


Prober = Callable[[str, float], tuple[Status, str]]


def probe(url: str, timeout: float = TIMEOUT) -> tuple[Status, str]:
    """``(status, reason)`` for ``url``: HEAD, then a 1-byte ranged GET if HEAD is refused."""
    for method in ("HEAD", "GET"):
        req = urllib.request.Request(
            url, method=method, headers={"User-Agent": "reprobridge-check-links"}
        )
        if method == "GET":
            req.add_header("Range", "bytes=0-0")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return "ok", f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            if method == "HEAD" and exc.code in (403, 405, 501):
                continue  # some servers refuse HEAD; ask for one byte instead
            return "broken", f"HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return "unchecked", f"could not check: {reason}"
    return "unchecked", "could not check: no answer"


def _read_sources(path: Path) -> tuple[bytes | None, bytes | None, dict[str, str], set[str]]:
    """(flake.lock, reprobridge.toml, {sha256: path} of files, narinfo hash parts)."""
    if path.is_dir():
        lock = path / FLAKE_LOCK_FILE
        man = path / MANIFEST_FILE
        return (
            lock.read_bytes() if lock.is_file() else None,
            man.read_bytes() if man.is_file() else None,
            {},
            set(),
        )

    report = ArchiveReport(path)
    _scan(path, report)
    if any(p.startswith("truncated or corrupt") for p in report.problems):
        raise ArchiveError(f"cannot read the archive: {report.problems[0]}", path=str(path))
    by_hash = {digest: name for name, (digest, _size) in sorted(report.files.items())}
    narinfos = {
        name.split("/", 1)[1].removesuffix(".narinfo")
        for name in report.files
        if name.startswith("nix-cache/") and name.endswith(".narinfo") and name.count("/") == 1
    }
    return report.kept.get(FLAKE_LOCK_FILE), report.kept.get(MANIFEST_FILE), by_hash, narinfos


def check_links(
    path: Path, *, offline: bool = False, timeout: float = TIMEOUT, prober: Prober | None = None
) -> list[LinkResult]:
    """Check the links of the repository or archive at ``path`` (see the module doc).

    ``offline`` checks nothing on the network (every remote link is ``unchecked``);
    ``prober`` replaces :func:`probe` (tests).
    """
    path = Path(path)
    if not path.exists():
        raise ArchiveError(
            "does not exist",
            path=str(path),
            hint="give a repository (with reprobridge.toml or flake.lock) or an rb archive",
        )
    lock_raw, man_raw, by_hash, narinfos = _read_sources(path)
    if path.is_dir() and lock_raw is None and man_raw is None:
        # Saying "nothing to check" here would pass a typo'd path as a healthy repository.
        raise ArchiveError(
            f"has neither {FLAKE_LOCK_FILE} nor {MANIFEST_FILE}: not a repository rb set up",
            path=str(path),
            hint="run it in the repository's root (after `rb init`), or give an rb archive",
        )
    todo: list[tuple[LinkResult, str | None]] = []
    if lock_raw is not None:
        try:
            lock = json.loads(lock_raw)
            nodes = lock["nodes"]
            root_name = lock.get("root", "root")
        except (ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(f"not a flake.lock ({exc})", path=FLAKE_LOCK_FILE) from exc
        for name in sorted(nodes):
            node = nodes[name]
            if name == root_name or not isinstance(node, dict) or "locked" not in node:
                continue
            locked = node["locked"]
            url = input_url(locked)
            covered_by = None
            nar = locked.get("narHash")
            if isinstance(nar, str):
                try:
                    h = source_store_hash(nar)
                except ValueError:
                    h = ""
                if h in narinfos:
                    covered_by = f"nix-cache/{h}.narinfo"
            res = LinkResult(
                "flake-input",
                name,
                url,
                "local" if url is None else "unchecked",
                f"{locked.get('type')} input: nothing to fetch" if url is None else "",
                covered_by is not None,
                covered_by,
            )
            todo.append((res, url))
    if man_raw is not None:
        try:
            manifest = validate_document(
                parse_document(man_raw.decode("utf-8"), path=MANIFEST_FILE), path=MANIFEST_FILE
            )
        except (ManifestError, UnicodeDecodeError) as exc:
            raise ArchiveError(
                f"the manifest does not validate: {exc}", path=MANIFEST_FILE
            ) from exc
        for ds_id, ds in sorted(manifest.datasets.items()):
            if not ds.url:
                continue
            covered_by = by_hash.get(ds.sha256) if ds.sha256 else None
            todo.append(
                (
                    LinkResult(
                        "dataset",
                        ds_id,
                        ds.url,
                        "unchecked",
                        "",
                        covered_by is not None,
                        covered_by,
                    ),
                    ds.url,
                )
            )
    check = prober or probe
    remote = [(res, url) for res, url in todo if url is not None]
    if offline:
        for res, _url in remote:
            res.reason = "could not check: offline (--offline)"
    elif remote:
        with ThreadPoolExecutor(max_workers=min(8, len(remote))) as pool:
            answers = list(pool.map(lambda item: _safe(check, item[1], timeout), remote))
        for (res, _url), (status, reason) in zip(remote, answers, strict=True):
            res.status, res.reason = status, reason
    return [res for res, _ in todo]


def _safe(check: Prober, url: str | None, timeout: float) -> tuple[Status, str]:
    assert url is not None
    try:
        return check(url, timeout)
    except Exception as exc:  # a link check never crashes the report
        return "unchecked", f"could not check: {type(exc).__name__}: {exc}"
