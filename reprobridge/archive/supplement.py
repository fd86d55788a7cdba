"""What a supplement carries for offline reproduction beyond rb's artifacts: wheels and
data, plus ``repro/DATA.md``, and the size estimate shown before packing.

Contract of :func:`collect_supplement`: the members for ``wheels/`` (every wheel the
target machines install from ``repro/python/uv.lock``, from rb's cache, sha256-checked
against the lock: :mod:`reprobridge.archive.wheels`), for carried datasets (at their
``path``: :mod:`reprobridge.archive.datasets`) and ``repro/DATA.md``, plus
:class:`Supplement.doc`, the ``offline`` record of ``MANIFEST.json`` (what is carried,
which sdists would need a build, what is missing); ``rb archive --check`` reads it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge import _proc
from reprobridge.archive import members as mem
from reprobridge.archive.pack import BLOCK, Member
from reprobridge.constants import PYTHON_DIR, WHEELS_DIR
from reprobridge.errors import ArchiveError
from reprobridge.manifest.schema import Manifest

LOCK_REL = f"{PYTHON_DIR}/uv.lock"
_BLOB_SIZE = re.compile(rb"(?:^|\0)[0-7]+ blob [0-9a-f]+ +([0-9]+)\t")


@dataclass
class Supplement:
    """Members to add and the ``offline`` record for MANIFEST.json."""

    members: list[Member] = field(default_factory=list)
    doc: dict[str, Any] = field(default_factory=dict)
    wheel_bytes: int = 0
    data_bytes: int = 0


def collect_supplement(
    root: Path,
    manifest: Manifest,
    *,
    with_wheels: bool,
    with_data: bool,
    data_md: bool,
    platforms: tuple[str, ...] = (),
    cache: Path | None = None,
) -> Supplement:
    """See the module doc."""
    out = Supplement()
    if with_wheels:
        from reprobridge.archive import wheels  # ~10 ms of imports an archive without wheels skips

        python = wheels.parse_python(manifest.environment.python)
        machines = (
            [wheels.Machine(python, wheels.expand_platform(p)) for p in platforms]
            if platforms
            else [wheels.this_machine(python)]
        )
        lock = root / LOCK_REL
        if lock.is_file():
            plan = wheels.plan_wheels(lock.read_bytes(), machines)
            paths = wheels.fetch_wheels(plan, python, cache or wheels.cache_dir())
        elif manifest.environment.python_requirements:
            raise ArchiveError(
                "not found: --with-wheels carries what the lock pins",
                path=LOCK_REL,
                hint="lock the Python packages with `rb init --lock` (needs PyPI), or pack "
                "with --no-wheels",
            )
        else:
            plan, paths = wheels.WheelPlan(), []
        out.members += [
            Member(f"{WHEELS_DIR}/{d.filename}", source=p)
            for d, p in zip(plan.wheels, paths, strict=True)
        ]
        out.wheel_bytes = sum(p.stat().st_size for p in paths)
        out.doc["wheels"] = {
            "python": f"{python[0]}.{python[1]}",
            "platforms": [m.platforms[0] for m in machines],
            "files": [d.filename for d in plan.wheels],
            "sdists_need_build": plan.sdists,
            "missing": plan.missing,
        }
    if with_data or data_md:
        from reprobridge.archive import datasets

        plan_d = datasets.plan_data(root, manifest, carry=with_data)
        for ds_path in plan_d.carried.values():
            target = root / ds_path
            group = (
                mem.tree_members(target, ds_path)
                if target.is_dir()
                else [Member(ds_path, source=target)]
            )
            out.members += group
            out.data_bytes += sum(m.source.stat().st_size for m in group if m.source)
        out.members.append(Member(datasets.DATA_MD, data=datasets.render_data_md(manifest, plan_d)))
        out.doc["data"] = {"carried": plan_d.carried, "left_out": plan_d.left_out}
    return out


def source_size(root: Path, commit: str) -> tuple[int, int]:
    """``(files, bytes)`` of ``commit``'s tree, from git's object sizes (nothing read)."""
    res = _proc.git(root, "ls-tree", "-r", "-l", "-z", commit, timeout=600)
    # One regular expression over the whole listing, not a split per entry (20k entries
    # for a large source tree): "<mode> blob <id> <size>\t<path>", NUL-separated.
    sizes = _BLOB_SIZE.findall(res.stdout)
    return len(sizes), sum(map(int, sizes))


def tar_size(members: list[Member]) -> int:
    """Bytes ``members`` take in an uncompressed tar (headers and padding included)."""
    total = 0
    for m in members:
        size = 0
        if m.data is not None:
            size = len(m.data)
        elif m.source is not None:
            try:
                size = m.source.stat().st_size
            except OSError:
                size = 0
        total += BLOCK + size + (-size % BLOCK)
    return total


def human_size(n: int) -> str:
    """``n`` bytes as ``812 B``, ``52.2 kB``, ``1.3 MB``, ``4.0 GB`` (powers of 1000)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def parse_size(text: str) -> int:
    """``500M``, ``2G``, ``1.5GiB``, ``1000000``: bytes (K/M/G/T powers of 1000, KiB/MiB/
    GiB/TiB of 1024); ArchiveError for anything else."""
    raw = text.strip()
    units = {"": 1, "B": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    units |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
    units |= {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    num = raw.rstrip("bBkKmMgGtTiI")
    unit = raw[len(num) :].upper()
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    if unit not in units or value < 0:
        raise ArchiveError(f"--max-size {text!r} is not a size (e.g. 500M, 2G, 1.5GiB)")
    return int(value * units[unit])
