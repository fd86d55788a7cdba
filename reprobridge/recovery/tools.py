"""The agent's tools: their JSON schemas for the Messages API and their implementations
over a :class:`Workspace`, a temporary copy of the repository.

Contract (the agent is untrusted; see docs/agent.md):

* every path is relative to the copy; absolute paths, NUL, empty components and ``..`` are
  refused; a path is resolved with ``realpath`` on its nearest existing ancestor and must
  stay inside the copy (``commonpath``, never a string prefix);
* writes additionally refuse ``.git/``, CI configuration (``.github/workflows``,
  ``.gitlab-ci.yml``, ...), ``.envrc`` and rb's own files, walk directories with
  ``O_NOFOLLOW|O_DIRECTORY`` through ``dir_fd``s, refuse a symlinked leaf and replace the
  file atomically, so a symlink swapped in after the check is not followed either;
* commands run only inside bubblewrap (:mod:`reprobridge.sandbox`) with a cleared
  environment (the API key of the rb process is never passed), no network unless allowed,
  the copy writable and the rest of the system read-only, a timeout and an output cap;
  without a usable sandbox the tool refuses rather than running unsandboxed;
* a refused or failed call raises :class:`ToolError`, which the loop returns to the model
  as a tool result with ``is_error: true``; it never reaches the user as an exception.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import secrets
import shlex
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge import _proc
from reprobridge.errors import ManifestError
from reprobridge.evidence.redact import Redactor
from reprobridge.manifest.io import flatten, validate_document

#: Largest file the write tool accepts, and the largest read it returns.
MAX_WRITE_BYTES = 1 << 20
MAX_READ_CHARS = 40_000
MAX_LIST = 500
MAX_MATCHES = 100
#: What a command's output may put in front of the model (head + tail are kept).
MAX_OUTPUT_CHARS = 12_000
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
class Proposal:
    """An accepted manifest change: dotted path, JSON value, the model's reason."""

    path: str
    value: Any
    reason: str


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


# -- tool schemas -----------------------------------------------------------------------------

_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_files",
        "description": "List files under a directory of the repository copy (recursive, capped).",
        "input_schema": {
            "type": "object",
            "properties": {"path": {**_STR, "description": "Directory; default '.'"}},
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file, optionally only lines start_line..end_line (1-based).",
        "input_schema": {
            "type": "object",
            "properties": {"path": _STR, "start_line": _INT, "end_line": _INT},
            "required": ["path"],
        },
    },
    {
        "name": "search",
        "description": "Search text files for a regular expression; returns path:line: text.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": _STR, "path": _STR},
            "required": ["pattern"],
        },
    },
    {
        "name": "run_command",
        "description": (
            "Run a bash command in a sandbox on a writable copy of the repository: no network "
            "unless the user allowed it, empty environment, read-only system, time-limited, "
            "output capped. Use it to try imports or a short smoke run."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"command": _STR, "timeout_s": _INT},
            "required": ["command"],
        },
    },
    {
        "name": "write_file",
        "description": (
            "Create or replace a text file in the repository copy. Becomes a patch the user "
            "reviews; give the reason. Not allowed: .git/, CI configs, .envrc, rb's files."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"path": _STR, "content": _STR, "reason": _STR},
            "required": ["path", "content", "reason"],
        },
    },
    {
        "name": "apply_patch",
        "description": "Apply a unified diff (git format, a/ b/ prefixes) to the copy; give the reason.",
        "input_schema": {
            "type": "object",
            "properties": {"patch": _STR, "reason": _STR},
            "required": ["patch", "reason"],
        },
    },
    {
        "name": "propose_manifest",
        "description": (
            "Set one value of reprobridge.toml by dotted path (e.g. "
            "environment.python_requirements, experiments.train.command). The value is JSON. "
            "Validated against the manifest schema. Numbers you observed or read go to a "
            "metric's `claimed`, never to `target` or thresholds."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"path": _STR, "value": {}, "reason": _STR},
            "required": ["path", "value", "reason"],
        },
    },
    {
        "name": "finish",
        "description": "Stop and summarise what you found, changed and could not resolve.",
        "input_schema": {
            "type": "object",
            "properties": {"summary": _STR},
            "required": ["summary"],
        },
    },
]

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "object": dict,
    "array": list,
    "boolean": bool,
}


