"""Resource sampling of one run: its process tree from /proc, and the GPUs through NVML.

Contract of :class:`Sampler`: a daemon thread that, every ``interval`` seconds until
:meth:`Sampler.stop`, sums CPU use, resident memory, threads and processes over the run's
process tree (the root pid and its descendants), reads utilisation, memory, power and
temperature of every GPU, appends one JSON object per sample to ``timeline_path``
(JSON Lines, flushed every :data:`FLUSH_EVERY` samples) and keeps only running maxima:
memory stays bounded however long the run. :meth:`Sampler.stop` returns :class:`Peaks`.

CPU time of the whole tree (:attr:`Peaks.cpu_user_s`, :attr:`Peaks.cpu_sys_s`) is accounted
from /proc as well, because ``wait4`` on the root misses what a wrapper does not wait for:
bubblewrap's outer process exits without reaping the sandbox's init, so its rusage holds
bubblewrap's own few milliseconds, not the workload. Each snapshot sums, over every process
of the tree (zombies included), its own time plus the time of the children it has reaped
(``cutime``/``cstime``): a reaped child's time moves into its parent's, and inside a PID
namespace every orphan is reaped by the sandbox's init, which stays in the tree. Parents
are read before their children, so a process reaped mid-snapshot is missed, never counted
twice: each snapshot is a lower bound of the tree's CPU time, and the largest one is kept.
What runs after the last snapshot is missed, so snapshots for the account are taken every
:data:`ACCOUNT_S` seconds even when timeline lines are written less often.

The tree is walked from the root through ``/proc/<pid>/task/<tid>/children``: cost grows
with the run's own processes and threads, not with every process on the host, as
``psutil.Process.children(recursive=True)`` does (it reads every pid's parent each call).
Processes that escape the tree (a ``setsid`` double fork re-parents to init) are not
counted unless the run is in a PID namespace, where init is the sandbox's.

GPU numbers are per device (the whole GPU, other tenants included), not per process. No
NVML library, no driver, or NVML raising at start is a recorded :attr:`Peaks.gpu_state`,
never an exception; NVML raising mid-run ends GPU sampling with the error recorded and the
maxima read so far kept. NVML is a pynvml-shaped object as in :mod:`reprobridge._machine`
(the real ``pynvml`` module by default, a fake in tests), whose errors are classified by
the same helper.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from reprobridge._machine import Nvml, NvmlErrors, load_nvml, nvml_errors, nvml_text

#: Timeline lines are flushed to disk every this many samples (about once a second at
#: the default 10 Hz): a crash loses at most a second, and the sampler makes few syscalls.
FLUSH_EVERY = 10
NO_DRIVER = "no NVIDIA driver (CPU only)"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
#: Seconds between snapshots of the tree's CPU time (and of the maxima): what the account
#: misses at the end of a run is at most this much of the last processes' CPU time.
ACCOUNT_S = 0.1
#: NVML_TEMPERATURE_GPU, so a fake NVML needs no constants.
_TEMPERATURE_GPU = 0


@dataclass(frozen=True)
class Peaks:
    """Maxima over a run's samples.

    ``cpu_percent_max`` is summed over the tree (200 = two cores busy); ``rss_bytes_max``
    sums resident memory over the tree (shared pages count once per process);
    ``gpu`` has one dict per GPU index with ``util_max`` (%), ``mem_used_max`` (bytes),
    ``power_w_max`` and ``temp_c_max``; ``gpu_state`` is ``"ok"``,
    ``"no NVIDIA driver (CPU only)"`` or ``"NVML error: ..."``. ``sampler_cpu_s`` is the
    CPU time the sampler thread itself used (its overhead). ``cpu_user_s``/``cpu_sys_s`` are
    the tree's CPU time as the largest snapshot saw it (see the module docstring: a lower
    bound, short of the CPU used after the last snapshot).
    """

    samples: int
    cpu_percent_max: float
    rss_bytes_max: int
    threads_max: int
    procs_max: int
    gpu: list[dict[str, Any]] = field(default_factory=list)
    gpu_state: str = "ok"
    sampler_cpu_s: float = 0.0
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0


def _read(path: str) -> bytes:
    """A small /proc file in one read (os-level: ~3x cheaper than open().read())."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ProcStat:
    """What one sample needs from /proc/<pid>/stat."""

    ticks: int  # utime + stime
    threads: int
    rss_pages: int
    starttime: int
    zombie: bool
    user_total: int = 0  # utime + cutime: its own and its reaped children's, in ticks
    sys_total: int = 0  # stime + cstime


