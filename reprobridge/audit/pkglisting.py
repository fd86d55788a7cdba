"""One Python package listing per environment of an audit, not one per run.

Every run records the distributions its ``python3`` sees (``packages.json``), listed in the
run's sandbox after the run (:func:`reprobridge.audit.fingerprint.python_packages`). That
listing starts an interpreter through ``PATH`` (often a shim) and reads every
distribution's metadata: most of an audit's fixed cost per run. The runs of an audit use
the same environment, so :class:`PackageListings` lists once and gives the next runs the
same listing, with the run's own directory in its paths, while nothing the listing reads
has changed.

What it reads, and so what the key covers (:func:`environment_key`), with every path
under the run's directory written relative to it (each run has its own directory):

* the environment variables (but ``RB_RUN_ID`` and ``RB_RUN_MARKER``, which rb sets per
  run and Python's startup does not read) and the read-only binds;
* each ``PATH`` directory's ``python3`` (which interpreter runs: present, link target,
  size, and for a file in the run's directory its bytes); where that is a script (a
  pyenv-style shim, which picks an interpreter from files such as ``.python-version`` in
  the directories above the current one) also the dot-files of the workspace and the run
  directory;
* every directory the interpreter searched (``sys.path``, the workspace it ran from, the
  user site directory whether or not it exists): its entries (name, kind, and in the
  run's directory size; only the distribution metadata entries for the workspace, whose
  modules the listing does not import), and what names and versions distributions or
  runs at startup (``METADATA``, ``PKG-INFO``, ``*.pth`` and the paths they add,
  ``*.egg-link``, ``sitecustomize``/``usercustomize``): their bytes in the run's
  directory, their size, mtime and inode elsewhere; ``pyvenv.cfg`` beside the
  interpreter.

A run that installs or removes a package, edits metadata, adds a ``.pth`` or a user site,
or changes the interpreter therefore gets a listing of its own. Reuse is only offered for
runs in bubblewrap on this machine: there a run writes nothing outside its own directory,
so what lies outside it is the same for the next run unless the operator changes it (the
key sees that too). Without the sandbox, or on a scheduler's nodes, every run is listed.
A failed listing is never reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from reprobridge._machine import Runner
from reprobridge.audit import fingerprint as fp

#: Set by rb for each run; never read by Python's startup or the listing.
PER_RUN_VARIABLES = frozenset({"RB_RUN_ID", "RB_RUN_MARKER"})
#: Directory entries whose bytes decide what is listed or what runs at startup.
_STARTUP_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
_METADATA_SUFFIXES = (".dist-info", ".egg-info")
#: Names whose entries are keyed by more than their name (see _dir_key).
_KEYED_SUFFIXES = (".pth", ".egg-link", "customize.py")
#: A metadata or startup file larger than this is keyed by size and mtime, not bytes.
_MAX_HASHED_BYTES = 4 * 1024 * 1024


class Lister(Protocol):
    """Lists ``python``'s packages in ``env`` (:func:`~reprobridge.audit.fingerprint.python_packages`)."""

    def __call__(
        self, python: str, env: Mapping[str, str], *, run: Runner, search: bool
    ) -> dict[str, Any]: ...


#: What a file, directory or entry is, as part of an environment key (compared, never read).
_Key = tuple[object, ...]


class _Paths:
    """Paths under one run's directory, written relative to it (``<run>/...``)."""

    def __init__(self, run_dir: Path) -> None:
        self.prefixes = tuple(dict.fromkeys((str(run_dir), os.path.realpath(run_dir))))
        # The directory itself or a path below it, also inside PATH-like lists.
        self._re = re.compile(
            "|".join(re.escape(p) for p in sorted(self.prefixes, key=len, reverse=True))
            + r"(?=[/:]|$)"
        )

    def norm(self, text: str) -> str:
        return self.move(text, "<run>")

    def move(self, text: str, new_dir: str) -> str:
        return self._re.sub(lambda _: new_dir, text)

    def inside(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.prefixes)


