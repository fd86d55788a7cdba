"""Run one experiment as an untrusted child: streamed to capped logs, timed out, swept clean.

Contract of :func:`run_monitored`:

* The child starts in a new session (so it is the leader of its own process group), with
  stdin from ``/dev/null`` and stdout/stderr on pipes read by this process.
* Each stream goes through an optional :class:`StreamRedactor` first, then is hashed in
  full (sha256 + byte count) and stored with a cap: the first ``cap/2`` bytes, a one-line
  marker naming what was left out, and the last ``cap/2`` bytes (:class:`StreamCapture`).
  Bytes are never decoded, so invalid UTF-8 and endless lines are only bytes; memory is
  bounded by the tail ring (``cap/2`` per stream), whatever the child prints.
* A wall-clock ``timeout`` or a set ``stop_event`` sends SIGTERM, waits ``grace`` seconds,
  then SIGKILLs the child's process group (:class:`Termination` says which happened).
* When the child has exited, every process that still belongs to the run is SIGKILLed:
  members of the child's process group or session, and any process whose environment holds
  ``RB_RUN_MARKER=<marker>`` (a ``setsid`` double fork escapes the group but keeps its
  environment). They are counted in :attr:`Completed.survivors_killed`. A PID namespace
  (bubblewrap, :mod:`reprobridge.sandbox`) is the stronger guarantee; the sweep is
  what remains without one.
* A failing, crashing or killed child is a normal result, never an exception.
  :class:`MachineError` means the program does not exist or cannot be executed;
  :class:`AuditError` that the working directory is missing. Any exception inside (a
  callback, a full disk) kills the whole run before it propagates, so no child outlives an
  auditor error.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from reprobridge.errors import AuditError, MachineError

#: The environment variable whose ``NAME=<marker>`` entry tags every process of one run.
MARKER_VAR = "RB_RUN_MARKER"
#: After the child has exited and the survivors are killed, how long to keep reading pipes
#: that something outside the run may still hold open.
DRAIN_S = 2.0
#: Pipe read size; F_SETPIPE_SZ asks the kernel for pipes this large (fewer wake-ups on
#: chatty children), best effort.
_READ = 1 << 20
_F_SETPIPE_SZ = 1031
#: How often the loop looks at ``stop_event`` (a threading.Event has no file descriptor).
_STOP_POLL_S = 0.1
#: Without a pidfd, how often the loop polls for the child's exit.
_EXIT_POLL_S = 0.02

TerminationKind = Literal["exit", "signal", "timeout", "killed", "interrupted", "scheduler"]


class StreamRedactor(Protocol):
    """Removes secrets from one byte stream as it flows (implemented elsewhere).

    ``feed`` gets raw chunks in order and returns the redacted bytes that are safe to
    emit now (it may hold some back, to catch a secret split across chunks); ``flush`` is
    called once at end of stream and returns whatever was held back. Both work on bytes
    and must never raise on arbitrary input. One instance serves one stream.
    """

    def feed(self, chunk: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


@dataclass(frozen=True)
class StreamCapture:
    """One stream as stored at ``path``.

    ``total_bytes`` and ``sha256`` describe the WHOLE stream after redaction, also when the
    file is capped; ``stored_bytes`` is the size of the file (head + marker + tail when
    ``truncated``). The marker line reads
    ``\\n[... rb: N bytes omitted; full stream sha256=<hex> size=<n> ...]\\n``.
    """

    path: Path
    total_bytes: int
    stored_bytes: int
    sha256: str
    truncated: bool


@dataclass(frozen=True)
class Termination:
    """How a run ended.

    ``kind``: ``exit`` (normal exit, any code), ``signal`` (a signal other than SIGKILL),
    ``killed`` (SIGKILL not sent by us: the kernel's OOM killer is the usual sender),
    ``timeout`` (we stopped it at the wall-clock limit), ``interrupted`` (we stopped it
    because the auditor was asked to stop), ``scheduler`` (a cluster scheduler ended or
    refused the job: node failure, preemption, out of memory, not schedulable). ``returncode`` is the raw value: a negative
    number for Python's "killed by signal N", or 128+N from a wrapping shell or bubblewrap.
    ``signal`` is the signal that ended the process, when one did.
    """

    kind: TerminationKind
    returncode: int | None
    signal: int | None
    description: str

    @classmethod
    def from_returncode(cls, returncode: int) -> Termination:
        """Classify a return code: ``-N`` (Python) and ``128+N`` (shells) both mean signal N.

        128+N is ambiguous for a program that exits 129..192 on its own; shells and
        bubblewrap report signals that way, so the signal reading wins.
        """
        if returncode < 0:
            return cls._signalled(returncode, -returncode, shell=False)
        if 128 < returncode <= 128 + 64 and (returncode - 128) in signal.valid_signals():
            return cls._signalled(returncode, returncode - 128, shell=True)
        return cls("exit", returncode, None, f"exit({returncode})")

    @classmethod
    def _signalled(cls, returncode: int, signum: int, *, shell: bool) -> Termination:
        via = f"; shell exit {returncode}" if shell else ""
        if signum == signal.SIGKILL:
            return cls("killed", returncode, signum, f"killed-9 (possible OOM{via})")
        suffix = f" (shell exit {returncode})" if shell else ""
        return cls("signal", returncode, signum, f"signal({signum}){suffix}")


@dataclass(frozen=True)
class Completed:
    """Everything the auditor records about one finished (or stopped) run.

    ``cpu_user_s``/``cpu_sys_s`` come from ``wait4``: the child plus the descendants it
    waited for (processes that escaped and were killed by the sweep are not included).
    ``started_at``/``finished_at`` are UTC ISO 8601; ``wall_s`` is monotonic. ``pid`` is the
    direct child's. ``survivors_killed`` counts processes of the run still alive after the
    child exited (and killed then).
    """

    argv: tuple[str, ...]
    termination: Termination
    stdout: StreamCapture
    stderr: StreamCapture
    wall_s: float
    cpu_user_s: float
    cpu_sys_s: float
    started_at: str
    finished_at: str
    pid: int
    survivors_killed: int
    #: stdout and stderr as one stream, in the order the chunks arrived (``combined_path``).
    combined: StreamCapture | None = None


# -- capped stream --------------------------------------------------------------------------


class _CappedStream:
    """Redact, hash and store one stream: head + marker + tail, memory bounded by the tail.

    While the stream still fits the cap it is written through to the file as it comes, so a
    crashed auditor leaves a plain prefix behind; once it outgrows the cap, bytes past the
    head go only to a ring buffer of the tail and the file is rewritten at :meth:`close`.
    """

    def __init__(self, path: Path, cap: int, redactor: StreamRedactor | None) -> None:
        self.path = path
        self._cap = cap
        self._head_cap = cap // 2
        self._tail_cap = cap - self._head_cap
        self._redactor = redactor
        self._hash = hashlib.sha256()
        self._total = 0
        self._ring: bytearray | None = None  # allocated when the stream outgrows the head
        self._ring_pos = 0
        self._ring_len = 0
        self._fd: int | None = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644
        )

    def feed(self, chunk: bytes) -> bytes:
        """Store ``chunk`` (redacted first); return the redacted bytes (for echoing)."""
        data = self._redactor.feed(chunk) if self._redactor is not None else chunk
        self._store(data)
        return data

    def _store(self, data: bytes) -> None:
        if not data:
            return
        assert self._fd is not None
        view = memoryview(data)
        self._hash.update(view)
        start = self._total
        self._total += len(view)
        if start < self._cap:
            _write_all(self._fd, view[: self._cap - start])
        if self._total > self._head_cap:
            self._ring_put(view[max(0, self._head_cap - start) :])

    def _ring_put(self, view: memoryview) -> None:
        size = self._tail_cap
        if self._ring is None:
            self._ring = bytearray(size)
        n = len(view)
        if n >= size:
            self._ring[:] = view[n - size :]
            self._ring_pos, self._ring_len = 0, size
            return
        first = min(n, size - self._ring_pos)
        self._ring[self._ring_pos : self._ring_pos + first] = view[:first]
        self._ring[: n - first] = view[first:]
        self._ring_pos = (self._ring_pos + n) % size
        self._ring_len = min(size, self._ring_len + n)

    def _tail(self) -> bytes:
        if self._ring is None:
            return b""
        if self._ring_len < self._tail_cap:
            return bytes(self._ring[: self._ring_len])
        return bytes(self._ring[self._ring_pos :] + self._ring[: self._ring_pos])

    def close(self) -> StreamCapture:
        """Flush the redactor, write the capped form if needed and close (call once). Not
        fsynced: what keeps the file is its reader's business (the evidence bundle's seal
        fsyncs every file it lists; a setup step's or a listing's log in a temporary
        directory needs no device flush)."""
        if self._redactor is not None:
            self._store(self._redactor.flush())
        fd = self._fd
        assert fd is not None
        self._fd = None
        try:
            digest = self._hash.hexdigest()
            truncated = self._total > self._cap
            stored = self._total
            if truncated:
                omitted = self._total - self._head_cap - self._tail_cap
                marker = (
                    f"\n[... rb: {omitted} bytes omitted; full stream sha256={digest} "
                    f"size={self._total} ...]\n"
                ).encode()
                os.ftruncate(fd, self._head_cap)
                os.lseek(fd, self._head_cap, os.SEEK_SET)
                tail = self._tail()
                _write_all(fd, memoryview(marker))
                _write_all(fd, memoryview(tail))
                stored = self._head_cap + len(marker) + len(tail)
        finally:
            os.close(fd)
        return StreamCapture(self.path, self._total, stored, digest, truncated)

    def abandon(self) -> None:
        """Close the file without finishing it (the run is being torn down by an error)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        written = os.write(fd, view)
        view = view[written:]


