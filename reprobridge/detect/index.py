"""One pass over a repository that every detector reads.

The index lists files once (``git ls-files``: tracked plus untracked-but-not-ignored), keeps
each file's size and kind, and reads Python sources once, cheaply: a single compiled regex
records which *markers* (``argparse``, ``__main__``, ``cpp_extension``, ...) and which
top-level imports each file has. Detectors then parse (``ast``) only the few files whose
markers say they matter. Memory is the file list plus those small per-file sets; texts and
ASTs are cached in a bounded LRU.

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
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from reprobridge import _proc
from reprobridge.constants import FLAKE_FILE, FLAKE_LOCK_FILE, GUIDE_FILE, MANIFEST_FILE, REPRO_DIR
from reprobridge.errors import (
    CommandFailed,
    DetectionError,
    EmptyRepositoryError,
    NotAGitRepositoryError,
    UnsafePathError,
)

#: Largest file read as text. A declared source (requirements.txt, ...) above it is an error.
MAX_TEXT_BYTES = 5 * 1024 * 1024
#: Python files above this are not scanned for markers (generated code, vendored blobs).
MAX_SCAN_BYTES = 2 * 1024 * 1024

_OWN_OUTPUTS = frozenset({MANIFEST_FILE, FLAKE_FILE, FLAKE_LOCK_FILE, GUIDE_FILE})

#: Words whose presence in a Python file makes some detector want to parse it.
MARKERS: tuple[str, ...] = (
    "__main__",
    "argparse",
    "add_argument",
    "click",
    "typer",
    "hydra",
    "fire",
    "ml_collections",
    "yacs",
    "cpp_extension",
    "seed",
    "while True",
    "itertools.count",
    "json.dump",
    "to_csv",
    "savetxt",
    "torch.save",
    "np.save",
    "savefig",
    "open(",
    "print(",
    "logging",
    "load_dataset",
    "datasets.",
    "http://",
    "https://",
    "cuda",
)
_MARKER_RE = re.compile(
    rb"(?:"
    + b"|".join(re.escape(m.encode()) for m in sorted(MARKERS, key=len, reverse=True))
    + rb")"
)
_IMPORT_RE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import\b|import[ \t]+([\w., \t]+))", re.M
)


@dataclass(frozen=True)
class FileEntry:
    """One file of the repository (path relative to the root, POSIX separators)."""

    path: str
    size: int
    symlink_escapes: bool = False

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.path).suffix.lower()


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
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._asts: OrderedDict[str, ast.Module | None] = OrderedDict()
        self._py: dict[str, PyScan] | None = None

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
        return cls(root, entries)

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

    def top_level_names(self) -> set[str]:
        """First path components (files and directories) at the repository root."""
        return {f.path.split("/", 1)[0] for f in self.files}

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
            with open(self.root / path, "rb") as fh:
                data = fh.read(limit + 1)
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
        self._texts[path] = text
        if len(self._texts) > 64:
            self._texts.popitem(last=False)
        return text

    def try_read_text(self, path: str, *, limit: int = MAX_TEXT_BYTES) -> str | None:
        """Like :meth:`read_text` but None for a file that cannot be used as text."""
        try:
            return self.read_text(path, limit=limit)
        except (DetectionError, UnsafePathError):
            return None

    def parse_python(self, path: str) -> ast.Module | None:
        """The AST of a Python file, or None when it cannot be read or parsed.

        Cached (bounded LRU): several detectors parse the same entry points. Callers must
        not mutate the tree.
        """
        if path in self._asts:
            self._asts.move_to_end(path)
            return self._asts[path]
        text = self.try_read_text(path)
        tree: ast.Module | None = None
        if text is not None:
            try:
                tree = ast.parse(text, filename=path)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
        self._asts[path] = tree
        if len(self._asts) > 128:
            self._asts.popitem(last=False)
        return tree

    # -- the cheap pass over Python files ------------------------------------------------
    def py_scan(self) -> dict[str, PyScan]:
        """Markers and imports of every Python file, computed once (one read per file)."""
        if self._py is None:
            self._py = {}
            for entry in self.files:
                if entry.suffix != ".py" or entry.symlink_escapes or entry.size > MAX_SCAN_BYTES:
                    continue
                try:
                    with open(self.root / entry.path, "rb") as fh:
                        data = fh.read(MAX_SCAN_BYTES)
                except OSError:
                    continue
                markers = frozenset(m.decode() for m in _MARKER_RE.findall(data))
                self._py[entry.path] = PyScan(markers, _scan_imports(data))
        return self._py

    def python_files_with(self, *markers: str) -> list[str]:
        """Python files containing any of ``markers`` (each must be in :data:`MARKERS`)."""
        unknown = set(markers) - set(MARKERS)
        if unknown:
            raise ValueError(f"not an index marker: {sorted(unknown)}")
        return [p for p, s in self.py_scan().items() if s.markers.intersection(markers)]


def _scan_imports(data: bytes) -> frozenset[str]:
    names: set[str] = set()
    for frm, imp in _IMPORT_RE.findall(data):
        if frm:
            mod = frm.decode("ascii", "replace")
            names.add("." if mod.startswith(".") else mod.split(".")[0])
        elif imp:
            for part in imp.decode("ascii", "replace").split(","):
                word = part.strip().split(" ")[0].split(".")[0]
                if word.isidentifier():
                    names.add(word)
    return frozenset(names)


def _stat_entries(root: Path, names: Iterable[str]) -> Iterator[FileEntry]:
    for name in names:
        if name in _OWN_OUTPUTS or name == REPRO_DIR or name.startswith(REPRO_DIR + "/"):
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
