"""The one package that starts subprocesses.

Every other module asks here, so there is one place that decides how argv is logged,
how environments are scrubbed and how git is kept from running repository-controlled code.
This module runs short commands to completion (:func:`run`, :func:`git`);
:mod:`reprobridge._proc.monitored` runs experiments: long, untrusted, streamed to capped
logs, timed out and killed as a whole tree.

We use :mod:`subprocess` rather than ``sh``: the auditor needs process groups, byte-exact
capture and timeouts with kill of the whole tree, which ``sh``'s threaded model hides.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from reprobridge.errors import CommandFailed, MachineError, UnsafePathError


@dataclass(frozen=True)
class Result:
    """What a finished command returned."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")


def which(name: str) -> str | None:
    """Absolute path of ``name`` on PATH, or None."""
    return shutil.which(name)


#: Host variables uv may see (beside PATH and HOME): where the index is, how to reach it
#: (proxies, certificates), offline mode, its cache. Index URLs can carry the operator's
#: credentials; they reach only uv, and uv builds nothing where rb runs it on the host
#: (``--no-build``), so no repository code sees them.
UV_PASSTHROUGH = (
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_OFFLINE",
    "UV_NATIVE_TLS",
    "UV_HTTP_TIMEOUT",
    "UV_CACHE_DIR",
    "XDG_CACHE_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)
#: uv's messages when ``--no-build`` meets a package that has no wheel.
_UV_NO_BUILD = re.compile(
    r"Distribution `([^`=@ ]+)[^`]*` can't be installed because it is marked as `--no-build`"
    r"|Building source distributions for `([^`]+)` is disabled"
    r"|Failed to build `([^`=@ ]+)"
    r"|Wheels are required for `([^`]+)` because building from source is disabled"
)


def uv_env(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment rb runs uv with on the host: PATH, HOME, :data:`UV_PASSTHROUGH`
    from this process, ``UV_PYTHON_DOWNLOADS=never``, then ``overrides``. Nothing else:
    the operator's secrets stay out of every process uv starts."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", *UV_PASSTHROUGH) if k in os.environ}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.update(overrides or {})
    return env


def uv_refused_build(stderr: str) -> str | None:
    """The package uv refused to build under ``--no-build`` (from its message), or None."""
    m = _UV_NO_BUILD.search(stderr)
    return next(g for g in m.groups() if g) if m else None


def run(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 120,
    check: bool = True,
    input: bytes | None = None,
) -> Result:
    """Run ``argv`` to completion and capture its output.

    Raises :class:`MachineError` when the program does not exist and :class:`CommandFailed`
    on a non-zero exit (when ``check``) or a timeout.
    """
    try:
        proc = subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise MachineError(f"{argv[0]} is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(
            f"`{' '.join(argv)}` did not finish within {timeout:g}s", argv=list(argv)
        ) from exc
    result = Result(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise CommandFailed(
            f"`{' '.join(argv)}` exited with {proc.returncode}: {' | '.join(tail)[:300]}",
            argv=list(argv),
            returncode=proc.returncode,
            stderr_tail="\n".join(tail),
        )
    return result


#: A program path that cannot exist: git's signature checks and signing run
#: ``gpg.program``; pointed here they fail instead of running what a repository names.
NO_PROGRAM = "/nonexistent/rb-refuses-to-run-this"

#: Configuration at command scope (it wins over the repository's own ``.git/config`` and
#: everything it includes) for every key that can name a program git would start, plus
#: the switches that make git start one on its own (signature checks, background gc).
#: Repository-named drivers (``filter.<name>``, ``diff.<name>``, ``merge.<name>``) are
#: switched off per repository by :func:`git_driver_overrides`; ``uploadpack.packObjectsHook``
#: is read from protected (system, global, command) config only, all of which rb controls.
_GIT_SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.attributesFile", os.devnull),
    ("diff.external", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("gpg.program", NO_PROGRAM),
    ("gpg.openpgp.program", NO_PROGRAM),
    ("gpg.x509.program", NO_PROGRAM),
    ("gpg.ssh.program", NO_PROGRAM),
    ("gpg.ssh.defaultKeyCommand", NO_PROGRAM),
    ("log.showSignature", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("tag.forceSignAnnotated", "false"),
    # No `gc --auto` detached into the background (it would outlive rb, run hooks).
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)

#: The only variables rb's git sees beside PATH, HOME, LC_ALL and TZ: no system or
#: global config or attributes, no prompt, no pager or editor, no lock taken for reads.
_GIT_SAFE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "false",
    "GIT_SEQUENCE_EDITOR": "false",
    "GIT_PROTOCOL_FROM_USER": "0",
}

#: Variables a caller may add (:func:`git`'s ``extra_env``): a commit's identity and
#: dates, and where repository discovery stops.
GIT_EXTRA_ENV = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_CEILING_DIRECTORIES",
    }
)

_EMPTY_HOME: list[str] = []


def _empty_home() -> str:
    """An empty, read-only directory of this process's own for git's HOME (removed at
    exit): git reads ``~/.config/git/attributes`` and ``ignore`` whatever the config says,
    and nothing of the operator's belongs in what rb's git does."""
    if not _EMPTY_HOME:
        import atexit

        home = tempfile.mkdtemp(prefix="rb-git-home-")
        os.chmod(home, 0o500)
        atexit.register(lambda: shutil.rmtree(home, ignore_errors=True))
        _EMPTY_HOME.append(home)
    return _EMPTY_HOME[0]


def git_env(config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The whole environment of rb's git: PATH, HOME (an empty directory), LC_ALL=C, TZ
    when set, :data:`_GIT_SAFE_ENV`, and :data:`_GIT_SAFE_CONFIG` then ``config`` as
    command-scope configuration (``GIT_CONFIG_COUNT``: keys and values are passed apart,
    so a repository-chosen driver name cannot be misparsed). Nothing else of this
    process's environment: the operator's secrets never reach git or what it starts."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": _empty_home(), "LC_ALL": "C"}
    if "TZ" in os.environ:
        env["TZ"] = os.environ["TZ"]
    env.update(_GIT_SAFE_ENV)
    items = [*_GIT_SAFE_CONFIG, *config]
    env["GIT_CONFIG_COUNT"] = str(len(items))
    for i, (key, value) in enumerate(items):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


#: Per driver section, the keys that name a program and the value that disables each.
_DRIVER_KEYS = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", NO_PROGRAM), ("command", NO_PROGRAM)),
    "merge": (("driver", NO_PROGRAM),),
}
#: Subcommands that read no file content through attributes and show no diff or
#: signature: they need no per-repository driver overrides (one git start saved).
_NO_DRIVERS = frozenset(
    {"rev-parse", "config", "ls-files", "ls-tree", "init", "symbolic-ref", "clone", "update-ref"}
)
#: Options inserted after these subcommands: no external diff, textconv or signature check.
_SUB_OPTIONS = {
    "diff": ("--no-ext-diff", "--no-textconv"),
    "log": ("--no-ext-diff", "--no-textconv", "--no-show-signature"),
    "show": ("--no-ext-diff", "--no-textconv", "--no-show-signature"),
}