# -- the run's processes --------------------------------------------------------------------


@dataclass(frozen=True)
class _Stat:
    state: str
    pgrp: int
    session: int
    starttime: int


def _read_proc(pid: int, name: str) -> bytes:
    """``/proc/<pid>/<name>`` whole. ``os`` calls, not ``open()``: a sweep reads two files
    of every process on the machine, and a buffered file object per read was most of it."""
    fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _read_stat(pid: int) -> _Stat | None:
    """Fields of /proc/<pid>/stat, or None when the process is gone or unreadable."""
    try:
        raw = _read_proc(pid, "stat")
        # comm (field 2) may hold spaces and parentheses: split after the LAST ')'.
        rest = raw[raw.rindex(b")") + 2 :].split()
        return _Stat(rest[0].decode(), int(rest[2]), int(rest[3]), int(rest[19]))
    except (OSError, ValueError, IndexError):
        return None


def _has_marker(pid: int, item: bytes) -> bool:
    try:
        env = _read_proc(pid, "environ")
    except OSError:  # gone, or not ours to read: not provably part of the run
        return False
    # The substring test first: almost every process on the machine fails it.
    return item in env and item in env.split(b"\0")


def _run_processes(sid: int, marker: str | None, *, in_session: bool) -> Iterator[tuple[int, int]]:
    """(pid, starttime) of live processes of the run: in session/group ``sid`` (when
    ``in_session``) or carrying the marker. Races (exits, pid reuse, EACCES) are skipped."""
    item = f"{MARKER_VAR}={marker}".encode() if marker else None
    me = os.getpid()
    try:
        names = os.listdir("/proc")  # noqa: PTH208 -- str names; Path objects per pid cost
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me:
            continue
        st = _read_stat(pid)
        if st is None or st.state in ("Z", "X"):  # zombies cannot be killed, only reaped
            continue
        same = st.session == sid or st.pgrp == sid
        if (in_session and same) or (item is not None and not same and _has_marker(pid, item)):
            yield pid, st.starttime


