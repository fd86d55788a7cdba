"""run_monitored against real children: exits, signals, timeouts, escapes, huge and odd output."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from procs import alive_with_arg, unique_sleep

from reprobridge._proc.monitored import (
    MARKER_VAR,
    Completed,
    Termination,
    _CappedStream,
    run_monitored,
)
from reprobridge.errors import AuditError, MachineError

PY = sys.executable


def _env(marker: str | None = None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if marker:
        env[MARKER_VAR] = marker
    return env


def run(tmp_path: Path, argv: list[str], *, marker: str | None = None, **kw) -> Completed:
    kw.setdefault("timeout", 10)
    kw.setdefault("grace", 0.5)
    return run_monitored(
        argv,
        cwd=tmp_path,
        env=_env(marker),
        stdout_path=tmp_path / "stdout.log",
        stderr_path=tmp_path / "stderr.log",
        marker=marker,
        **kw,
    )


# -- termination ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 3])
def test_exit_codes(tmp_path, code):
    done = run(tmp_path, ["bash", "-c", f"echo out; echo err >&2; exit {code}"])
    assert done.termination == Termination("exit", code, None, f"exit({code})")
    assert (tmp_path / "stdout.log").read_bytes() == b"out\n"
    assert (tmp_path / "stderr.log").read_bytes() == b"err\n"
    assert done.stdout.total_bytes == 4 and not done.stdout.truncated
    assert done.stdout.sha256 == hashlib.sha256(b"out\n").hexdigest()
    assert done.survivors_killed == 0 and done.pid > 0
    assert done.argv == ("bash", "-c", f"echo out; echo err >&2; exit {code}")
    start = datetime.fromisoformat(done.started_at)
    end = datetime.fromisoformat(done.finished_at)
    assert start.utcoffset() is not None and start.utcoffset().total_seconds() == 0
    assert start <= end and done.wall_s >= 0


@pytest.mark.parametrize(
    ("rc", "kind", "sig", "description"),
    [
        (0, "exit", None, "exit(0)"),
        (1, "exit", None, "exit(1)"),
        (128, "exit", None, "exit(128)"),
        (255, "exit", None, "exit(255)"),
        (-15, "signal", 15, "signal(15)"),
        (143, "signal", 15, "signal(15) (shell exit 143)"),
        (-9, "killed", 9, "killed-9 (possible OOM)"),
        (137, "killed", 9, "killed-9 (possible OOM; shell exit 137)"),
    ],
)
def test_returncode_classification(rc, kind, sig, description):
    t = Termination.from_returncode(rc)
    assert (t.kind, t.returncode, t.signal, t.description) == (kind, rc, sig, description)


def test_sigkill_is_killed_possible_oom(tmp_path):
    done = run(tmp_path, ["bash", "-c", "echo before; kill -9 $$"])
    assert done.termination.kind == "killed"
    assert done.termination.description == "killed-9 (possible OOM)"
    assert done.termination.returncode == -9
    assert (tmp_path / "stdout.log").read_bytes() == b"before\n"


def test_bash_wrapping_a_killed_child_maps_137(tmp_path):
    done = run(tmp_path, ["bash", "-c", "bash -c 'kill -9 $$'; exit $?"])
    assert done.termination.kind == "killed" and done.termination.returncode == 137


def test_timeout_term_then_kill_when_term_is_ignored(tmp_path):
    t0 = time.monotonic()
    done = run(
        tmp_path,
        ["bash", "-c", "trap '' TERM; echo started; sleep 1000"],
        timeout=0.5,
        grace=0.5,
    )
    elapsed = time.monotonic() - t0
    assert done.termination.kind == "timeout"
    assert done.termination.signal == 9
    assert done.termination.description == "timeout after 0.5s (TERM, then KILL after 0.5s grace)"
    assert 0.95 <= elapsed < 5
    assert (tmp_path / "stdout.log").read_bytes() == b"started\n"  # partial log kept


def test_timeout_term_is_enough_for_a_polite_child(tmp_path):
    done = run(tmp_path, ["sleep", "1000"], timeout=0.3, grace=5)
    assert done.termination.kind == "timeout" and done.termination.signal == 15
    assert "ended within the 5s grace as signal(15)" in done.termination.description
    assert done.wall_s < 3


def test_stop_event_interrupts(tmp_path):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    done = run(
        tmp_path,
        ["bash", "-c", "trap 'echo bye; exit 0' TERM; while :; do sleep 0.05; done"],
        stop_event=stop,
        stop_reason=lambda: "SIGINT to the auditor",
    )
    assert done.termination.kind == "interrupted"
    assert done.termination.description.startswith("interrupted (SIGINT to the auditor;")
    assert done.termination.returncode == 0
    assert (tmp_path / "stdout.log").read_bytes() == b"bye\n"
    assert done.wall_s < 3


def test_cpu_times_from_wait4(tmp_path):
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"
    done = run(tmp_path, [PY, "-c", burn])
    assert done.termination.kind == "exit"
    assert done.cpu_user_s + done.cpu_sys_s >= 0.25


# -- escapes --------------------------------------------------------------------------------


def test_setsid_double_fork_is_killed_by_the_marker_sweep(tmp_path):
    arg = unique_sleep()
    marker = uuid.uuid4().hex
    # The pause lets the daemon leave the session first, so only the marker can find it.
    argv = ["bash", "-c", f"(setsid sleep {arg} &); sleep 0.2; exit 0"]
    done = run(tmp_path, argv, marker=marker)
    assert done.termination.kind == "exit"
    assert done.survivors_killed >= 1
    time.sleep(0.05)
    assert alive_with_arg(arg) == []


def test_background_child_in_the_group_is_killed(tmp_path):
    arg = unique_sleep()
    done = run(tmp_path, ["bash", "-c", f"sleep {arg} & exit 0"])  # no marker: group sweep
    assert done.survivors_killed == 1
    assert alive_with_arg(arg) == []


def test_escape_without_marker_is_not_found_but_pipes_do_not_hang(tmp_path, monkeypatch):
    """A setsid daemon that holds stdout, no marker: the drain gives up after DRAIN_S."""
    import reprobridge._proc.monitored as monitored

    monkeypatch.setattr(monitored, "DRAIN_S", 0.3)
    arg = unique_sleep()
    try:
        t0 = time.monotonic()
        done = run(tmp_path, ["bash", "-c", f"(setsid sleep {arg} &); sleep 0.2; echo hi; exit 0"])
        assert time.monotonic() - t0 < 3
        assert done.termination.kind == "exit" and done.survivors_killed == 0
        assert (tmp_path / "stdout.log").read_bytes() == b"hi\n"
    finally:
        for pid in alive_with_arg(arg):
            os.kill(pid, 9)


def test_error_in_on_start_kills_the_run(tmp_path):
    arg = unique_sleep()

    def boom(pid: int) -> None:
        time.sleep(0.2)  # let the child start its own child
        raise RuntimeError("sampler failed")

    with pytest.raises(RuntimeError, match="sampler failed"):
        run(tmp_path, ["bash", "-c", f"sleep {arg}; true"], on_start=boom)
    assert alive_with_arg(arg) == []


def test_on_start_and_echo(tmp_path):
    seen: list[int] = []
    chunks: list[tuple[str, bytes]] = []
    done = run(
        tmp_path,
        ["bash", "-c", "echo a; echo b >&2"],
        on_start=seen.append,
        echo=lambda name, chunk: chunks.append((name, chunk)),
    )
    assert seen == [done.pid]
    assert b"".join(c for n, c in chunks if n == "stdout") == b"a\n"
    assert b"".join(c for n, c in chunks if n == "stderr") == b"b\n"


def test_missing_program_is_a_machine_error(tmp_path):
    with pytest.raises(MachineError, match="rb-no-such-program"):
        run(tmp_path, ["rb-no-such-program-xyz"])


def test_missing_cwd_is_an_audit_error(tmp_path):
    with pytest.raises(AuditError, match="working directory"):
        run_monitored(
            ["true"],
            cwd=tmp_path / "absent",
            env=_env(),
            stdout_path=tmp_path / "o",
            stderr_path=tmp_path / "e",
            timeout=5,
        )


# -- output ---------------------------------------------------------------------------------

_GEN = """
import hashlib, sys
w = sys.stdout.buffer.write
i = 0
n = 0
while n < {size}:
    line = hashlib.sha256(str(i).encode()).hexdigest().encode() * 3 + b"\\n"
    w(line)
    n += len(line)
    i += 1
