"""The agent's workspace: a temporary copy of the repository, and the path rules every
tool applies to it.

Contract (the agent is untrusted; see docs/agent.md):

* every path is relative to the copy; absolute paths, NUL, empty components and ``..`` are
  refused; a path is resolved with ``realpath`` on its nearest existing ancestor and must
  stay inside the copy (``commonpath``, never a string prefix);
* writes additionally refuse ``.git/``, CI configuration (``.github/workflows``,
  ``.gitlab-ci.yml``, ...), ``.envrc`` and rb's own files, walk directories with
  ``O_NOFOLLOW|O_DIRECTORY`` through ``dir_fd``s, refuse a symlinked leaf and replace the
  file atomically, so a symlink swapped in after the check is not followed either;
* a refused path raises :class:`ToolError`, which the loop returns to the model as a tool
  result with ``is_error: true``; it never reaches the user as an exception.
"""

from __future__ import annotations

import difflib
import os
import secrets
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reprobridge import _proc

#: Largest file the write tool accepts (and the search tool reads).
MAX_WRITE_BYTES = 1 << 20
#: Files the copy leaves out (too large to be source; the agent can still list them).
MAX_COPY_BYTES = 64 << 20

#: Write-denied paths: repository metadata, CI that would run with the project's secrets,
#: direnv files that run on `cd`, and rb's own artifacts (changed only through proposals).
_DENY_EXACT = frozenset(
    {
        ".envrc",
        ".gitlab-ci.yml",
        ".travis.yml",
        "azure-pipelines.yml",
        "bitbucket-pipelines.yml",
        ".gitmodules",
        ".gitattributes",
        "reprobridge.toml",
        "flake.nix",
        "flake.lock",
    }
)
_DENY_PREFIX = (
    ".git/",
    ".github/workflows/",
    ".github/actions/",
    ".circleci/",
    ".gitlab/",
    ".buildkite/",
    ".reprobridge/",
    "repro/",
)


class ToolError(Exception):
    """A tool call refused or failed; the message goes back to the model (``is_error``).

    Deliberately outside the ReproBridgeError tree: it is an answer to the model, never an
    error of the rb command.
    """


@dataclass(frozen=True)
class PatchRecord:
    """A change to one file of the repository, as a git-style unified diff, with reasons."""

    path: str
    reason: str
    diff: str


# -- paths ---------------------------------------------------------------------------------


def check_rel(rel: object, *, write: bool) -> str:
    """``rel`` as a clean relative POSIX path, or ToolError saying why it is refused."""
    if not isinstance(rel, str) or not rel:
        raise ToolError("path must be a non-empty string relative to the repository")
    if "\0" in rel:
        raise ToolError("path contains NUL")
    if rel.startswith("/") or Path(rel).is_absolute():
        raise ToolError(f"{rel}: absolute paths are refused; give a path inside the repository")
    if rel in (".", "./"):
        if write:
            raise ToolError("cannot write to the repository root itself")
        return "."
    parts = rel.removeprefix("./").split("/")
    if any(p == "" for p in parts):
        raise ToolError(f"{rel}: empty path component")
    if any(p == ".." for p in parts):
        raise ToolError(f"{rel}: `..` is refused; paths stay inside the repository")
    clean = "/".join(p for p in parts if p != ".")
    # Compared folded: on a case-insensitive file system (macOS, Windows) `.GIT/config` is
    # `.git/config`, and Windows drops trailing dots and spaces (`.git.`). Any component
    # named .git is a repository's metadata (a submodule's `sub/.git/hooks/x` too).
    folded = [p.casefold().rstrip(". ") for p in clean.split("/")]
    if ".git" in folded:
        raise ToolError(f"{rel}: .git/ is off limits (in any directory, in any letter case)")
    key = "/".join(folded)
    if write and (
        key in _DENY_EXACT
        or folded[-1] == ".envrc"
        or any((key + "/").startswith(p) for p in _DENY_PREFIX)
    ):
        raise ToolError(
            f"{rel}: writing here is refused (repository metadata, CI configuration, "
            ".envrc or rb's own files); propose manifest changes with propose_manifest"
        )
    return clean


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, path]) == root


# -- diffs ---------------------------------------------------------------------------------


def _diff_lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a final newline
            out += [line + "\n", "\\ No newline at end of file\n"]
    return out


def unified_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """A git-style diff of ``rel`` from ``old`` to ``new`` (None: absent) for ``git apply``."""
    a = old.decode("utf-8").splitlines(keepends=True) if old is not None else []
    b = new.decode("utf-8").splitlines(keepends=True) if new is not None else []
    head = [f"diff --git a/{rel} b/{rel}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    body = list(
        difflib.unified_diff(
            a,
            b,
            fromfile="/dev/null" if old is None else f"a/{rel}",
            tofile="/dev/null" if new is None else f"b/{rel}",
            n=3,
        )
    )
    if not body:
        return ""
    fixed: list[str] = []
    for line in body:
        if line.startswith(("---", "+++", "@@")):
            fixed.append(line if line.endswith("\n") else line + "\n")
        else:
            fixed += _diff_lines([line])
    return "".join(head + fixed)


# -- the workspace --------------------------------------------------------------------------


