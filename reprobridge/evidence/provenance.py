"""Which evidence bundles are this operator's own.

A directory under ``repro/evidence`` may have arrived with the repository (committed, in
a tarball, on a shared disk): its ``plan.json``, sealed runs and ``audit.json`` are then
whatever the repository's author wrote, and its name (a UTC time) can be any date, so
"the newest bundle" is the author's choice. Such a bundle must never be completed and
signed by ``rb audit --resume``, nor taken as "the latest audit" by ``rb report`` or
``rb archive``.

Contract:

* :func:`register` records, in the operator's state directory
  (:func:`state_home`, outside every repository and sandbox), that
  this operator started the bundle: its absolute path, its audit id and the sha256 of its
  ``plan.json`` (None before the plan is written). The auditor calls it when it creates a
  bundle and again once the plan is written.
* :func:`provenance` says a bundle is *own* only when such a record exists for its path
  and id, the plan's hash still matches, and no file of the bundle is tracked by git
  (a committed bundle came with the repository, whoever wrote it first). Otherwise it is
  *foreign*, with the reason.

The repository cannot write the state directory, so it cannot make its bundle own.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reprobridge._fs import read_regular, write_atomic
from reprobridge.evidence.errors import EvidenceError
from reprobridge.evidence.layout import PLAN_FILE

#: The state directory's subdirectory of bundle records (one small JSON file each).
RECORDS_DIR = "bundles"


def state_home(environ: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/rb`` (an empty or relative value is ignored, as the XDG spec
    says), else ``~/.local/state/rb``: what rb records about the operator's own work, beside
    the user config (:func:`reprobridge.settings.config_home`). Never inside a repository;
    no sandbox binds it."""
    xdg = environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "rb"


@dataclass(frozen=True)
class Provenance:
    """``foreign`` is why the bundle is not this operator's own (None: it is)."""

    foreign: str | None = None

    @property
    def own(self) -> bool:
        return self.foreign is None

    @property
    def label(self) -> str:
        """One phrase for a report or a verify line."""
        return "own (started by this operator)" if self.own else f"foreign: {self.foreign}"


def _record_path(bundle: Path, environ: Mapping[str, str]) -> Path:
    key = f"{bundle.resolve()}\0{bundle.name}".encode()
    return state_home(environ) / RECORDS_DIR / f"{hashlib.sha256(key).hexdigest()}.json"


def _plan_sha256(bundle: Path) -> str | None:
    try:
        return hashlib.sha256(read_regular(bundle / PLAN_FILE)).hexdigest()
    except FileNotFoundError:
        return None


def register(bundle: Path, environ: Mapping[str, str] | None = None) -> None:
    """Record that this operator started ``bundle`` with its current ``plan.json``."""
    env = os.environ if environ is None else environ
    record = {
        "path": str(bundle.resolve()),
        "audit_id": bundle.name,
        "plan_sha256": _plan_sha256(bundle),
    }
    target = _record_path(bundle, env)
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(target, json.dumps(record, sort_keys=True).encode(), mode=0o600)
    except OSError as exc:
        # Without the record the bundle could never be resumed or reported as the latest.
        raise EvidenceError(
            f"cannot record the bundle in rb's state directory ({exc.strerror or exc})",
            path=str(target),
            hint="free space there, or set XDG_STATE_HOME to a writable directory",
        ) from None


def tracked_in_git(bundle: Path) -> bool:
    """Whether git tracks any file under ``bundle`` (False outside a repository)."""
    from reprobridge._proc import git

    got = git(bundle, "ls-files", "-z", "--", ".", check=False)
    return got.returncode == 0 and bool(got.text.strip("\0"))


def provenance(bundle: Path, environ: Mapping[str, str] | None = None) -> Provenance:
    """Whether ``bundle`` is this operator's own (see the module docstring)."""
    env = os.environ if environ is None else environ
    try:
        record = json.loads(read_regular(_record_path(bundle, env)))
        plan = _plan_sha256(bundle)
    except (OSError, ValueError):
        record, plan = None, None
    if not isinstance(record, dict) or record.get("audit_id") != bundle.name:
        return Provenance(
            "not started by this operator (no record of it in the rb state directory)"
        )
    if record.get("path") != str(bundle.resolve()) or record.get("plan_sha256") != plan:
        return Provenance("its plan.json is not the one this operator started it with")
    if tracked_in_git(bundle):
        return Provenance("tracked in git (it came with the repository)")
    return Provenance()