def _signal_pid(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def kill_run(sid: int, marker: str | None, *, rounds: int = 10) -> int:
    """SIGKILL every live process of a run (its session/group ``sid`` and marker bearers).

    Repeats until a scan finds nothing (a process may fork while being swept), at most
    ``rounds`` times. Returns how many distinct processes were killed.
    """
    killed: set[tuple[int, int]] = set()
    for _ in range(rounds):
        found = list(_run_processes(sid, marker, in_session=True))
        if not found:
            break
        for pid, start in found:
            _signal_pid(pid, signal.SIGKILL)
            killed.add((pid, start))
        time.sleep(0.005)  # let the kernel turn them into zombies before rescanning
    return len(killed)


# -- the run --------------------------------------------------------------------------------


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # kernel < 5.3 or seccomp: fall back to polling
        return None


def _exited(pid: int) -> bool:
    """Has the child exited? Leaves it a zombie (WNOWAIT) so its pid, process group and
    session ids cannot be reused while the survivors are swept."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


@contextlib.contextmanager
def signals_handled(handler: Callable[[int, object], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside this, the previous handlers are put back
    after: a supervisor (the auditor, the bench) stops its children and records what it
    has instead of dying with them. Only the main thread can install handlers; elsewhere
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_monitored(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout_path: Path,
    stderr_path: Path,
    timeout: float | None,
    combined_path: Path | None = None,
    grace: float = 30.0,
    cap_bytes: int = 8 * 1024 * 1024,
    redactor_factory: Callable[[], StreamRedactor] | None = None,
    marker: str | None = None,
    on_start: Callable[[int], None] | None = None,
    echo: Callable[[str, bytes], None] | None = None,
    stop_event: threading.Event | None = None,
    stop_reason: Callable[[], str] | None = None,
    term_group: bool = True,
) -> Completed:
    """Run ``argv`` to the end under supervision (see the module docstring for the contract).

    ``env`` is the child's whole environment; put ``RB_RUN_MARKER=<marker>`` in it (and in a
    sandbox's ``--setenv``) and pass the same ``marker`` so escaped processes can be found.
    ``on_start(pid)`` is called once the child exists (attach a sampler there); ``echo(name,
    chunk)`` gets each chunk of ``"stdout"``/``"stderr"`` as it is read, for a live terminal,
    and ``b""`` at the end of that stream. The chunks are raw (the log files' redactor holds
    back up to 64 KiB, which would make a terminal wait): the echo must redact them itself
    (``reprobridge.audit.executors`` does, line by line).
    ``stop_reason()`` names the interruption in the description (default "stop requested").
    ``combined_path`` also stores both streams as one, chunk by chunk in arrival order
    (capped and redacted the same way): "the last value printed" is only defined there, a
    value printed on stdout after one on stderr is later.

    ``term_group=False`` is for a wrapper that does not forward signals (bubblewrap: SIGTERM
    kills it, and ``--die-with-parent`` then SIGKILLs everything inside without a chance to
    clean up). SIGTERM then goes to the run's processes outside the child's session (found
    by ``marker``), the wrapper only gets the final SIGKILL; with nothing found, the group
    gets SIGTERM as usual.
    """
    if not argv:
        raise ValueError("argv is empty")
    if cap_bytes < 2:
        raise ValueError(f"cap_bytes must be at least 2, not {cap_bytes}")

    def redactor() -> StreamRedactor | None:
        return redactor_factory() if redactor_factory is not None else None

    out = _CappedStream(stdout_path, cap_bytes, redactor())
    try:
        err = _CappedStream(stderr_path, cap_bytes, redactor())
    except BaseException:
        out.abandon()
        raise
    streams = {"stdout": out, "stderr": err}
    if combined_path is not None:
        try:
            streams["combined"] = _CappedStream(combined_path, cap_bytes, redactor())
        except BaseException:
            out.abandon()
            err.abandon()
            raise
    started_at = _utc_now()
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        for s in streams.values():
            s.abandon()
        if exc.filename is not None and str(exc.filename) == str(cwd):
            raise AuditError(f"working directory {cwd} does not exist or is not usable") from exc
        if isinstance(exc, FileNotFoundError):
            raise MachineError(f"{argv[0]} is not installed or not on PATH") from exc
        raise MachineError(f"{argv[0]} cannot be executed: {exc.strerror}") from exc
    pid = proc.pid
    supervisor: _Supervisor | None = None
    reaped = False
    try:
        supervisor = _Supervisor(proc, streams, echo)
        if on_start is not None:
            on_start(pid)
        ended_by = supervisor.wait(
            deadline=None if timeout is None else t0 + timeout,
            grace=grace,
            stop_event=stop_event,
            marker=marker,
            term_group=term_group,
        )
        t_end = time.monotonic()
        finished_at = _utc_now()
        # The child is a zombie here: its ids are still reserved, so the sweep is exact.
        survivors = kill_run(pid, marker)
        _, status, rusage = os.wait4(pid, 0)
        reaped = True
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from reaping again
        supervisor.drain(time.monotonic() + DRAIN_S)
        captures = {name: s.close() for name, s in streams.items()}
    except BaseException:
        # An auditor-side error (callback, disk full, KeyboardInterrupt): leave nothing behind.
        # Once reaped, the pid may belong to someone else and the sweep has already run.
        if not reaped:
            _signal_group(pid, signal.SIGKILL)
            kill_run(pid, marker)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            proc.returncode = -9
        for s in streams.values():
            s.abandon()
        raise
    finally:
        if supervisor is not None:
            supervisor.close()
        else:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
    plain = Termination.from_returncode(proc.returncode)
    if ended_by is None:
        termination = plain
    else:
        how = (
            f"TERM, then KILL after {grace:g}s grace"
            if supervisor.killed
            else f"TERM; ended within the {grace:g}s grace as {plain.description}"
        )
        if ended_by == "timeout":
            assert timeout is not None
            desc = f"timeout after {timeout:g}s ({how})"
        else:
            reason = stop_reason() if stop_reason is not None else "stop requested"
            desc = f"interrupted ({reason}; {how})"
        termination = Termination(ended_by, proc.returncode, plain.signal, desc)
    return Completed(
        argv=tuple(argv),
        termination=termination,
        stdout=captures["stdout"],
        stderr=captures["stderr"],
        combined=captures.get("combined"),
        wall_s=t_end - t0,
        cpu_user_s=rusage.ru_utime,
        cpu_sys_s=rusage.ru_stime,
        started_at=started_at,
        finished_at=finished_at,
        pid=pid,
        survivors_killed=survivors,
    )


class _Supervisor:
    """The event loop of one run: pipes, exit (pidfd), deadline and stop, in one thread.

    One thread and a selector rather than a reader thread per pipe: a pipe held open by an
    escaped process can then be abandoned cleanly (closing an fd under a blocked reader
    thread is a race), and callbacks run on the caller's thread.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        streams: Mapping[str, _CappedStream],
        echo: Callable[[str, bytes], None] | None,
    ) -> None:
        self._proc = proc
        self._echo = echo
        self._tee = streams.get("combined")
        self._sel = selectors.DefaultSelector()
        self._open = 0
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            assert pipe is not None
            fd = pipe.fileno()
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _READ)
            os.set_blocking(fd, False)
            self._sel.register(fd, selectors.EVENT_READ, (name, streams[name]))
            self._open += 1
        self._pidfd = _pidfd(proc.pid)
        if self._pidfd is not None:
            self._sel.register(self._pidfd, selectors.EVENT_READ, None)
        self.killed = False

    def _read(self, key: selectors.SelectorKey) -> None:
        name, stream = key.data
        try:
            chunk = os.read(key.fd, _READ)
        except BlockingIOError:
            return
        if not chunk:
            self._sel.unregister(key.fd)
            self._open -= 1
            if self._echo is not None:
                self._echo(name, b"")  # end of stream: the echo shows what it still holds
            return
        stream.feed(chunk)
        if self._tee is not None:
            self._tee.feed(chunk)
        if self._echo is not None:
            self._echo(name, chunk)

    def wait(
        self,
        *,
        deadline: float | None,
        grace: float,
        stop_event: threading.Event | None,
        marker: str | None,
        term_group: bool,
    ) -> Literal["timeout", "interrupted"] | None:
        """Pump the pipes until the child exits; stop it on deadline or stop_event.

        Returns why we stopped it, or None when it ended by itself. The child is left a
        zombie (not reaped).
        """
        pid = self._proc.pid
        ended_by: Literal["timeout", "interrupted"] | None = None
        kill_at = 0.0
        while True:
            now = time.monotonic()
            if ended_by is None:
                if deadline is not None and now >= deadline:
                    ended_by = "timeout"
                elif stop_event is not None and stop_event.is_set():
                    ended_by = "interrupted"
                if ended_by is not None:
                    self._terminate(pid, marker, term_group)
                    kill_at = now + grace
            elif not self.killed and now >= kill_at:
                _signal_group(pid, signal.SIGKILL)
                kill_run(pid, marker)
                self.killed = True
            waits: list[float] = []
            if ended_by is None:
                if deadline is not None:
                    waits.append(deadline - now)
                if stop_event is not None:
                    waits.append(_STOP_POLL_S)
            elif not self.killed:
                waits.append(kill_at - now)
            if self._pidfd is None:
                waits.append(_EXIT_POLL_S)
            child_ready = self._pidfd is None
            for key, _ in self._sel.select(max(0.0, min(waits)) if waits else None):
                if key.data is None:
                    child_ready = True
                else:
                    self._read(key)
            if child_ready and _exited(pid):
                return ended_by

    def _terminate(self, pid: int, marker: str | None, term_group: bool) -> None:
        if term_group:
            _signal_group(pid, signal.SIGTERM)
            return
        # Behind a non-forwarding wrapper: TERM the payload (other sessions), not the wrapper.
        payload = [p for p, _ in _run_processes(pid, marker, in_session=False)]
        for p in payload:
            _signal_pid(p, signal.SIGTERM)
        if not payload:
            _signal_group(pid, signal.SIGTERM)

    def drain(self, until: float) -> None:
        """Read what is left in the pipes, until EOF on both or ``until`` (monotonic)."""
        if self._pidfd is not None:
            self._sel.unregister(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        while self._open > 0:
            left = until - time.monotonic()
            if left <= 0:
                return  # held open by something outside the run; what we have is stored
            for key, _ in self._sel.select(left):
                self._read(key)

    def close(self) -> None:
        self._sel.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        for pipe in (self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                pipe.close()
