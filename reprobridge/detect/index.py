"""One pass over a repository that every detector reads.

The index lists files once (``git ls-files``: tracked plus untracked-but-not-ignored), keeps
each file's size and kind, and reads Python sources once, cheaply: substring tests record a
few *markers* (``__main__``, ``cpp_extension``) and a literal search for ``import`` the
top-level imports of each file -- no regex runs over every byte (that alone costs ~20x
reading them). Detectors then parse (``ast``) only the few files that matter (see
:mod:`~reprobridge.detect._select`). Memory is the file list plus those small per-file sets;
texts and ASTs are cached in LRUs bounded by source size, not entry count.

Safety: symlinks are resolved against the repository root and never followed out of it;
files above :data:`MAX_TEXT_BYTES` or with NUL bytes are not read as text. ReproBridge's own
outputs (the manifest, flake, guide, ``repro/``) are excluded, so re-running ``rb init``
never recovers knowledge from what it wrote itself.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import stat
import sys
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from reprobridge import _proc
from reprobridge.constants import FLAKE_FILE, FLAKE_LOCK_FILE, GUIDE_FILE, MANIFEST_FILE, REPRO_DIR
from reprobridge.errors import (
    CommandFailed,
    DetectionError,
    EmptyRepositoryError,
    NotAGitRepositoryError,
    UnsafePathError,
)
from reprobridge.manifest.schema import DERIVED_SUFFIXES

#: Largest file read as text. A declared source (requirements.txt, ...) above it is an error.
MAX_TEXT_BYTES = 5 * 1024 * 1024
#: Python files above this are not scanned for markers (generated code, vendored blobs).
MAX_SCAN_BYTES = 2 * 1024 * 1024

_OWN_OUTPUTS = frozenset({MANIFEST_FILE, FLAKE_FILE, FLAKE_LOCK_FILE, GUIDE_FILE})

#: Words the one pass records per Python file. Each is a C-level substring test (about the
#: cost of reading the bytes once); a regex over every byte costs ~20x that, which is why
#: this list is short and detectors test anything else only in the few files they select.
MARKERS: tuple[str, ...] = ("__main__", "cpp_extension")
#: Source bytes of the ASTs the index keeps (an AST is ~40x its source in memory).
AST_CACHE_BYTES = 4 * 1024 * 1024
#: Characters of the texts the index keeps. 4 M, not 16 M: on a 20k-file repository the
#: larger cache only held texts no detector read again (13 MB more peak, no time saved).
TEXT_CACHE_CHARS = 4 * 1024 * 1024

# ``import`` is searched as a literal (fast), then its line is checked in Python: a plain
# ``import a, b`` statement, or ``from x import``. Same matches as a ``^[ \t]*(from|import)``
# multiline regex at a fraction of its cost (that regex tries every byte position).
_IMPORT_KW_RE = re.compile(rb"import\b")
_IMPORT_NAMES_RE = re.compile(rb"[ \t]+([\w., \t]+)")
_FROM_HEAD_RE = re.compile(rb"[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+")


@dataclass(frozen=True)
class FileEntry:
    """One file of the repository (path relative to the root, POSIX separators)."""

    path: str
    size: int
    symlink_escapes: bool = False
    #: ``.py`` for ``a/b.PY``; "" without one. Computed once: detectors ask every file for
    #: it, some once per entry point (millions of calls on a 20k-file repository).
    suffix: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = self.path.rpartition("/")[2]
        dot = name.rfind(".")
        suffix = sys.intern(name[dot:].lower()) if 0 < dot < len(name) - 1 else ""
        object.__setattr__(self, "suffix", suffix)

    # A string operation, not PurePosixPath: detectors ask every file for it.
    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


@dataclass(frozen=True)
class PyScan:
    """What the cheap pass learned of one Python file."""

    markers: frozenset[str]
    imports: frozenset[str]  # top-level module names; relative imports as "."


class RepoIndex:
    """The file list of one repository and cheap, bounded, safe access to its contents."""

    def __init__(self, root: Path, files: Iterable[FileEntry]) -> None:
        self.root = root
        self.files: tuple[FileEntry, ...] = tuple(sorted(files, key=lambda f: f.path))
        self._by_path = {f.path: f for f in self.files}
        self._root_str = str(root)
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._text_chars = 0
        self._asts: OrderedDict[str, tuple[ast.Module | None, int]] = OrderedDict()
        self._ast_bytes = 0
        self._py: dict[str, PyScan] | None = None
        self._py_paths: frozenset[str] | None = None
        self._dirs: frozenset[str] | None = None
        self._lazy_markers: dict[str, frozenset[str]] = {}
        #: What detectors derive from the index and share (keyed by a name of their own).
        self.memo: dict[str, object] = {}
        #: ``ast.parse`` calls made by :meth:`parse_python` (tests bound it; cache hits excluded).
        self.parse_count = 0
        #: (commit id, committer time in Unix seconds) of HEAD; None without git or commits.
        self.head: tuple[str, int] | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_git(cls, path: Path) -> RepoIndex:
        """Index the git work tree containing ``path``.

        Raises NotAGitRepositoryError, EmptyRepositoryError.
        """
        path = Path(path)
        if not path.is_dir():
            raise NotAGitRepositoryError("is not a directory", path=str(path))
        try:
            top = _proc.git(path, "rev-parse", "--show-toplevel").text.strip()
        except CommandFailed as exc:
            raise NotAGitRepositoryError(
                "is not a git repository",
                path=str(path),
                hint="run `git init && git add -A` first: rb records the commit it recovered from",
            ) from exc
        root = Path(top).resolve()
        out = _proc.git(
            root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", timeout=300
        ).stdout
        names = sorted({n.decode("utf-8", "surrogateescape") for n in out.split(b"\0") if n})
        entries = list(_stat_entries(root, names))
        if not entries:
            raise EmptyRepositoryError(
                "has no files to recover from (nothing tracked or untracked)", path=str(root)
            )
        index = cls(root, entries)
        index.head = _head_commit(root)
        return index

    @classmethod
    def from_directory(cls, root: Path) -> RepoIndex:
        """Index a plain directory (tests, archives); same rules, no git."""
        root = Path(root).resolve()
        names: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in {".git", "__pycache__", ".venv"})
            rel = Path(dirpath).relative_to(root)
            names += [(rel / f).as_posix() for f in sorted(filenames)]
        return cls(root, _stat_entries(root, names))

    # -- listing ------------------------------------------------------------------------
    def __contains__(self, path: str) -> bool:
        return path in self._by_path

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def get(self, path: str) -> FileEntry | None:
        return self._by_path.get(path)

    def glob(self, *patterns: str) -> list[str]:
        """Paths matching any fnmatch pattern (``*`` crosses ``/``), in sorted order."""
        return [f.path for f in self.files if any(fnmatch.fnmatchcase(f.path, p) for p in patterns)]

    def named(self, *names: str) -> list[str]:
        """Paths whose base name is one of ``names`` (case-sensitive), sorted."""
        wanted = set(names)
        return [f.path for f in self.files if f.name in wanted]

    def with_suffix(self, *suffixes: str) -> list[str]:
        wanted = {s.lower() for s in suffixes}
        return [f.path for f in self.files if f.suffix in wanted]

    def python_files(self) -> list[str]:
        return self.with_suffix(".py")

    def python_paths(self) -> frozenset[str]:
        """The set of Python file paths, computed once (for membership tests)."""
        if self._py_paths is None:
            self._py_paths = frozenset(f.path for f in self.files if f.suffix == ".py")
        return self._py_paths

    def dirs(self) -> frozenset[str]:
        """Every folder that holds an indexed file at any depth (``"."`` for the root),
        computed once (for membership tests)."""
        if self._dirs is None:
            dirs = {"."}
            for f in self.files:
                folder = f.path.rpartition("/")[0]
                while folder and folder not in dirs:
                    dirs.add(folder)
                    folder = folder.rpartition("/")[0]
            self._dirs = frozenset(dirs)
        return self._dirs

    # -- reading ------------------------------------------------------------------------
    def read_bytes(self, path: str, *, limit: int = MAX_TEXT_BYTES) -> bytes:
        """Raw bytes of ``path``. Raises DetectionError/UnsafePathError naming the file."""
        entry = self._by_path.get(path)
        if entry is None:
            raise DetectionError("not in the repository index", path=path)
        if entry.symlink_escapes:
            raise UnsafePathError("is a symlink that points outside the repository", path=path)
        if entry.size > limit:
            raise DetectionError(
                f"is {entry.size / 1e6:.1f} MB, above the {limit / 1e6:.0f} MB limit for a file rb reads",
                path=path,
            )
        try:
            with open(f"{self._root_str}/{path}", "rb") as fh:
                data = _read_sized(fh, entry.size, limit + 1)
        except OSError as exc:
            raise DetectionError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
        if len(data) > limit:
            raise DetectionError(f"grew above the {limit / 1e6:.0f} MB limit while read", path=path)
        return data

    def read_text(self, path: str, *, limit: int = MAX_TEXT_BYTES) -> str:
        """``path`` as text (UTF-8, BOM stripped, undecodable bytes replaced).

        Raises DetectionError for binary files (NUL bytes), files above ``limit``, files that
        cannot be read, and UnsafePathError for symlinks out of the repository.
        """
        cached = self._texts.get(path)
        if cached is not None:
            self._texts.move_to_end(path)
            return cached
        data = self.read_bytes(path, limit=limit)
        if b"\0" in data[:8192]:
            raise DetectionError("is a binary file, not text", path=path)
        text = data.decode("utf-8-sig", "replace")
        if len(text) <= TEXT_CACHE_CHARS // 4:
            self._texts[path] = text
            self._text_chars += len(text)
            while self._text_chars > TEXT_CACHE_CHARS:
                _, old = self._texts.popitem(last=False)
                self._text_chars -= len(old)
        return text

    def try_read_text(self, path: str, *, limit: int = MAX_TEXT_BYTES) -> str | None:
        """Like :meth:`read_text` but None for a file that cannot be used as text."""
        try:
            return self.read_text(path, limit=limit)
        except (DetectionError, UnsafePathError):
            return None

    def parse_python(self, path: str) -> ast.Module | None:
        """The AST of a Python file, or None when it cannot be read or parsed.

        Cached in an LRU bounded by the *source bytes* of the trees it holds
        (:data:`AST_CACHE_BYTES`; a tree is ~40x its source): several detectors parse the
        same entry points, and one 300 KB module must not pin hundreds of MB. Callers must
        not mutate the tree.
        """
        cached = self._asts.get(path)
        if cached is not None:
            self._asts.move_to_end(path)
            return cached[0]
        text = self.try_read_text(path)
        tree: ast.Module | None = None
        if text is not None:
            self.parse_count += 1
            try:
                tree = ast.parse(text, filename=path)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
        size = len(text) if text is not None else 0
        if size <= AST_CACHE_BYTES // 2:
            self._asts[path] = (tree, size)
            self._ast_bytes += size
            while self._ast_bytes > AST_CACHE_BYTES:
                _, (_, old) = self._asts.popitem(last=False)
                self._ast_bytes -= old
        return tree

    # -- the cheap pass over Python files ------------------------------------------------
    def py_scan(self) -> dict[str, PyScan]:
        """Markers and imports of every Python file, computed once (one read per file).

        Cheap by construction: a substring test per :data:`MARKERS` word and a literal
        search for ``import``; nothing here runs a regex over every byte.
        """
        if self._py is None:
            self._py = {}
            for path, data in self._py_bytes():
                imports = scan_imports(data)
                markers = ["__main__"] if b"__main__" in data else []
                # cpp_extension lives in torch: only files that import torch can use it.
                if "torch" in imports and b"cpp_extension" in data:
                    markers.append("cpp_extension")
                self._py[path] = PyScan(
                    _MARKER_SETS.setdefault(tuple(markers), frozenset(markers)), imports
                )
        return self._py

    def _py_bytes(self) -> Iterator[tuple[str, bytes]]:
        """(path, bytes) of every scannable Python file, one file in memory at a time."""
        return self.py_bytes(e.path for e in self.files if e.suffix == ".py")

    def py_bytes(self, paths: Iterable[str]) -> Iterator[tuple[str, bytes]]:
        """(path, bytes) of those ``paths`` that are scannable Python files, in the given
        order, one in memory at a time (not cached: a second read is cheaper than a copy
        of the repository in memory)."""
        for path in paths:
            entry = self._by_path.get(path)
            if (
                entry is None
                or entry.suffix != ".py"
                or entry.symlink_escapes
                or entry.size > MAX_SCAN_BYTES
            ):
                continue
            try:
                with open(f"{self._root_str}/{path}", "rb") as fh:  # cheaper than Path /
                    yield entry.path, _read_sized(fh, entry.size, MAX_SCAN_BYTES)
            except OSError:
                continue

    def python_files_with(self, *markers: str) -> list[str]:
        """Python files containing any of ``markers`` (substrings), sorted.

        :data:`MARKERS` come from the one pass. Any other word costs one more read of every
        Python file (cached per word): prefer testing it only in files you already selected
        (:meth:`py_bytes`).
        """
        scan = self.py_scan()
        indexed = set(markers) & set(MARKERS)
        other = [m for m in markers if m not in indexed and m not in self._lazy_markers]
        if other:
            hits: dict[str, list[str]] = {m: [] for m in other}
            for path, data in self._py_bytes():
                for m in other:
                    if m.encode() in data:
                        hits[m].append(path)
            for m in other:
                self._lazy_markers[m] = frozenset(hits[m])
        found = {p for p, s in scan.items() if s.markers.intersection(indexed)}
        for m in markers:
            if m not in indexed:
                found |= self._lazy_markers[m]
        return sorted(found)

    def imported_modules(self, path: str) -> list[tuple[str, tuple[str, ...]]]:
        """``(module, names)`` of every import statement in ``path`` (cheap, textual).

        ``module`` keeps its leading dots for relative imports; ``names`` are what a
        ``from module import a, b`` imports (empty for ``import module``).
        """
        out: list[tuple[str, tuple[str, ...]]] = []
        for _, data in self.py_bytes([path]):
            for frm, names in import_statements(data):
                if frm is None:
                    out += [(n, ()) for n in names]
                else:
                    out.append((frm, tuple(names)))
        return out


_MARKER_SETS: dict[tuple[str, ...], frozenset[str]] = {}


def _read_sized(fh: BinaryIO, size: int, limit: int) -> bytes:
    """At most ``limit`` bytes of ``fh``, whose size the listing saw as ``size``.

    ``read(limit)`` would allocate ``limit`` bytes per call (2 MB for a 2 KB file): read
    the expected size (plus one byte, to see growth) and only then the rest.
    """
    data = fh.read(min(size + 1, limit))
    if len(data) > size and len(data) < limit:
        data += fh.read(limit - len(data))
    return data


def import_statements(data: bytes) -> Iterator[tuple[str | None, list[str]]]:
    """(``from`` module or None, imported names) of each import line of ``data``."""
    for match in _IMPORT_KW_RE.finditer(data):
        start = match.start()
        line_start = data.rfind(b"\n", 0, start) + 1
        head = data[line_start:start]
        names_match = _IMPORT_NAMES_RE.match(data, match.end())
        if not head.strip(b" \t"):
            if names_match is None:
                continue
            frm = None
        else:
            from_match = _FROM_HEAD_RE.fullmatch(head)
            if from_match is None:
                continue
            frm = from_match.group(1).decode("ascii", "replace")
        names: list[str] = []
        if names_match is not None:
            for part in names_match.group(1).decode("ascii", "replace").split(","):
                word = part.strip().split(" ")[0]
                if word:
                    names.append(word)
        yield frm, names


def scan_imports(data: bytes) -> frozenset[str]:
    """Top-level names imported by the Python source ``data`` (``"."`` for relative ones)."""
    names: set[str] = set()
    for frm, imported in import_statements(data):
        if frm is not None:
            if frm:
                names.add("." if frm.startswith(".") else frm.split(".")[0])
        else:
            for word in imported:
                top = word.split(".")[0]
                if top.isidentifier():
                    names.add(top)
    return frozenset(names)


def _head_commit(root: Path) -> tuple[str, int] | None:
    """(id, committer time) of the last commit that changed something other than rb's own
    outputs, through the hardened git helper (``git log`` runs no hooks; the repository's
    config is neutralised); None for a repository without such a commit.

    rb's outputs are left out so that committing `rb init`'s result neither moves the date
    bound derived from it nor makes `rb check` report the manifest stale.
    """
    own = sorted({*_OWN_OUTPUTS, REPRO_DIR})
    return last_commit(root, [".", *(f":(exclude,top){name}" for name in own)])


def last_commit(root: Path, pathspecs: Iterable[str]) -> tuple[str, int] | None:
    """(id, committer time) of the last commit of HEAD that changed a path ``pathspecs``
    match (git's pathspec syntax: the caller quotes literal paths with ``:(literal)``),
    through the hardened git helper; None when there is none or git fails."""
    got = _proc.git(
        root, "log", "-1", "--format=%H %ct", "HEAD", "--", *pathspecs, check=False, timeout=60
    )
    parts = got.text.split() if got.returncode == 0 else []
    if len(parts) == 2 and parts[1].isdigit():
        return parts[0], int(parts[1])
    return None


def _run_output(name: str) -> bool:
    """Whether ``name`` is a file rb's launchers write beside the repository's own when a
    tier runs: a tier's copy (``demo_rb_smoke.ipynb``, ``demo_rb_full.ipynb``, see
    :func:`~reprobridge.manifest.schema.derived_copy`) or an executed notebook
    (``demo.executed.ipynb``). Left in a checkout run by hand, it is no source of the
    repository; indexed, the next `rb init` made it an experiment of its own."""
    base = name.rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0]
    return stem.endswith(tuple(DERIVED_SUFFIXES.values())) or base.endswith(".executed.ipynb")


def _stat_entries(root: Path, names: Iterable[str]) -> Iterator[FileEntry]:
    for name in names:
        if (
            name in _OWN_OUTPUTS
            or name == REPRO_DIR
            or name.startswith(REPRO_DIR + "/")
            or _run_output(name)
        ):
            continue
        full = root / name
        try:
            st = full.lstat()
        except OSError:
            continue  # listed by git but deleted from the work tree
        if stat.S_ISLNK(st.st_mode):
            try:
                target = full.resolve(strict=True)
            except (OSError, RuntimeError):
                yield FileEntry(name, 0, symlink_escapes=True)  # dangling or looping
                continue
            if not target.is_relative_to(root):
                yield FileEntry(name, 0, symlink_escapes=True)
                continue
            if not target.is_file():
                continue
            st = target.stat()
        elif not stat.S_ISREG(st.st_mode):
            continue
        yield FileEntry(name, st.st_size)