def _file_key(path: str | Path, paths: _Paths) -> _Key:
    """What a file is: absent, a link (its target), or a regular file: in the run's
    directory (a fresh copy for each run) its size and bytes (mtime when too large to
    read), elsewhere its size, mtime and inode. Plain ``os`` calls on strings: this runs
    for every distribution of every searched directory, once per run."""
    try:
        st = os.lstat(path)
    except OSError:
        return ("absent",)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = str(Path(os.readlink(path)))  # noqa: PTH115 -- str or Path given
        except OSError:
            return ("link?",)
        return ("link", paths.norm(target), _file_key(os.path.realpath(path), paths))
    if stat.S_ISDIR(st.st_mode):
        return ("dir",)
    if not paths.inside(os.fspath(path)):
        # Outside the run's directory nothing a sandboxed run does can change it: the
        # inode and mtime say whether anyone else did, without reading it.
        return ("file", st.st_size, st.st_mtime_ns, st.st_ino)
    if st.st_size <= _MAX_HASHED_BYTES:
        try:
            with open(path, "rb") as fh:
                return ("file", st.st_size, hashlib.sha256(fh.read()).hexdigest())
        except OSError:
            return ("unreadable", st.st_size)
    return ("file", st.st_size, "large", st.st_mtime_ns)


def _pth_key(path: Path, paths: _Paths) -> _Key:
    """A ``.pth`` file: its bytes, and whether each directory it names exists (site adds
    only those that do, so one appearing later changes ``sys.path``)."""
    named: list[tuple[str, bool]] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "import ", "import\t")):
            continue
        target = path.parent / line
        named.append((paths.norm(str(target)), target.exists()))
    return (_file_key(path, paths), tuple(named))


def _dir_key(path: Path, paths: _Paths, *, metadata_only: bool) -> _Key:
    """A searched directory's entries, and the bytes of those that matter (module doc)."""
    here = str(path)
    if not os.path.isdir(here):  # noqa: PTH112 -- strings: see _file_key
        return _file_key(here, paths)  # absent, or a zip on sys.path
    rows: list[_Key] = []
    inside = paths.inside(here)
    try:
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return ("unreadable",)
    for entry in entries:
        name = entry.name
        is_metadata = name.endswith(_METADATA_SUFFIXES)
        if metadata_only and not is_metadata:
            continue
        try:
            is_dir = entry.is_dir()
            # Sizes only in the run's directory: outside it (the interpreter's own
            # directories, hundreds of entries) the names and metadata stats suffice.
            size = 0 if is_dir or not inside else entry.stat().st_size
        except OSError:
            rows.append((name, "?"))
            continue
        row: _Key = (name, "d" if is_dir else "f", size)
        if is_metadata and is_dir:
            # What importlib.metadata reads a distribution's name and version from.
            meta = "METADATA" if name.endswith(".dist-info") else "PKG-INFO"
            row += (_file_key(os.path.join(entry.path, meta), paths),)  # noqa: PTH118
        elif is_metadata or name in _STARTUP_FILES or name.endswith(".egg-link"):
            row += (_file_key(entry.path, paths),)
        elif name.endswith(".pth"):
            row += (_pth_key(Path(entry.path), paths),)
        rows.append(row)
    return ("dir", tuple(rows))


def _dotfiles(directory: Path, paths: _Paths) -> _Key:
    try:
        found = sorted(p for p in directory.iterdir() if p.name.startswith("."))
    except OSError:
        return ("unreadable",)
    return tuple((p.name, _file_key(p, paths)) for p in found if not p.is_dir())