"""


def expected_generated(size: int) -> bytes:
    out = bytearray()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(str(i).encode()).hexdigest().encode() * 3 + b"\n"
        i += 1
    return bytes(out)


def capped(data: bytes, cap: int) -> bytes:
    if len(data) <= cap:
        return data
    head, tail = cap // 2, cap - cap // 2
    digest = hashlib.sha256(data).hexdigest()
    marker = (
        f"\n[... rb: {len(data) - head - tail} bytes omitted; full stream sha256={digest} "
        f"size={len(data)} ...]\n"
    ).encode()
    return data[:head] + marker + data[-tail:]


def test_twenty_megabytes_capped_to_one(tmp_path):
    size = 20 * 1024 * 1024
    done = run(tmp_path, [PY, "-c", _GEN.format(size=size)], cap_bytes=1 << 20)
    full = expected_generated(size)
    assert done.stdout.total_bytes == len(full)
    assert done.stdout.sha256 == hashlib.sha256(full).hexdigest()
    assert done.stdout.truncated
    stored = (tmp_path / "stdout.log").read_bytes()
    assert stored == capped(full, 1 << 20)
    assert done.stdout.stored_bytes == len(stored)
    assert b"bytes omitted; full stream sha256=" in stored


def test_endless_line_and_invalid_utf8(tmp_path):
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'a' * 5_000_000)\n"  # 5 MB, no newline
        "sys.stderr.buffer.write(b'\\xff\\xfe\\x80 not utf-8 \\xc3\\x28' * 1000)\n"
    )
    done = run(tmp_path, [PY, "-c", code], cap_bytes=1 << 20)
    line = b"a" * 5_000_000
    assert done.stdout.total_bytes == 5_000_000 and done.stdout.truncated
    assert done.stdout.sha256 == hashlib.sha256(line).hexdigest()
    assert (tmp_path / "stdout.log").read_bytes() == capped(line, 1 << 20)
    junk = b"\xff\xfe\x80 not utf-8 \xc3\x28" * 1000
    assert (tmp_path / "stderr.log").read_bytes() == junk and not done.stderr.truncated


class HoldBackUpper:
    """A redactor fake: upper-cases and holds back the last byte until flush."""

    def __init__(self) -> None:
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.held + chunk
        self.held = data[-1:]
        return data[:-1].upper()

    def flush(self) -> bytes:
        out, self.held = self.held.upper(), b""
        return out


def test_redactor_applies_before_hash_and_store(tmp_path):
    made: list[HoldBackUpper] = []

    def factory() -> HoldBackUpper:
        made.append(HoldBackUpper())
        return made[-1]

    echoed: list[bytes] = []
    done = run(
        tmp_path,
        ["bash", "-c", "printf 'secret stuff'; printf 'err' >&2"],
        redactor_factory=factory,
        echo=lambda name, chunk: echoed.append(chunk) if name == "stdout" else None,
        cap_bytes=8,
    )
    assert len(made) == 2  # one per stream
    assert done.stdout.sha256 == hashlib.sha256(b"SECRET STUFF").hexdigest()
    assert done.stdout.total_bytes == 12
    assert (tmp_path / "stdout.log").read_bytes() == capped(b"SECRET STUFF", 8)
    assert (tmp_path / "stderr.log").read_bytes() == b"ERR"
    # The echo gets the raw chunks as they are read, then b"" (it redacts them itself, line
    # by line: LineEcho); the stored stream never holds them unredacted.
    assert b"".join(echoed) == b"secret stuff" and echoed[-1] == b""


def test_line_echo_redacts_each_line_without_waiting(monkeypatch) -> None:
    import io

    from reprobridge.audit.executors import LineEcho
    from reprobridge.evidence.redact import Redactor

    out = io.BytesIO()
    echo = LineEcho(Redactor({"TOKEN": "hunter2hunter2"}), out)
    echo.feed(b"first line\nkey=hunter2")
    assert out.getvalue() == b"first line\n"  # shown at once; the partial line waits
    echo.feed(b"hunter2 done\n")
    assert b"hunter2" not in out.getvalue() and out.getvalue().endswith(b" done\n")
    echo.feed(b"tail without newline")
    echo.feed(b"")
    assert out.getvalue().endswith(b"tail without newline")


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=0, max_size=40), max_size=30),
    cap=st.integers(min_value=2, max_value=64),
)
def test_capped_stream_matches_the_reference(chunks, cap):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log"
        stream = _CappedStream(path, cap, None)
        for chunk in chunks:
            stream.feed(chunk)
        got = stream.close()
        data = b"".join(chunks)
        assert path.read_bytes() == capped(data, cap)
        assert got.total_bytes == len(data) and got.truncated == (len(data) > cap)
        assert got.stored_bytes == path.stat().st_size
        assert got.sha256 == hashlib.sha256(data).hexdigest()