def git_driver_overrides(repo: str | Path) -> list[tuple[str, str]]:
    """Configuration that disables every filter, diff and merge driver ``repo``'s config
    defines (including what it includes).

    A driver's name is the repository's choice (its ``.gitattributes`` names it for any
    path), so the names are read from the config (reading runs nothing) and each
    program-naming key is overridden: an empty filter is no filter (``required`` is
    lifted so that is not an error); a diff or merge driver points at
    :data:`NO_PROGRAM`, so where git would use it, it fails rather than runs it.
    """
    got = run(
        ["git", "-C", str(repo), "config", "-z", "--get-regexp", r"^(filter|diff|merge)\."],
        env=git_env(),
        check=False,
    )
    names: set[tuple[str, str]] = set()
    for record in got.stdout.split(b"\0"):
        key = record.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        section, _, rest = key.partition(".")
        if section in _DRIVER_KEYS and "." in rest:
            names.add((section, rest[: rest.rindex(".")]))
    return [
        (f"{section}.{name}.{key}", value)
        for section, name in sorted(names)
        for key, value in _DRIVER_KEYS[section]
    ]


def _git_command(
    repo: str | Path, args: Sequence[str], extra_env: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str], str]:
    """argv, environment and subcommand of hardened ``git -C repo ARGS``."""
    words = list(args)
    at = 0
    while at < len(words):
        if words[at] in {"-c", "-C"}:
            at += 2  # the option and its value
        elif words[at].startswith("-"):
            at += 1
        else:
            break
    sub = words[at] if at < len(words) else ""
    words[at + 1 : at + 1] = _SUB_OPTIONS.get(sub, ())
    unknown = set(extra_env or {}) - GIT_EXTRA_ENV
    if unknown:
        raise ValueError(f"git's environment takes no {', '.join(sorted(unknown))}")
    drivers = [] if sub in _NO_DRIVERS else git_driver_overrides(repo)
    env = {**git_env(drivers), **(extra_env or {})}
    return ["git", "-C", str(repo), *words], env, sub


#: git subcommands rb runs that write to a repository's metadata (index, refs, objects).
_GIT_WRITES = frozenset({"add", "commit", "update-index", "reset", "checkout", "stash", "tag"})