@dataclass
class Workspace:
    """A writable temporary copy of the repository (``root``) beside the original.

    The copy holds the files git lists (tracked and untracked-not-ignored), symlinks kept as
    symlinks, no ``.git``. ``touched`` maps each file the write tools changed to the reasons.
    """

    original: Path
    root: Path
    touched: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, original: Path, parent: Path) -> Workspace:
        """Copy ``original`` (a git work tree) to ``parent/repo``."""
        listed = _proc.git(original, "ls-files", "-z", "-co", "--exclude-standard").stdout
        root = parent / "repo"
        root.mkdir()
        ws = cls(original.resolve(), root.resolve())
        for rel in sorted({r for r in listed.decode("utf-8", "replace").split("\0") if r}):
            if rel.split("/")[0] == ".git":
                continue
            src, dst = original / rel, root / rel
            try:
                st = src.lstat()
            except FileNotFoundError:  # deleted in the work tree
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if stat.S_ISLNK(st.st_mode):
                dst.symlink_to(src.readlink())
            elif stat.S_ISREG(st.st_mode):
                if st.st_size > MAX_COPY_BYTES:
                    ws.skipped.append(rel)
                    continue
                shutil.copyfile(src, dst, follow_symlinks=False)
                os.chmod(dst, st.st_mode & 0o755 | 0o600)
        return ws

    def file_list(self) -> list[str]:
        """Every file and symlink of the copy, sorted (relative POSIX paths)."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            for name in [*filenames, *(d for d in dirnames if Path(dirpath, d).is_symlink())]:
                out.append(Path(dirpath, name).relative_to(self.root).as_posix())
        return sorted(out)

    def resolve_read(self, rel: object) -> Path:
        """The real path of ``rel`` for reading; ToolError when it leaves the copy."""
        clean = check_rel(rel, write=False)
        real = os.path.realpath(self.root / clean)
        if not _inside(str(self.root), real):
            raise ToolError(f"{rel}: resolves outside the repository (symlink); refused")
        if not os.path.lexists(self.root / clean):
            raise ToolError(f"{rel}: no such file or directory")
        return Path(real)

    def check_write(self, rel: object) -> str:
        """``rel`` cleaned after the write rules and the realpath check of its nearest
        existing ancestor (a symlinked component anywhere is refused)."""
        clean = check_rel(rel, write=True)
        probe = self.root / clean
        while not os.path.lexists(probe):
            probe = probe.parent
        if not _inside(str(self.root), os.path.realpath(probe)):
            raise ToolError(f"{rel}: resolves outside the repository (symlink); refused")
        cur = self.root
        for part in clean.split("/"):
            cur = cur / part
            if cur.is_symlink():
                raise ToolError(f"{rel}: {cur.relative_to(self.root)} is a symlink; refused")
        return clean

    def write(self, rel: object, data: bytes) -> str:
        """Write ``data`` to ``rel`` in the copy, atomically, never through a symlink."""
        clean = self.check_write(rel)
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(f"{clean}: {len(data)} bytes is over the {MAX_WRITE_BYTES} limit")
        parts = clean.split("/")
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        dfd = os.open(self.root, flags)
        try:
            for part in parts[:-1]:
                try:
                    nfd = os.open(part, flags, dir_fd=dfd)
                except FileNotFoundError:
                    os.mkdir(part, 0o755, dir_fd=dfd)
                    nfd = os.open(part, flags, dir_fd=dfd)
                except OSError as exc:  # ELOOP/ENOTDIR: a symlink or file in the way
                    raise ToolError(
                        f"{clean}: {part} is not a plain directory ({exc.strerror})"
                    ) from None
                os.close(dfd)
                dfd = nfd
            leaf = parts[-1]
            try:
                if stat.S_ISLNK(os.lstat(leaf, dir_fd=dfd).st_mode):
                    raise ToolError(f"{clean}: is a symlink; refused")
            except FileNotFoundError:
                pass
            tmp = f".{leaf}.rb-{secrets.token_hex(4)}.tmp"
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd
            )
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, leaf, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with _suppress():
                    os.unlink(tmp, dir_fd=dfd)
                raise
        finally:
            os.close(dfd)
        return clean

    def original_bytes(self, rel: str) -> bytes | None:
        """The file's bytes in the original repository (None when absent or not a file)."""
        path = self.original / rel
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_bytes()

    def current_bytes(self, rel: str) -> bytes | None:
        path = self.root / rel
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_bytes()

    def patches(self) -> list[PatchRecord]:
        """One patch per touched file: original -> current, with the reasons given."""
        out: list[PatchRecord] = []
        for rel in sorted(self.touched):
            diff = unified_diff(rel, self.original_bytes(rel), self.current_bytes(rel))
            if diff:
                out.append(PatchRecord(rel, "; ".join(dict.fromkeys(self.touched[rel])), diff))
        return out


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


def patch_paths(patch: str) -> list[str]:
    """Every path a git-style patch touches (a/ and b/ prefixes removed, /dev/null skipped)."""
    found: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            p = line[4:].split("\t")[0].strip()
            if p == "/dev/null":
                continue
            found.append(p[2:] if p[:2] in ("a/", "b/") else p)
        elif line.startswith(("rename to ", "copy to ", "rename from ", "copy from ")):
            found.append(line.split(" ", 2)[2].strip())
        elif line.startswith("diff --git "):
            for word in line[len("diff --git ") :].split():
                found.append(word[2:] if word[:2] in ("a/", "b/") else word)
    return list(dict.fromkeys(found))


def existing(ws: Workspace) -> Callable[[str], bool]:
    """A predicate: does ``rel`` name a file inside the copy (symlinks must stay inside)."""

    def _exists(rel: str) -> bool:
        try:
            return ws.resolve_read(rel).is_file()
        except ToolError:
            return False

    return _exists
