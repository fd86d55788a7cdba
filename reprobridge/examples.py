"""The bundled example paper repositories (shipped in the wheel as reprobridge/_examples)."""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from reprobridge import _proc
from reprobridge.errors import MachineError

DEFAULT_EXAMPLE = "mixup-paper"


def examples_dir() -> Path:
    """Where the examples are: inside the installed wheel, else the source checkout."""
    packaged = Path(str(files("reprobridge").joinpath("_examples")))
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[1] / "examples"
    if checkout.is_dir():
        return checkout
    raise MachineError("the bundled examples are missing from this installation")


def copy_example(dest: Path, name: str = DEFAULT_EXAMPLE) -> Path:
    """Copy example ``name`` to ``dest`` (must not exist) and commit it in a new git repo."""
    src = examples_dir() / name
    if not src.is_dir():
        known = sorted(p.name for p in examples_dir().iterdir() if p.is_dir())
        raise MachineError(f"no example named {name!r} (known: {', '.join(known)})")
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "results", "*.pyc"))
    ident = ["-c", "user.name=rb demo", "-c", "user.email=demo@reprobridge.invalid"]
    _proc.git(dest, "init", "-q", "-b", "main")
    _proc.git(dest, *ident, "add", "-A")
    _proc.git(dest, *ident, "commit", "-q", "-m", f"{name}: as published")
    return dest