def environment_key(
    python: str,
    env: Mapping[str, str],
    search: Mapping[str, Any],
    *,
    run_dir: Path,
    workspace: Path,
    ro_binds: Iterable[Path],
) -> str:
    """A digest of everything the listing of ``python`` in ``env`` reads (module doc).

    ``search`` is what a listing reported (``fingerprint.python_packages(search=True)``),
    its paths already moved into this run's directory. Two runs get the same key when
    what they would list is the same, paths relative to their own directories.
    """
    paths = _Paths(run_dir)
    parts: list[object] = [
        ("python", python),
        (
            "env",
            sorted((k, paths.norm(v)) for k, v in env.items() if k not in PER_RUN_VARIABLES),
        ),
        ("binds", sorted(paths.norm(str(p)) for p in ro_binds)),
    ]
    found: list[object] = []
    script = False
    for directory in env.get("PATH", "").split(os.pathsep):
        if not directory:
            continue
        candidate = Path(directory) / python
        key = _file_key(candidate, paths)
        found.append((paths.norm(str(candidate)), key))
        if key[0] == "absent":
            continue
        real = candidate.resolve()
        if not script:
            try:
                with real.open("rb") as fh:
                    script = fh.read(2) == b"#!"
            except OSError:
                pass
        for cfg in (candidate.parent / "pyvenv.cfg", candidate.parent.parent / "pyvenv.cfg"):
            found.append((paths.norm(str(cfg)), _file_key(cfg, paths)))
    parts.append(("interpreters", found))
    if script:
        parts.append(("dotfiles", _dotfiles(workspace, paths), _dotfiles(run_dir, paths)))
    cwd = str(search.get("cwd") or "")
    searched = [str(p) for p in search.get("path") or []]
    parts.append(
        (
            "searched",
            [(paths.norm(p), _dir_key(Path(p), paths, metadata_only=p == cwd)) for p in searched],
        )
    )
    user_site = search.get("user_site")
    if isinstance(user_site, str):
        parts.append(
            (
                "user_site",
                paths.norm(user_site),
                _dir_key(Path(user_site), paths, metadata_only=False),
            )
        )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _moved(value: object, old: _Paths, new_dir: str) -> object:
    """``value`` with the old run directory's paths moved into ``new_dir``."""
    if isinstance(value, str):
        return old.move(value, new_dir)
    if isinstance(value, list):
        return [_moved(v, old, new_dir) for v in value]
    if isinstance(value, dict):
        return _moved_dict(value, old, new_dir)
    return value


def _moved_dict(value: dict[str, Any], old: _Paths, new_dir: str) -> dict[str, Any]:
    """:func:`_moved` for a JSON object (a listing, or where it searched)."""
    return {k: _moved(v, old, new_dir) for k, v in value.items()}


@dataclass(frozen=True)
class _Listed:
    key: str
    listing: dict[str, Any]
    search: dict[str, Any]
    run_dir: Path


class PackageListings:
    """The package listings of one audit's runs (module doc). ``reuse``: whether runs may
    share a listing (only in bubblewrap on this machine). ``lister`` is
    :func:`~reprobridge.audit.fingerprint.python_packages` (injectable for tests)."""

    def __init__(self, *, reuse: bool, lister: Lister | None = None) -> None:
        self.reuse = reuse
        self.lister = lister if lister is not None else fp.python_packages
        self._last: _Listed | None = None
        #: How many listings were run and how many reused (tests, benchmarks).
        self.listed = 0
        self.reused = 0

    def listing(
        self,
        python: str,
        env: Mapping[str, str],
        *,
        run: Runner,
        run_dir: Path,
        workspace: Path,
        ro_binds: Sequence[Path],
    ) -> dict[str, Any]:
        """What ``python`` in ``env`` lists for the run in ``run_dir``: the last run's
        listing, moved into ``run_dir``, when :func:`environment_key` is unchanged; else a
        fresh listing (run with ``run``)."""
        last = self._last
        if self.reuse and last is not None:
            search = _moved_dict(last.search, _Paths(last.run_dir), str(run_dir))
            key = environment_key(
                python, env, search, run_dir=run_dir, workspace=workspace, ro_binds=ro_binds
            )
            if key == last.key:
                self.reused += 1
                return _moved_dict(last.listing, _Paths(last.run_dir), str(run_dir))
        listing = dict(self.lister(python, env, run=run, search=self.reuse))
        self.listed += 1
        search = listing.pop("search", None)
        self._last = None
        if self.reuse and "error" not in listing and isinstance(search, dict):
            key = environment_key(
                python, env, search, run_dir=run_dir, workspace=workspace, ro_binds=ro_binds
            )
            self._last = _Listed(key, listing, search, run_dir)
        return listing
