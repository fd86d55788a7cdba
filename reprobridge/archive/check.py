"""`rb archive --check FILE`: what an archive lacks to reproduce with the network unplugged.

Contract of :func:`check_offline`: one streaming pass (:func:`~reprobridge.archive.verify.
verify_archive`: nothing is written), then one :class:`Item` per need, each ``ok``,
``lacks`` (with what is missing, named) or ``n/a``:

* ``archive``: the archive verifies (hashes, members, manifest);
* ``source``: the repository's files (``--with-source``);
* ``wheels``: every wheel ``repro/python/uv.lock`` pins for the recorded target platforms
  (else this machine) is in ``wheels/`` with the lock's sha256; recomputed from the lock,
  not taken from the archive's own claim;
* ``sdists``: packages with no wheel for the target (installing them means a build);
* ``data``: each declared dataset is carried at its path (else ``repro/DATA.md`` says
  where to get it, and it lacks);
* ``closure``: ``nix-cache/`` for the Nix backend (``--with-closure``); only the Nix
  backend needs it, so it does not count against the host backend.

``host_complete``: nothing the host backend needs lacks; ``nix_complete``: nor the closure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reprobridge.archive import wheels
from reprobridge.archive.supplement import LOCK_REL
from reprobridge.archive.verify import verify_archive
from reprobridge.constants import WHEELS_DIR
from reprobridge.errors import ArchiveError, ManifestError
from reprobridge.manifest.io import parse_document, validate_document

Status = Literal["ok", "lacks", "n/a"]


@dataclass(frozen=True)
class Item:
    what: str
    status: Status
    detail: str
    nix_only: bool = False


@dataclass
class OfflineReport:
    path: Path
    items: list[Item] = field(default_factory=list)

    @property
    def host_complete(self) -> bool:
        return not any(i.status == "lacks" and not i.nix_only for i in self.items)

    @property
    def nix_complete(self) -> bool:
        return not any(i.status == "lacks" for i in self.items)

    @property
    def complete(self) -> bool:
        return self.host_complete

    def as_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "host_complete": self.host_complete,
            "nix_complete": self.nix_complete,
            "items": [
                {"what": i.what, "status": i.status, "detail": i.detail, "nix_only": i.nix_only}
                for i in self.items
            ],
        }


def check_offline(path: Path) -> OfflineReport:
    """See the module doc."""
    rep = OfflineReport(Path(path))
    ver = verify_archive(path)
    add = rep.items.append
    if not ver.ok:
        add(Item("archive", "lacks", "; ".join(ver.problems[:3])))
        return rep
    add(Item("archive", "ok", f"verifies ({len(ver.files)} files)"))
    doc = ver.manifest or {}
    add(
        Item("source", "ok", "the repository's files at the audited commit")
        if doc.get("with_source")
        else Item("source", "lacks", "no source: pack with --with-source (or --supplement)")
    )
    manifest = _manifest(ver.kept.get("reprobridge.toml"))
    _check_wheels(rep, ver.files, ver.kept.get(LOCK_REL), manifest, doc)
    _check_data(rep, ver.files, manifest)
    if "nix-cache/nix-cache-info" in ver.files:
        signed = "nix-cache/rb-signing-key.pub" in ver.files
        add(
            Item(
                "closure",
                "ok",
                "nix-cache/ holds the devShell closure"
                + (", signed (rb unpack prints the key)" if signed else ", unsigned"),
                nix_only=True,
            )
        )
    else:
        add(
            Item(
                "closure",
                "lacks",
                "no nix-cache/: the Nix backend would download; pack with --with-closure",
                nix_only=True,
            )
        )
    return rep


def _manifest(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
        return validate_document(
            parse_document(text, path="reprobridge.toml"), path="reprobridge.toml"
        )
    except (UnicodeDecodeError, ManifestError):
        return None


def _check_wheels(
    rep: OfflineReport,
    files: dict[str, tuple[str, int]],
    lock: bytes | None,
    manifest: Any,
    doc: dict[str, Any],
) -> None:
    add = rep.items.append
    if manifest is None or not manifest.environment.python_requirements:
        add(Item("wheels", "n/a", "the manifest lists no Python package"))
        return
    if lock is None:
        add(Item("wheels", "lacks", f"no {LOCK_REL}: nothing pins what to install"))
        return
    recorded = ((doc.get("offline") or {}).get("wheels") or {}).get("platforms") or []
    try:
        python = wheels.parse_python(manifest.environment.python)
        machines = (
            [wheels.Machine(python, wheels.expand_platform(str(p))) for p in recorded]
            if recorded
            else [wheels.this_machine(python)]
        )
        plan = wheels.plan_wheels(lock, machines)
    except ArchiveError as exc:
        add(Item("wheels", "lacks", exc.message))
        return
    absent = [
        d.filename
        for d in plan.wheels
        if files.get(f"{WHEELS_DIR}/{d.filename}", ("", 0))[0] != d.sha256
    ]
    targets = ", ".join(m.platforms[0] for m in machines)
    add(
        Item("wheels", "lacks", f"not in wheels/ (with the lock's sha256): {', '.join(absent)}")
        if absent
        else Item(
            "wheels",
            "ok",
            f"{len(plan.wheels)} wheel(s) for Python {python[0]}.{python[1]} on {targets}",
        )
    )
    unbuildable = [f"{s} (sdist only: would need a build)" for s in plan.sdists] + plan.missing
    add(
        Item("sdists", "lacks", "; ".join(unbuildable))
        if unbuildable
        else Item("sdists", "ok", "every package has a wheel")
    )


def _check_data(rep: OfflineReport, files: dict[str, tuple[str, int]], manifest: Any) -> None:
    add = rep.items.append
    if manifest is None or not manifest.datasets:
        add(Item("data", "n/a", "the manifest declares no dataset"))
        return
    lacking = []
    for ds_id, ds in sorted(manifest.datasets.items()):
        if ds.generated:
            continue
        here = ds.path and (ds.path in files or any(f.startswith(ds.path + "/") for f in files))
        if not here:
            lacking.append(ds_id)
    note = " (repro/DATA.md says where to get them)" if "repro/DATA.md" in files else ""
    add(
        Item("data", "lacks", f"not carried: {', '.join(lacking)}{note}")
        if lacking
        else Item("data", "ok", "every dataset is carried or generated by the code")
    )
