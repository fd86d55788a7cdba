"""`rb audit --offline`: the Python environment from an unpacked supplement's ``wheels/``.

Contract:

* :func:`offline_requirements` decides before anything runs (fail fast): it plans, from
  ``repro/python/uv.lock`` and this machine's platform
  (:func:`reprobridge.archive.wheels.plan_wheels`), every wheel the environment needs and
  checks each is in the wheels directory with the lock's sha256. Anything that would need
  a download or a build (no lock, a package with only an sdist or from git, a wheel that
  is absent or differs) is an :class:`~reprobridge.errors.AuditError` naming it. It
  returns pinned requirement lines, one per wheel, with their sha256;
* :func:`offline_install_argv` is how they are installed: ``uv venv`` and ``uv pip install
  --offline --no-index --find-links WHEELS --no-deps --require-hashes --no-build``, so uv
  reads nothing but that directory (no index, no cache miss filled from the network, no
  build) and installs exactly the planned files.
"""

from __future__ import annotations

from pathlib import Path

from reprobridge.archive import wheels
from reprobridge.constants import PYTHON_DIR
from reprobridge.errors import ArchiveError, AuditError
from reprobridge.evidence.hashing import sha256_file

HINT = (
    "unpack a supplement made with `rb archive --supplement` (or --with-wheels), or audit "
    "without --offline"
)


def offline_requirements(root: Path, wheels_dir: Path, python: str) -> list[str]:
    """Pinned lines (``name==version --hash=sha256:H``) for every wheel needed; see the
    module doc."""
    lock = root / PYTHON_DIR / "uv.lock"
    if not lock.is_file():
        raise AuditError(
            "--offline installs what the lock pins, and there is no lock",
            path=f"{PYTHON_DIR}/uv.lock",
            hint=HINT,
        )
    try:
        version = wheels.parse_python(python)
        plan = wheels.plan_wheels(lock.read_bytes(), [wheels.this_machine(version)])
    except ArchiveError as exc:
        raise AuditError(exc.message, path=f"{PYTHON_DIR}/uv.lock") from exc
    for label in plan.sdists:
        raise AuditError(
            f"--offline: {label} has no wheel for this machine; installing it needs a build "
            "from a download",
            hint=HINT,
        )
    for why in plan.missing:
        raise AuditError(f"--offline: {why}", hint=HINT)
    lines = []
    for d in plan.wheels:
        path = wheels_dir / d.filename
        if not path.is_file():
            raise AuditError(
                f"--offline: {d.name} {d.version} ({d.filename}) is not in "
                f"{wheels_dir.name}/ and would need a download",
                path=str(wheels_dir),
                hint=HINT,
            )
        got = sha256_file(path)[0]
        if got != d.sha256:
            raise AuditError(
                f"--offline: {d.filename} has sha256 {got[:12]}…, the lock pins {d.sha256[:12]}…",
                path=str(path),
                hint="the wheels directory was altered; unpack the archive again",
            )
        lines.append(f"{d.name}=={d.version} --hash=sha256:{d.sha256}")
    return lines


def offline_install_argv(
    uv: list[str], venv: Path, python: str, wheels_dir: Path, requirements: Path
) -> list[list[str]]:
    """The uv commands that make the venv ``venv`` (a directory of the auditor's) with
    the interpreter ``python`` from ``wheels_dir`` only."""
    only_here = ["--offline", "--no-config", "--no-index", "--find-links", str(wheels_dir)]
    return [
        [*uv, "venv", "--quiet", "--offline", "--no-config", "--python", python, str(venv)],
        [
            *uv,
            "pip",
            "install",
            "--quiet",
            *only_here,
            "--no-deps",
            "--require-hashes",
            "--no-build",
            "--python",
            str(venv / "bin" / "python"),
            "-r",
            str(requirements),
        ],
    ]
