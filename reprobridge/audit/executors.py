"""Where a run's process executes: the seam for cluster execution.

The auditor decides *what* runs (argv, environment, workspace, limits) and judges the
evidence; an :class:`Executor` only makes the process happen and hands back how it ended,
its capped logs and its resource peaks. :class:`LocalExecutor` runs on this machine, in
bubblewrap when it works. A Slurm executor is a new module implementing the same protocol
(submit, stream the logs into ``run_dir``, map the job's end to a Termination); nothing
else changes.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from reprobridge._proc.monitored import Completed, run_monitored
from reprobridge.audit.limits import pids_cgroup, run_cgroups
from reprobridge.audit.monitor import Peaks, Sampler
from reprobridge.constants import COMBINED_LOG
from reprobridge.evidence.redact import Redactor
from reprobridge.sandbox import SandboxSpec, wrap


@dataclass(frozen=True, kw_only=True)
class Isolated:
    """A command that runs with a run's isolation: in ``workspace``, with exactly ``env``,
    network only when ``network``, read-only ``ro_binds`` and at most ``max_processes``;
    stopped after ``timeout_s``; ``marker`` tags its processes, ``redactor`` its output."""

    argv: tuple[str, ...]
    workspace: Path
    env: dict[str, str]
    timeout_s: float
    marker: str
    redactor: Redactor
    network: bool = False
    ro_binds: tuple[Path, ...] = ()
    max_processes: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunRequest(Isolated):
    """Everything an executor needs for one run; ``env`` is the run's whole environment."""

    run_dir: Path
    stop_event: threading.Event
    stop_reason: Callable[[], str]
    gpu: bool = False
    #: The manifest's hardware request (a scheduler asks for it; a local run only records it).
    gpus: int = 0
    cpus: int | None = None
    memory_gb: float | None = None
    grace: float = 30.0
    sample_interval: float = 0.5
    echo: bool = False


@dataclass(frozen=True, kw_only=True)
class StepRequest(Isolated):
    """A short command that belongs to a run but is not the experiment: making its
    environment (a devShell's ``shellHook``, a sandboxed ``uv sync``) or listing its
    packages. It runs where the run runs, with the run's isolation: the same workspace
    and binds, exactly ``env``, network only when ``network``. Its output goes to
    ``stdout_path``/``stderr_path`` (capped at ``cap_bytes``, redacted with ``redactor``).
    """

    stdout_path: Path
    stderr_path: Path
    rw_binds: tuple[Path, ...] = ()
    cap_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class Placement:
    """Where a scheduler put the run: recorded in the run record as ``placement``.

    ``attempts`` lists every submission (job id, final state, reason, node) in order, so a
    resubmission after a node failure is visible in the evidence.
    """

    executor: str
    job_id: str | None = None
    node: str | None = None
    state: str | None = None
    reason: str | None = None
    attempts: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class RunOutput:
    """How the run ended, its resource peaks (None when not sampled), where it ran.

    ``isolation`` is "bubblewrap" or why not; ``placement`` is set by scheduler executors;
    ``cgroup_cpu`` is the run's CPU time from its cgroup, where one could be made.
    """

    completed: Completed
    peaks: Peaks | None
    isolation: str
    placement: Placement | None = None
    cgroup_cpu: CpuTime | None = None


@dataclass(frozen=True)
class CpuTime:
    """User and system CPU seconds of a run's whole process tree, and where they come from:
    ``rusage`` (``wait4`` on the run's direct child) or ``sampled`` (the sampler's snapshots
    of the tree, :class:`~reprobridge.audit.monitor.Peaks`)."""

    user_s: float
    sys_s: float
    source: str


def workload_cpu(
    completed: Completed, peaks: Peaks | None, cgroup: CpuTime | None = None
) -> CpuTime:
    """The run's CPU time: the kernel's account of its cgroup (``cgroup``: every process
    that ran in it, to the end) where the executor could make one; else the larger of two
    lower bounds.

    ``wait4`` counts the child and what it waited for: exact for a plain process tree, but
    only bubblewrap's own milliseconds behind it (bubblewrap exits without reaping the
    sandbox's init). The sampler's account sees the tree inside the sandbox but misses the
    time after its last snapshot. Both undercount, never overcount, so the larger is kept.
    """
    if cgroup is not None:
        return cgroup
    waited = CpuTime(completed.cpu_user_s, completed.cpu_sys_s, "rusage")
    if peaks is None or peaks.cpu_user_s + peaks.cpu_sys_s <= waited.user_s + waited.sys_s:
        return waited
    return CpuTime(peaks.cpu_user_s, peaks.cpu_sys_s, "sampled")


class Executor(Protocol):
    """Runs one request to its end.

    Contract: writes ``stdout.log``, ``stderr.log``, ``output.log`` (both streams in
    arrival order; :data:`~reprobridge.constants.COMBINED_LOG`) and ``timeline.jsonl`` into
    ``request.run_dir`` (logs redacted with ``request.redactor`` and capped), enforces
    ``timeout_s`` (TERM, ``grace``, KILL of everything the run started) and
    ``stop_event``, and never raises for a failing or killed run.
    """

    name: str

    def execute(self, request: RunRequest) -> RunOutput: ...

    def run_step(self, request: StepRequest) -> Completed:
        """Run a setup or probe step (see :class:`StepRequest`) to its end; never raises
        for a failing step."""
        ...