def foreign_git_dir(repo: str | Path) -> str | None:
    """Why git in ``repo`` would act on *another* repository's metadata, or None.

    ``repo/.git`` as a file (``gitdir: /elsewhere``) or a symlink redirects every git
    command. That is legitimate for a linked worktree (``git worktree add``: the git dir
    names this checkout back in its ``gitdir`` file) and a submodule (its git dir's
    ``core.worktree`` names this checkout); anything else is a redirection the repository
    (untrusted) chose, and rb must not write there.
    """
    root = Path(repo).resolve()
    dotgit = Path(repo) / ".git"
    if dotgit.is_symlink():
        target = dotgit.resolve()
    elif dotgit.is_file():
        try:
            first = dotgit.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        except OSError as exc:
            return f".git cannot be read ({exc.strerror or exc})"
        if not first or not first[0].startswith("gitdir:"):
            return ".git is a file without a `gitdir:` line"
        target = (root / first[0][len("gitdir:") :].strip()).resolve()
    else:
        return None
    if target.is_relative_to(root):
        return None
    try:
        back = (target / "gitdir").read_text(encoding="utf-8").strip()
        if back and (target / back).resolve() == (root / ".git").resolve():
            return None  # a linked worktree of that repository
    except OSError:
        pass
    if not target.is_dir():
        return f".git redirects to {target}, which is not a directory"
    got = git(
        target, "config", "--file", str(target / "config"), "--get", "core.worktree", check=False
    )
    if got.returncode == 0 and (target / got.text.strip()).resolve() == root:
        return None  # a submodule checkout
    return f".git redirects to {target}, another repository's metadata"


def git(
    repo: str | Path,
    *args: str,
    check: bool = True,
    timeout: float = 120,
    extra_env: Mapping[str, str] | None = None,
) -> Result:
    """Run ``git -C repo ARGS``: the one way rb starts git (a test holds every other module
    to it).

    Hardened against a repository's configuration and attributes: no system or global
    config, :data:`_GIT_SAFE_CONFIG` and :func:`git_driver_overrides` at command scope,
    ``--no-ext-diff --no-textconv`` (and ``--no-show-signature``) after ``diff``, ``log``
    and ``show``, and an environment of :func:`git_env` only, plus ``extra_env`` (names
    in :data:`GIT_EXTRA_ENV`; ValueError for another). A subcommand that writes
    (``_GIT_WRITES``) is refused with UnsafePathError when ``repo/.git`` redirects to
    another repository (:func:`foreign_git_dir`).
    """
    argv, env, sub = _git_command(repo, args, extra_env)
    if sub in _GIT_WRITES:
        why = foreign_git_dir(repo)
        if why:
            raise UnsafePathError(
                f"{why}; rb never writes to another repository",
                path=str(Path(repo) / ".git"),
                hint="run rb in a clone whose .git is its own directory",
            )
    return run(argv, env=env, check=check, timeout=timeout)


def head_commit(repo: str | Path, *, timeout: float = 120) -> str | None:
    """The commit ``HEAD`` of ``repo`` names, through :func:`git`; None when it names none
    (a repository without commits, or no repository).

    Raises :class:`MachineError` without git and :class:`CommandFailed` on a timeout.
    """
    got = git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False, timeout=timeout)
    return got.text.strip() if got.returncode == 0 else None


@contextlib.contextmanager
def git_stream(repo: str | Path, *args: str, timeout: float = 600) -> Iterator[IO[bytes]]:
    """``git -C repo ARGS`` (hardened as :func:`git`; read-only subcommands only) with its
    stdout as a pipe to read while it runs (``git archive`` straight into a writer).

    On leaving the context the command must have exited 0 (else :class:`CommandFailed`
    with its stderr); when the body raises, the command is killed. ``timeout`` bounds the
    wait for its exit once the body is done.
    """
    argv, env, _sub = _git_command(repo, args, None)
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, env=env, bufsize=1 << 20
            )
        except FileNotFoundError as exc:
            raise MachineError("git is not installed or not on PATH") from exc
        assert proc.stdout is not None
        _widen_pipe(proc.stdout.fileno())
        try:
            yield proc.stdout
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            proc.stdout.close()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.wait()
            raise CommandFailed(
                f"`{' '.join(argv)}` did not finish within {timeout:g}s", argv=argv
            ) from exc
        if code != 0:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace").strip().splitlines()[-5:]
            raise CommandFailed(
                f"`{' '.join(argv)}` exited with {code}: {' | '.join(tail)[:300]}",
                argv=argv,
                returncode=code,
                stderr_tail="\n".join(tail),
            )


#: Pipe capacity asked for a streamed command's stdout (Linux's default is 64 KiB).
PIPE_SIZE = 1 << 20


def _widen_pipe(fd: int) -> None:
    """Ask the kernel for a :data:`PIPE_SIZE` pipe behind ``fd`` (Linux; best effort).

    With 64 KiB, a 40 MB ``git archive`` stream is 640 hand-offs in which one side waits
    for the other to be scheduled; on a busy machine each wait is a scheduler slice.
    Where the call is missing or refused (another OS, a lower
    ``/proc/sys/fs/pipe-max-size``) the pipe stays as it is.
    """
    import fcntl

    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setsize, PIPE_SIZE)
