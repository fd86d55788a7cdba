"""Pure-Python packages for tests, written by hand: wheels, and sdists whose PEP 517 build
backend needs nothing installed (so a test controls exactly what a build runs, hostile
builds included). (tests/ is on sys.path through its conftest.py: ``from pep517 import ...``.)

One wheel writer, :func:`write_wheel`, serves both sides: tests call it to put a wheel on
disk, and :func:`backend_source` copies its source into each backend it writes, so the
wheel a build makes is the same as the one a test writes.
"""

from __future__ import annotations

import inspect
import io
import tarfile
from pathlib import Path


def write_wheel(directory, dist, version, module_text):  # type: ignore[no-untyped-def]
    """Write ``<module>-<version>-py3-none-any.whl`` into ``directory``: the module
    ``<module>.py`` (``dist`` with ``-`` as ``_``) holding ``module_text``, with its
    METADATA, WHEEL and RECORD; returns the file name. Stdlib only and no annotations:
    build backends run this very source."""
    import base64
    import hashlib
    import pathlib
    import zipfile

    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    name = f"{module}-{version}-py3-none-any.whl"
    files = {
        f"{module}.py": module_text,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(pathlib.Path(directory) / name, "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


def backend_source(
    dist: str, version: str, module_text: str, *, escape: Path | None = None, prelude: str = ""
) -> str:
    """A build backend (``backend.py``) needing nothing installed: ``build_wheel`` writes
    the wheel of ``dist`` ``version`` whose module holds ``module_text``, a Python
    expression evaluated when the build runs (after ``prelude``, module-level source).

    With ``escape`` the build first attacks: it writes the secret it can read from
    ``RB_TEST_SECRET`` to the host path ``escape`` (where it can) and keeps it in ``seen``
    (``"absent"`` without one) for ``module_text`` to record."""
    attack = ""
    if escape is not None:
        attack = (
            '    seen = os.environ.get("RB_TEST_SECRET", "absent")\n'
            "    try:\n"
            f"        pathlib.Path({str(escape)!r}).write_text(seen)\n"
            "    except OSError:\n"
            "        pass\n"
        )
    return (
        f"import os, pathlib\n{prelude}\n\n{inspect.getsource(write_wheel)}\n\n"
        "def get_requires_for_build_wheel(config_settings=None):\n"
        "    return []\n\n\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        f"{attack}"
        f"    return write_wheel(wheel_directory, {dist!r}, {version!r}, {module_text})\n"
    )


def pyproject(dist: str) -> str:
    """A ``pyproject.toml`` whose build backend is its own ``backend.py``; the version is
    dynamic, so even resolving the package needs its backend."""
    return (
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        f'[project]\nname = "{dist}"\ndynamic = ["version"]\n'
    )


def write_sdist(directory: Path, dist: str, version: str, backend: str) -> Path:
    """``<module>-<version>.tar.gz`` in ``directory``: :func:`pyproject`, ``backend`` and
    PKG-INFO under ``<module>-<version>/``."""
    top = f"{dist.replace('-', '_')}-{version}"
    members = {
        f"{top}/pyproject.toml": pyproject(dist),
        f"{top}/backend.py": backend,
        f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
    }
    path = directory / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