def read_stat(pid: int) -> ProcStat | None:
    """/proc/<pid>/stat parsed, or None when the process is gone."""
    try:
        raw = _read(f"/proc/{pid}/stat")
        # comm may hold spaces and ')': the fields start after the LAST ')'.
        f = raw[raw.rindex(b")") + 2 :].split()
        # f[0] is field 3 (state): utime 14, stime 15, cutime 16, cstime 17, num_threads 20,
        # starttime 22, rss 24.
        utime, stime, cutime, cstime = (int(x) for x in f[11:15])
        return ProcStat(
            utime + stime,
            int(f[17]),
            int(f[21]),
            int(f[19]),
            f[0] == b"Z",
            utime + cutime,
            stime + cstime,
        )
    except (OSError, ValueError, IndexError):
        return None


def walk_tree(root: int) -> list[int]:
    """``root`` and all its descendants, through each thread's ``children`` file.

    A child is listed under the thread that forked it, so every task is read. Returns []
    when ``root`` is gone; pids that vanish mid-walk are skipped.
    """
    seen: set[int] = set()
    order: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")  # noqa: PTH208 -- str names, hot path
        except OSError:
            continue
        seen.add(pid)
        order.append(pid)
        for tid in tids:
            try:
                stack.extend(int(c) for c in _read(f"/proc/{pid}/task/{tid}/children").split())
            except (OSError, ValueError):
                continue
    return order