def check_input(name: str, data: object) -> dict[str, Any]:
    """``data`` checked against tool ``name``'s schema (required fields and simple types)."""
    schema = next((t["input_schema"] for t in TOOLS if t["name"] == name), None)
    if schema is None:
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(tool_names())}")
    if not isinstance(data, dict):
        raise ToolError("tool input must be a JSON object")
    for key in schema.get("required", []):
        if key not in data:
            raise ToolError(f"{name}: missing required field {key!r}")
    for key, value in data.items():
        spec = schema["properties"].get(key)
        if spec is None:
            raise ToolError(f"{name}: unknown field {key!r}")
        want = spec.get("type")
        if want and (
            not isinstance(value, _TYPES[want]) or (want == "integer" and isinstance(value, bool))
        ):
            raise ToolError(f"{name}: field {key!r} must be a {want}")
    return data


def tool_names() -> list[str]:
    return [t["name"] for t in TOOLS]


# -- the manifest draft -------------------------------------------------------------------------

_METRIC_LEAF = re.compile(r"^experiments\.[^.]+\.(?:tiers\.[^.]+\.)?metrics\.[^.]+\.(\w+)$")
_THRESHOLDS = frozenset({"target", "tolerance", "relative_tolerance", "min", "max"})
_PATH = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")


@dataclass
class ManifestDraft:
    """The static manifest (plain data, no ``derived``) plus the proposals accepted so far."""

    data: dict[str, Any]
    exists: Callable[[str], bool]
    accepted: list[Proposal] = field(default_factory=list)

    def propose(self, path: object, value: Any, reason: object) -> str:
        """Validate and accept one proposal; ToolError with a one-line reason otherwise."""
        if not isinstance(path, str) or not _PATH.match(path):
            raise ToolError("path must be dotted keys, e.g. environment.python_requirements")
        if not isinstance(reason, str) or not reason.strip():
            raise ToolError("give a reason")
        parts = path.split(".")
        if parts[0] not in {"project", "environment", "datasets", "experiments", "claims"}:
            raise ToolError(f"{path}: only project, environment, datasets, experiments, claims")
        note = ""
        m = _METRIC_LEAF.match(path)
        if m and m.group(1) == "target":
            # A number the agent reports is a claim: the auditor measures, the paper sets targets.
            parts[-1] = "claimed"
            path = ".".join(parts)
            note = " (stored as `claimed`: an agent's number never becomes a target)"
        candidate = copy.deepcopy(self.data)
        cur = candidate
        for p in parts[:-1]:
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ToolError(f"{path}: {p} is not a table")
            cur = nxt
        cur[parts[-1]] = value
        before, after = flatten(self.data), flatten(candidate)
        for key in sorted(set(before) | set(after)):
            mm = _METRIC_LEAF.match(key)
            if mm and mm.group(1) in _THRESHOLDS and before.get(key) != after.get(key):
                raise ToolError(
                    f"{key}: targets and thresholds come from the paper, not from the agent; "
                    "propose the metric's `claimed` value instead"
                )
        try:
            validate_document({"schema": 1, **candidate}, path="reprobridge.toml")
        except ManifestError as exc:
            raise ToolError(str(exc)) from None
        for exp_id, exp in (candidate.get("experiments") or {}).items():
            old = (self.data.get("experiments") or {}).get(exp_id) or {}
            if exp.get("command") != old.get("command") or exp.get("workdir") != old.get("workdir"):
                missing = _missing_script(exp["command"], exp.get("workdir", "."), self.exists)
                if missing:
                    raise ToolError(
                        f"experiments.{exp_id}.command: {missing} does not exist in the repository"
                    )
        self.data = candidate
        self.accepted.append(Proposal(path, value, reason.strip()))
        return f"accepted {path}{note}"