@runtime_checkable
class BatchExecutor(Executor, Protocol):
    """An executor that takes every run of an experiment at once (a scheduler's job array).

    Contract of :meth:`execute_batch`: the outputs in the order of ``requests``, each as
    :meth:`Executor.execute` would return it, or None for a run left running on purpose
    (detached: submitted, its job known by id to a later resume); ``stop_event`` of any
    request stops them all.
    """

    def execute_batch(self, requests: Sequence[RunRequest]) -> list[RunOutput | None]: ...


class LineEcho:
    """A run's output shown live: each completed line, redacted, as soon as it is read.

    Secrets are single-line tokens, so redacting whole lines catches one split across read
    chunks. A line longer than :attr:`MAX_HELD` bytes is shown (redacted) without waiting
    for its end. ``feed(b"")`` marks the end of the stream and shows the rest.
    """

    MAX_HELD = 1 << 16

    def __init__(self, redactor: Redactor, out: BinaryIO) -> None:
        self._redactor = redactor
        self._out = out
        self._held = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._held += chunk
        cut = len(self._held) if not chunk else self._held.rfind(b"\n") + 1
        if cut == 0 and len(self._held) > self.MAX_HELD:
            cut = len(self._held)
        if cut == 0:
            return
        data, self._held = bytes(self._held[:cut]), self._held[cut:]
        self._out.write(self._redactor.redact_bytes(data))
        self._out.flush()


class LocalExecutor:
    """This machine; in bubblewrap unless ``unsandboxed`` says why not."""

    name = "local"

    def __init__(self, *, unsandboxed: str | None = None) -> None:
        self.unsandboxed = unsandboxed

    def _wrap(
        self,
        request: Isolated,
        *,
        gpu: bool = False,
        rw_binds: tuple[Path, ...] = (),
    ) -> list[str]:
        """The argv that runs ``request`` here: in bubblewrap with its workspace, binds,
        environment, network and process limit; as it is when unsandboxed."""
        argv = list(request.argv)
        if self.unsandboxed is not None:
            return argv
        spec = SandboxSpec(
            workdir=request.workspace.parent,
            cwd=request.workspace,
            ro_binds=tuple(p for p in dict.fromkeys(request.ro_binds) if p.exists()),
            rw_binds=tuple(dict.fromkeys(rw_binds)),
            network=request.network,
            gpu=gpu,
            env=request.env,
            max_processes=request.max_processes,
        )
        return wrap(argv, spec)

    def run_step(self, request: StepRequest) -> Completed:
        argv = self._wrap(request, rw_binds=request.rw_binds)
        with pids_cgroup(request.max_processes) as join:
            return run_monitored(
                [*join, *argv],
                cwd=request.workspace,
                env=request.env,
                stdout_path=request.stdout_path,
                stderr_path=request.stderr_path,
                timeout=request.timeout_s,
                grace=5.0,
                cap_bytes=request.cap_bytes,
                redactor_factory=request.redactor.stream,
                marker=request.marker,
                term_group=self.unsandboxed is not None,
            )

    def execute(self, request: RunRequest) -> RunOutput:
        sandboxed = self.unsandboxed is None
        argv = self._wrap(request, gpu=request.gpu)
        sampler: Sampler | None = None

        def on_start(pid: int) -> None:
            nonlocal sampler
            sampler = Sampler(
                pid,
                interval=request.sample_interval,
                timeline_path=request.run_dir / "timeline.jsonl",
            )
            sampler.start()

        live = {
            "stdout": LineEcho(request.redactor, sys.stdout.buffer),
            "stderr": LineEcho(request.redactor, sys.stderr.buffer),
        }

        def echo(stream: str, chunk: bytes) -> None:
            live[stream].feed(chunk)

        with run_cgroups(request.max_processes) as groups:
            completed = run_monitored(
                [*groups.join, *argv],
                cwd=request.workspace,
                env=request.env,
                stdout_path=request.run_dir / "stdout.log",
                stderr_path=request.run_dir / "stderr.log",
                combined_path=request.run_dir / COMBINED_LOG,
                timeout=request.timeout_s,
                grace=request.grace,
                redactor_factory=request.redactor.stream,
                marker=request.marker,
                on_start=on_start,
                echo=echo if request.echo else None,
                stop_event=request.stop_event,
                stop_reason=request.stop_reason,
                # Inside bubblewrap TERM must reach the experiment, not bwrap (which would
                # SIGKILL everything at once and take the grace period away).
                term_group=not sandboxed,
            )
        peaks = sampler.stop() if sampler is not None else None
        cgroup_cpu = CpuTime(*groups.cpu, "cgroup") if groups.cpu is not None else None
        return RunOutput(
            completed,
            peaks,
            "bubblewrap" if sandboxed else str(self.unsandboxed),
            cgroup_cpu=cgroup_cpu,
        )