class Sampler(threading.Thread):
    """Samples the process tree of ``root_pid`` (and the GPUs) until :meth:`stop`.

    ``clock`` is monotonic seconds (injectable for tests); ``nvml`` a pynvml-shaped object
    or None for the real ``pynvml``. Use: ``s = Sampler(pid, timeline_path=p); s.start();
    ...; peaks = s.stop()``. Never raises from the thread: an unreadable /proc entry is
    skipped, an NVML error is recorded; a failure to write the timeline is kept and
    re-raised by :meth:`stop` (the evidence would otherwise be silently incomplete).
    """

    def __init__(
        self,
        root_pid: int,
        *,
        interval: float = 0.1,
        timeline_path: Path,
        nvml: Nvml | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name=f"rb-sampler-{root_pid}", daemon=True)
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval}")
        self.root_pid = root_pid
        self.interval = interval
        self.timeline_path = timeline_path
        self._nvml_in = nvml
        self._clock = clock
        self._halt = threading.Event()
        self._error: BaseException | None = None
        # Running state (sampler thread only until stop() joins it).
        self._prev: dict[tuple[int, int], int] = {}  # (pid, starttime) -> ticks
        self._prev_t: float | None = None
        self._samples = 0
        self._cpu_max = 0.0
        self._rss_max = 0
        self._threads_max = 0
        self._procs_max = 0
        self._gpu_max: list[dict[str, Any]] = []
        self._gpu_state = "ok"
        self._nvml: Nvml | None = None
        self._errors: NvmlErrors | None = None
        self._handles: list[object] = []
        self._cpu_s = 0.0
        self._acct_user = 0  # ticks, of the largest snapshot of the tree's CPU time
        self._acct_sys = 0
        #: CPU seconds the thread spent before its first sample (importing and starting
        #: NVML), part of :attr:`Peaks.sampler_cpu_s`; set once the thread has started.
        self.startup_cpu_s = 0.0
        self._root_start: int | None = None

    # -- thread ----------------------------------------------------------------------------

    def run(self) -> None:
        t_cpu = time.thread_time()
        try:
            with self.timeline_path.open("a", encoding="utf-8") as out:
                self._gpu_open()
                self.startup_cpu_s = time.thread_time() - t_cpu
                try:
                    self._loop(out)
                finally:
                    out.flush()
                    self._gpu_close()
        except BaseException as exc:  # surfaced by stop(); a dying thread would hide it
            self._error = exc
        finally:
            self._cpu_s = time.thread_time() - t_cpu

    def _loop(self, out: IO[str]) -> None:
        t0 = self._clock()
        # Account snapshots every ACCOUNT_S at least; a timeline line every ``interval``.
        tick = min(self.interval, ACCOUNT_S)
        next_at = next_line = t0
        while True:
            # Half a tick of slack: timer jitter must not push a line to the next tick.
            line = self._clock() >= next_line - tick / 2
            self._sample(out, t0, line=line)
            if line:
                if self._samples % FLUSH_EVERY == 0:
                    out.flush()
                next_line += self.interval
            next_at += tick
            now = self._clock()
            if next_at < now:  # fell behind (suspended, loaded machine): do not burst
                next_at = now
                next_line = max(next_line, now)
            if self._halt.wait(max(0.0, next_at - now)):
                return

    def stop(self) -> Peaks:
        """Stop sampling (one last sample is not taken), join, and return the maxima."""
        self._halt.set()
        if self.is_alive():
            self.join()
        if self._error is not None:
            raise self._error
        return Peaks(
            samples=self._samples,
            cpu_percent_max=self._cpu_max,
            rss_bytes_max=self._rss_max,
            threads_max=self._threads_max,
            procs_max=self._procs_max,
            gpu=[dict(g) for g in self._gpu_max],
            gpu_state=self._gpu_state,
            sampler_cpu_s=self._cpu_s,
            cpu_user_s=self._acct_user / _CLK_TCK,
            cpu_sys_s=self._acct_sys / _CLK_TCK,
        )

    # -- one sample ------------------------------------------------------------------------

    def _sample(self, out: IO[str], t0: float, *, line: bool = True) -> None:
        """One snapshot: the CPU account and the maxima always; with ``line``, also the
        GPUs, the CPU percentage since the last line, and a timeline line."""
        now = self._clock()
        cpu_ticks = rss = threads = procs = user = system = 0
        current: dict[tuple[int, int], int] = {}
        for pid in walk_tree(self.root_pid):
            st = read_stat(pid)
            if pid == self.root_pid and not self._is_root(st):
                break  # the run is over and its pid was reused: nothing of ours is left
            if st is None:
                continue
            # A zombie's time is not yet in its parent's: it counts in the account.
            user += st.user_total
            system += st.sys_total
            if st.zombie:
                continue
            key = (pid, st.starttime)
            # A process born since the last line ran all its ticks within the interval.
            cpu_ticks += st.ticks - self._prev.get(key, 0)
            current[key] = st.ticks
            rss += st.rss_pages * _PAGE
            threads += st.threads
            procs += 1
        if user + system > self._acct_user + self._acct_sys:
            self._acct_user, self._acct_sys = user, system
        self._rss_max = max(self._rss_max, rss)
        self._threads_max = max(self._threads_max, threads)
        self._procs_max = max(self._procs_max, procs)
        if not line:
            return
        dt = now - self._prev_t if self._prev_t is not None else None
        cpu = 100.0 * cpu_ticks / _CLK_TCK / dt if dt else 0.0
        self._prev, self._prev_t = current, now
        gpus = self._gpu_sample()
        self._samples += 1
        self._cpu_max = max(self._cpu_max, cpu)
        record = {
            "t": round(now - t0, 3),
            "cpu_percent": round(cpu, 1),
            "rss_bytes": rss,
            "threads": threads,
            "procs": procs,
            "gpus": gpus,
        }
        out.write(json.dumps(record, separators=(",", ":")) + "\n")

    def _is_root(self, st: ProcStat | None) -> bool:
        """Is ``st`` still the run's root? Its starttime pins its identity against pid reuse."""
        if st is None:
            return False
        if self._root_start is None:
            self._root_start = st.starttime
        return st.starttime == self._root_start

    # -- GPUs ------------------------------------------------------------------------------

    def _gpu_open(self) -> None:
        nvml = load_nvml(self._nvml_in)
        if nvml is None:
            self._gpu_state = NO_DRIVER
            return
        errors = nvml_errors(nvml)
        try:
            nvml.nvmlInit()
        except errors.unavailable:
            self._gpu_state = NO_DRIVER
            return
        except errors.base as exc:
            self._gpu_state = f"NVML error: {nvml_text(exc)}"
            return
        self._nvml, self._errors = nvml, errors
        try:
            count = int(nvml.nvmlDeviceGetCount())
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except errors.base as exc:
            self._gpu_failed(exc)
            return
        self._gpu_max = [
            {"index": i, "util_max": 0, "mem_used_max": 0, "power_w_max": 0.0, "temp_c_max": 0}
            for i in range(len(self._handles))
        ]

    def _gpu_sample(self) -> list[dict[str, Any]]:
        nvml, errors = self._nvml, self._errors
        if nvml is None or errors is None:
            return []
        rows: list[dict[str, Any]] = []
        try:
            for i, h in enumerate(self._handles):
                row = {
                    "index": i,
                    "util": int(nvml.nvmlDeviceGetUtilizationRates(h).gpu),
                    "mem_used": int(nvml.nvmlDeviceGetMemoryInfo(h).used),
                    "power_w": round(nvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 1),  # mW
                    "temp_c": int(nvml.nvmlDeviceGetTemperature(h, _TEMPERATURE_GPU)),
                }
                rows.append(row)
        except errors.base as exc:
            self._gpu_failed(exc)
            return []
        for row, peak in zip(rows, self._gpu_max, strict=True):
            peak["util_max"] = max(peak["util_max"], row["util"])
            peak["mem_used_max"] = max(peak["mem_used_max"], row["mem_used"])
            peak["power_w_max"] = max(peak["power_w_max"], row["power_w"])
            peak["temp_c_max"] = max(peak["temp_c_max"], row["temp_c"])
        return rows

    def _gpu_failed(self, exc: BaseException) -> None:
        """Record the error, stop GPU sampling, keep the maxima read so far."""
        self._gpu_state = f"NVML error: {nvml_text(exc)}"
        self._gpu_close()

    def _gpu_close(self) -> None:
        nvml, errors = self._nvml, self._errors
        self._nvml = None
        if nvml is not None and errors is not None:
            # The numbers are recorded; a failing shutdown changes nothing in them.
            with contextlib.suppress(*errors.base):
                nvml.nvmlShutdown()