def _missing_script(command: str, workdir: str, exists: Callable[[str], bool]) -> str | None:
    """The script or module a command runs when it is missing, else None."""
    try:
        words = shlex.split(command)
    except ValueError:
        return f"`{command}` (unbalanced quotes)"
    base = "" if workdir in ("", ".") else workdir.rstrip("/") + "/"
    for i, w in enumerate(words):
        if w == "-m" and i + 1 < len(words):
            mod = base + words[i + 1].replace(".", "/")
            if not any(exists(mod + s) for s in (".py", "/__init__.py", "/__main__.py")):
                return f"module {words[i + 1]}"
            return None
        if re.search(r"\.(py|sh|ipynb|R|jl)$", w) and not w.startswith("-"):
            target = os.path.normpath(base + w)
            return None if exists(target) else target
    return None


# -- the tool set ---------------------------------------------------------------------------------


@dataclass
class ToolResult:
    """What goes back to the model for one tool_use."""

    content: str
    is_error: bool = False
    finished: bool = False


@dataclass
class Tools:
    """The implementations, bound to one workspace, draft and sandbox policy."""

    workspace: Workspace
    draft: ManifestDraft
    redactor: Redactor
    allow_network: bool = False
    command_timeout_s: float = 120.0
    sandbox_unusable: Callable[[], str | None] | None = None
    summary: str | None = None

    def call(self, name: str, data: object) -> ToolResult:
        """Run tool ``name``; every refusal or failure is an ``is_error`` result."""
        try:
            args = check_input(name, data)
            text = getattr(self, f"_t_{name}")(**args)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(text, finished=name == "finish")

    def _t_list_files(self, path: str = ".") -> str:
        base = self.workspace.resolve_read(path)
        if not base.is_dir():
            raise ToolError(f"{path}: not a directory")
        prefix = "" if path in (".", "./") else check_rel(path, write=False) + "/"
        names = [f for f in self.workspace.file_list() if f.startswith(prefix)]
        more = f"\n... {len(names) - MAX_LIST} more" if len(names) > MAX_LIST else ""
        return "\n".join(names[:MAX_LIST]) + more if names else "(empty)"

    def _t_read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        real = self.workspace.resolve_read(path)
        if not real.is_file():
            raise ToolError(f"{path}: not a file")
        raw = real.read_bytes()
        if b"\0" in raw[:8192]:
            raise ToolError(f"{path}: binary file")
        lines = raw.decode("utf-8", "replace").splitlines()
        lo = max(1, start_line)
        hi = len(lines) if end_line is None else min(len(lines), end_line)
        body = "\n".join(f"{i}: {lines[i - 1]}" for i in range(lo, hi + 1))
        if len(body) > MAX_READ_CHARS:
            body = body[:MAX_READ_CHARS] + "\n... (truncated; read a line range)"
        return f"{path} ({len(lines)} lines)\n{body}"

    def _t_search(self, pattern: str, path: str = ".") -> str:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        self.workspace.resolve_read(path)
        prefix = "" if path in (".", "./") else check_rel(path, write=False)
        hits: list[str] = []
        for rel in self.workspace.file_list():
            if prefix and not (rel == prefix or rel.startswith(prefix + "/")):
                continue
            full = self.workspace.root / rel
            if full.is_symlink() or not full.is_file() or full.stat().st_size > MAX_WRITE_BYTES:
                continue
            raw = full.read_bytes()
            if b"\0" in raw[:8192]:
                continue
            for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{rel}:{n}: {line[:300]}")
                    if len(hits) >= MAX_MATCHES:
                        return "\n".join(hits) + "\n... (more matches; narrow the search)"
        return "\n".join(hits) or "(no matches)"

    def _t_run_command(self, command: str, timeout_s: int | None = None) -> str:
        from reprobridge._proc.monitored import run_monitored
        from reprobridge.sandbox import SandboxSpec, offline_env, sandbox_unusable, wrap

        why = (self.sandbox_unusable or sandbox_unusable)()
        if why is not None:
            raise ToolError(f"commands cannot run: {why} (rb never runs them unsandboxed)")
        timeout = min(float(timeout_s or self.command_timeout_s), self.command_timeout_s)
        marker = secrets.token_hex(8)
        # The whole environment of the command: nothing of rb's (no API key) is inherited.
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "RB_RUN_MARKER": marker,
        }
        if not self.allow_network:
            env.update(offline_env(self.workspace.root))
        spec = SandboxSpec(workdir=self.workspace.root, network=self.allow_network, env=env)
        argv = wrap(["/bin/bash", "-c", command], spec, hostname="rb-agent")
        with tempfile.TemporaryDirectory(prefix="rb-agent-run-") as logs:
            done = run_monitored(
                argv,
                cwd=self.workspace.root,
                env={"PATH": "/usr/bin:/bin", "RB_RUN_MARKER": marker},
                stdout_path=Path(logs, "stdout"),
                stderr_path=Path(logs, "stderr"),
                timeout=timeout,
                grace=2.0,
                cap_bytes=2 * MAX_OUTPUT_CHARS,
                redactor_factory=self.redactor.stream,
                marker=marker,
                term_group=False,
            )
            out = Path(logs, "stdout").read_text("utf-8", "replace")
            err = Path(logs, "stderr").read_text("utf-8", "replace")
        return (
            f"{done.termination.description}\n--- stdout ---\n{_cap(out)}\n"
            f"--- stderr ---\n{_cap(err)}"
        )

    def _t_write_file(self, path: str, content: str, reason: str) -> str:
        clean = self.workspace.write(path, content.encode("utf-8"))
        self.workspace.touched.setdefault(clean, []).append(reason.strip() or "no reason given")
        return f"wrote {clean} ({len(content.encode())} bytes); it will be kept as a patch"

    def _t_apply_patch(self, patch: str, reason: str) -> str:
        paths = patch_paths(patch)
        if not paths:
            raise ToolError("no file paths found in the patch (use git-style a/ and b/ paths)")
        cleaned = [self.workspace.check_write(p) for p in paths]
        with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as fh:
            fh.write(patch if patch.endswith("\n") else patch + "\n")
        try:
            env = {**_proc.git_env(), "GIT_CEILING_DIRECTORIES": str(self.workspace.root.parent)}
            res = _proc.run(
                [
                    "git",
                    "-c",
                    "core.hooksPath=/dev/null",
                    "-c",
                    "core.fsmonitor=false",
                    "apply",
                    "--whitespace=nowarn",
                    fh.name,
                ],
                cwd=self.workspace.root,
                env=env,
                check=False,
                timeout=60,
            )
        finally:
            os.unlink(fh.name)
        if res.returncode != 0:
            msg = " | ".join(res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:])
            raise ToolError(f"the patch does not apply: {msg}")
        for clean in cleaned:
            self.workspace.touched.setdefault(clean, []).append(reason.strip() or "no reason")
        return f"applied to {', '.join(cleaned)}; kept as patches"

    def _t_propose_manifest(self, path: str, value: Any, reason: str) -> str:
        return self.draft.propose(path, value, reason)

    def _t_finish(self, summary: str) -> str:
        self.summary = summary
        return "finished"


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


def _cap(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def tools_for_api() -> list[dict[str, Any]]:
    """The tool definitions as the Messages API takes them."""
    return copy.deepcopy(TOOLS)


def existing(ws: Workspace) -> Callable[[str], bool]:
    """A predicate: does ``rel`` name a file inside the copy (symlinks must stay inside)."""

    def _exists(rel: str) -> bool:
        try:
            return ws.resolve_read(rel).is_file()
        except ToolError:
            return False

    return _exists


__all__ = [
    "TOOLS",
    "ManifestDraft",
    "PatchRecord",
    "Proposal",
    "ToolError",
    "ToolResult",
    "Tools",
    "Workspace",
    "check_rel",
    "unified_diff",
]
