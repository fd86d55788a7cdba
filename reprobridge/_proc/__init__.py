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


#: Configuration that stops a hostile ``.git/config`` from running programs: command-line
#: ``-c`` wins over repository config. (core.fsmonitor and hooks run commands; pagers,
#: external diff and textconv/filter drivers are not reached by the commands we run.)
_GIT_SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "diff.external=",
    "protocol.allow=never",
    "credential.helper=",
    "core.sshCommand=false",
)


def git_env() -> dict[str, str]:
    """An environment for git that ignores system and global config and asks nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        LC_ALL="C",
    )
    return env


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
    got = run(
        ["git", "config", "--file", str(target / "config"), "--get", "core.worktree"],
        env=git_env(),
        check=False,
    )
    if got.returncode == 0 and (target / got.text.strip()).resolve() == root:
        return None  # a submodule checkout
    return f".git redirects to {target}, another repository's metadata"


def git(repo: str | Path, *args: str, check: bool = True, timeout: float = 120) -> Result:
    """Run ``git -C repo ARGS`` hardened against repository-controlled configuration.

    A subcommand that writes (``_GIT_WRITES``) is refused with UnsafePathError when
    ``repo/.git`` redirects to another repository (:func:`foreign_git_dir`).
    """
    words = iter(args)
    sub = ""
    for word in words:
        if word in {"-c", "-C"}:
            next(words, None)  # the option's value
        elif not word.startswith("-"):
            sub = word
            break
    if sub in _GIT_WRITES:
        why = foreign_git_dir(repo)
        if why:
            raise UnsafePathError(
                f"{why}; rb never writes to another repository",
                path=str(Path(repo) / ".git"),
                hint="run rb in a clone whose .git is its own directory",
            )
    argv = ["git"]
    for item in _GIT_SAFE_CONFIG:
        argv += ["-c", item]
    argv += ["-C", str(repo), *args]
    return run(argv, env=git_env(), check=check, timeout=timeout)


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
    argv = ["git"]
    for item in _GIT_SAFE_CONFIG:
        argv += ["-c", item]
    argv += ["-C", str(repo), *args]
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, env=git_env(), bufsize=1 << 20
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


def git_filter_overrides(repo: str | Path) -> list[str]:
    """``-c`` options that disable every filter driver the repository configures.

    Filter drivers are commands from the repository's own (untrusted) config, run for
    paths whose attributes name them: ``git archive`` runs ``filter.<name>.smudge``,
    ``git diff`` against the work tree ``filter.<name>.clean`` (and ``process``). Pass
    these options among the global ones, ``git(repo, *overrides, "archive", ...)``, to any
    such command. Empty values mean "no filter" to git; ``required`` is lifted so the
    missing filter is not an error. (Reading the config runs nothing.)
    """
    got = git(repo, "config", "--get-regexp", r"^filter\.", check=False)
    names = set()
    for line in got.text.splitlines():
        key = line.split(" ", 1)[0]
        if key.startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter.") : key.rindex(".")])
    args: list[str] = []
    for name in sorted(names):
        for item in ("clean=", "smudge=", "process=", "required=false"):
            args += ["-c", f"filter.{name}.{item}"]
    return args
