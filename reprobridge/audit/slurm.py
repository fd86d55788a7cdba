"""The Slurm executor: every run of an audit becomes one Slurm batch job.

The job runs :mod:`reprobridge.audit.slurm_job` on the node, which executes the request with
the same :class:`~reprobridge.audit.executors.LocalExecutor` a local audit uses (bubblewrap
when the node has it, the same cleared environment, the same capped and redacted logs) and
writes ``result.json`` plus the node's fingerprint. This side submits, waits, cancels on a
stop, and copies the job's evidence into the run directory, so a Slurm run's evidence has
the layout of a local one plus ``node.json`` and ``scheduler.log``, and ``placement`` in the
run record (executor, job ids, node, Slurm state and reason).

Where things must be shared between the submitting host and the nodes: the job directory
(``<evidence>/.slurm/``), the run workspace (``TMPDIR`` of the submitting process), the
interpreter running rb, and the backend's environment (uv cache or Nix store).

State comes from ``squeue`` while the job is known to the controller and ``scontrol show
job`` after it (``sacct`` is not required: accounting is often off). The run's own status
comes from the job's ``result.json``, never from Slurm's exit code.

Scheduler outcomes are termination kinds of their own (``scheduler``), with Slurm's state in
the description: ``slurm NODE_FAIL``, ``slurm OUT_OF_MEMORY``, ``slurm: not scheduled: …``.
Jobs that ended for infrastructure reasons (node failure, preemption, boot failure) are
resubmitted up to ``max_resubmits`` times, each attempt recorded; a run that failed on its
own merits never is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge._fs import write_atomic
from reprobridge._log import emit
from reprobridge._proc.monitored import Completed, StreamCapture, Termination
from reprobridge.audit.executors import (
    LocalExecutor,
    Placement,
    RunOutput,
    RunRequest,
    StepRequest,
)
from reprobridge.audit.monitor import Peaks
from reprobridge.errors import AuditError, MachineError

#: Slurm states after which the job is gone for infrastructure reasons: resubmitted.
INFRA_STATES = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})
#: Pending reasons that never clear by waiting: reported at once instead of waited on.
NEVER_SCHEDULED = frozenset(
    {
        "BadConstraints",
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "InvalidAccount",
        "InvalidQOS",
        "QOSMaxGRESPerJob",
        "QOSMaxCpuPerJobLimit",
        "QOSMaxMemoryPerJob",
        "QOSMaxWallDurationPerJobLimit",
        "ReqNodeNotAvail, UnavailableNodes",
        "DependencyNeverSatisfied",
    }
)
#: Seconds past the run's own timeout and grace before Slurm's time limit: the node-side
#: executor stops the run itself; Slurm's limit is only the backstop.
TIME_MARGIN_S = 120.0


@dataclass(frozen=True)
class SlurmOptions:
    """The operator's Slurm settings (flags: --partition, --account, --qos, --slurm-opt).

    ``extra`` holds ``--slurm-opt KEY=VALUE`` pairs, written as ``#SBATCH --KEY=VALUE``.
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    poll_interval: float = 1.0
    max_resubmits: int = 2
    #: Seconds to wait for a job that Slurm keeps pending (None: as long as it takes).
    pending_timeout: float | None = None


@dataclass(frozen=True)
class JobResources:
    """What one run asks the scheduler for (the manifest's ``hardware`` and ``timeout``)."""

    gpus: int = 0
    cpus: int | None = None
    memory_gb: float | None = None
    time_s: float = 3600.0
    grace_s: float = 30.0


def parse_slurm_opts(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["KEY=VALUE", ...]`` -> pairs; raises AuditError naming a malformed one."""
    pairs: list[tuple[str, str]] = []
    for raw in values:
        key, sep, value = raw.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key or any(c.isspace() for c in key) or "\n" in value:
            raise AuditError(
                f"--slurm-opt {raw!r}: expected KEY=VALUE (e.g. constraint=a100)",
                hint="each --slurm-opt becomes one '#SBATCH --KEY=VALUE' line",
            )
        pairs.append((key, value))
    return tuple(pairs)


def batch_header(
    job_name: str, resources: JobResources, opts: SlurmOptions, output: Path
) -> list[str]:
    """The ``#SBATCH`` lines of one run's job script (deterministic for the same inputs)."""
    minutes = max(1, math.ceil((resources.time_s + resources.grace_s + TIME_MARGIN_S) / 60))
    lines = [
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --output={output}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --time={minutes}",
        # TERM to the batch shell (our node-side executor) before the limit: it stops the
        # run with its own grace period and still writes result.json.
        f"#SBATCH --signal=B:TERM@{max(30, int(resources.grace_s) + 30)}",
        # The job's environment is the run's, from the spec; nothing of the submitter's.
        "#SBATCH --export=NONE",
    ]
    if resources.cpus:
        lines.append(f"#SBATCH --cpus-per-task={resources.cpus}")
    if resources.memory_gb:
        lines.append(f"#SBATCH --mem={math.ceil(resources.memory_gb * 1024)}M")
    if resources.gpus:
        lines.append(f"#SBATCH --gres=gpu:{resources.gpus}")
    for flag, value in (
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
    ):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    lines.extend(f"#SBATCH --{key}={value}" for key, value in opts.extra)
    return lines


def job_script(header: list[str], spec: Path) -> str:
    """The whole job script: the header, then the node-side executor on ``spec``."""
    package_parent = Path(__file__).resolve().parents[2]
    return "\n".join(
        [
            "#!/bin/bash",
            *header,
            "# Written by rb audit --executor slurm; runs one audited run on the node.",
            f"export PYTHONPATH={shlex.quote(str(package_parent))}",
            f"exec {shlex.quote(sys.executable)} -m reprobridge.audit.slurm_job "
            f"{shlex.quote(str(spec))}",
            "",
        ]
    )


@dataclass
class _JobState:
    state: str
    reason: str = ""
    node: str = ""
    exit_code: str = ""


def _placement(
    job_id: str | None, node: str, final: _JobState, attempts: list[dict[str, str]]
) -> Placement:
    """The run record's ``placement``: the last job, where it ran, its end, every attempt."""
    return Placement(
        executor="slurm",
        job_id=job_id,
        node=node or None,
        state=final.state,
        reason=final.reason,
        attempts=tuple(dict(a) for a in attempts),
    )


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """A Slurm client command; a hung or missing client is a failed call, never a crash."""
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 1, "", f"{argv[0]}: {exc}")


@dataclass
class SlurmExecutor:
    """Runs each request as a Slurm batch job (see the module docstring for the contract)."""

    options: SlurmOptions = field(default_factory=SlurmOptions)
    #: ``"auto"``/``"on"``/``"off"``: whether the node-side run uses bubblewrap.
    sandbox: str = "auto"
    runner: Runner = _run
    name: str = "slurm"

    # -- the Executor protocol --------------------------------------------------------------

    def execute(self, request: RunRequest) -> RunOutput:
        job_dir = self._job_dir(request)
        job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        record_path = job_dir / "job.json"
        attempts: list[dict[str, str]] = []
        job_id: str | None = None
        adopt: Path | None = None  # the killed auditor's workspace the attached job runs in
        if record_path.is_file():
            # A resumed audit: the job submitted before the auditor died is found by id.
            previous = json.loads(record_path.read_text())
            attempts = list(previous.get("attempts", []))
            job_id = previous.get("job_id")
            old_ws = Path(previous.get("workspace", ""))
            if job_id and self._still_useful(job_id, job_dir):
                emit("run-attached", job_id=job_id)
                adopt = old_ws
            else:
                job_id = None
        while True:
            if job_id is None:
                submitted = self._submit(request, job_dir, attempts)
                if isinstance(submitted, RunOutput):
                    return submitted
                job_id = submitted
            final = self._wait(job_id, request)
            if adopt is not None:
                # Only now that the job has ended: its files replace the fresh workspace.
                self._adopt_workspace(adopt, request.workspace)
                adopt = None
            attempts[-1:] = [
                {
                    **(attempts[-1] if attempts else {}),
                    "job_id": job_id,
                    "state": final.state,
                    "reason": final.reason,
                    "node": final.node,
                }
            ]
            self._save(record_path, job_id, request, attempts)
            result = job_dir / "run" / "result.json"
            if result.is_file():
                return self._collect(request, job_dir, final, attempts, job_id)
            if final.state in INFRA_STATES and len(attempts) <= self.options.max_resubmits:
                emit("run-resubmit", job_id=job_id, state=final.state)
                job_id = None
                continue
            return self._scheduler_outcome(request, job_dir, final, attempts, job_id)

    def run_step(self, request: StepRequest) -> Completed:
        """Setup and probe steps run on the submitting host, in the workspace the nodes
        share, with the isolation a local run gets (bubblewrap unless ``sandbox`` is off
        or it cannot work here): they are short, and their network (fetching packages)
        is the login host's."""
        from reprobridge.sandbox import sandbox_unusable

        unsandboxed = None
        if self.sandbox == "off":
            unsandboxed = "not sandboxed (--sandbox off)"
        else:
            reason = sandbox_unusable()
            if reason and self.sandbox == "on":
                raise MachineError(
                    f"bubblewrap cannot run setup steps on this host: {reason}",
                    hint="see `rb doctor`, or --sandbox off",
                )
            if reason:
                unsandboxed = f"not sandboxed: {reason}"
        return LocalExecutor(unsandboxed=unsandboxed).run_step(request)

    # -- submission -------------------------------------------------------------------------

    def _job_dir(self, request: RunRequest) -> Path:
        audit, _, run_key = request.marker.partition(":")
        evidence_root = request.run_dir.parents[2].parent
        return evidence_root / ".slurm" / audit / (run_key or "run")

    def _submit(
        self, request: RunRequest, job_dir: Path, attempts: list[dict[str, str]]
    ) -> str | RunOutput:
        run_out = job_dir / "run"
        if run_out.exists():
            shutil.rmtree(run_out)
        run_out.mkdir(mode=0o700)
        spec = job_dir / "spec.json"
        # The run's environment is already cleared (allowlist + backend); it holds no secret
        # of the operator's. The file is private to the auditor's user all the same.
        fd = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(
                {
                    "argv": list(request.argv),
                    "workspace": str(request.workspace),
                    "env": request.env,
                    "out_dir": str(run_out),
                    "timeout_s": request.timeout_s,
                    "grace": request.grace,
                    "marker": request.marker,
                    "network": request.network,
                    "gpu": request.gpu,
                    "ro_binds": [str(p) for p in request.ro_binds],
                    "max_processes": request.max_processes,
                    "sample_interval": request.sample_interval,
                    "sandbox": self.sandbox,
                },
                fh,
                indent=1,
                sort_keys=True,
            )
        audit, _, run_key = request.marker.partition(":")
        name = f"rb-{audit[:12]}-{run_key}"[:64]
        resources = JobResources(
            gpus=request.gpus,
            cpus=request.cpus,
            memory_gb=request.memory_gb,
            time_s=request.timeout_s,
            grace_s=request.grace,
        )
        script = job_dir / "job.sh"
        write_atomic(
            script,
            job_script(
                batch_header(name, resources, self.options, job_dir / "slurm-%j.out"), spec
            ).encode(),
            mode=0o700,
        )
        proc = self.runner(["sbatch", "--parsable", str(script)])
        if proc.returncode != 0:
            message = (proc.stderr.strip().splitlines() or ["sbatch failed"])[-1]
            message = message.removeprefix("sbatch: error: ")
            attempts.append({"job_id": "", "state": "REJECTED", "reason": message, "node": ""})
            self._save(job_dir / "job.json", None, request, attempts)
            return self._not_started(request, f"slurm: not scheduled: {message}", attempts)
        job_id = proc.stdout.strip().split(";")[0]
        attempts.append({"job_id": job_id, "state": "SUBMITTED", "reason": "", "node": ""})
        self._save(job_dir / "job.json", job_id, request, attempts)
        emit("run-queued", job_id=job_id)
        return job_id

    def _save(
        self, path: Path, job_id: str | None, request: RunRequest, attempts: list[dict[str, str]]
    ) -> None:
        record = {"job_id": job_id, "workspace": str(request.workspace), "attempts": attempts}
        write_atomic(path, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())

    # -- waiting ----------------------------------------------------------------------------

    def query(self, job_id: str) -> _JobState:
        """The job's state: squeue while the controller lists it, then scontrol."""
        proc = self.runner(["squeue", "-h", "-j", job_id, "-o", "%T|%r|%N"])
        line = proc.stdout.strip()
        if proc.returncode == 0 and line:
            state, _, rest = line.partition("|")
            reason, _, node = rest.partition("|")
            return _JobState(state, "" if reason == "None" else reason, node)
        proc = self.runner(["scontrol", "show", "job", "-o", job_id])
        fields = dict(part.split("=", 1) for part in proc.stdout.split() if "=" in part)
        if proc.returncode != 0 or "JobState" not in fields:
            return _JobState("UNKNOWN", "the controller no longer knows the job")
        reason = fields.get("Reason", "")
        return _JobState(
            fields["JobState"],
            "" if reason == "None" else reason,
            fields.get("NodeList", "").replace("(null)", ""),
            fields.get("ExitCode", ""),
        )

    def _wait(self, job_id: str, request: RunRequest) -> _JobState:
        cancelled_at: float | None = None
        pending_since = time.monotonic()
        last = ""
        while True:
            st = self.query(job_id)
            if st.state != last:
                emit("run-job-state", job_id=job_id, state=st.state, reason=st.reason, node=st.node)
                last = st.state
            if st.state not in {
                "PENDING",
                "CONFIGURING",
                "RUNNING",
                "COMPLETING",
                "SUSPENDED",
                "REQUEUED",
                "RESIZING",
                "SIGNALING",
                "STAGE_OUT",
            }:
                return st
            if st.state == "PENDING" and cancelled_at is None:
                never = st.reason in NEVER_SCHEDULED
                waited = time.monotonic() - pending_since
                timeout = self.options.pending_timeout
                if never or (timeout is not None and waited > timeout):
                    self.runner(["scancel", job_id])
                    why = (
                        st.reason if never else f"still pending after {waited:.0f} s ({st.reason})"
                    )
                    return _JobState("NOT_SCHEDULED", why)
            if request.stop_event.is_set() and cancelled_at is None:
                # TERM to the batch step lets the node-side executor stop the run with its
                # grace period; the hard cancel follows if it does not end in time.
                if st.state == "PENDING":
                    self.runner(["scancel", job_id])  # nothing runs yet: cancel outright
                else:
                    self.runner(["scancel", "--batch", "--signal=TERM", job_id])
                cancelled_at = time.monotonic()
            elif cancelled_at is not None and time.monotonic() - cancelled_at > request.grace + 30:
                self.runner(["scancel", job_id])
            if st.state != "PENDING":
                pending_since = time.monotonic()
            time.sleep(self.options.poll_interval)

    def _still_useful(self, job_id: str, job_dir: Path) -> bool:
        """A previous job is worth attaching to: still queued/running, or finished with a
        result on disk."""
        result = job_dir / "run" / "result.json"
        if result.is_file():
            # A run the interrupted auditor stopped is run again, not collected.
            data = json.loads(result.read_text())
            return bool(data["completed"]["termination"]["kind"] != "interrupted")
        return self.query(job_id).state in {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"}

    @staticmethod
    def _adopt_workspace(old: Path, new: Path) -> None:
        """The collected job ran in the killed auditor's workspace: its files (outputs the
        auditor copies next) replace the resumed run's fresh copy."""
        if not old.is_dir() or old == new:
            return
        if new.exists():
            shutil.rmtree(new)
        shutil.copytree(old, new, symlinks=True)
        if old.parent.name.startswith("rb-run-"):
            shutil.rmtree(old.parent, ignore_errors=True)

    # -- results ----------------------------------------------------------------------------

    def _collect(
        self,
        request: RunRequest,
        job_dir: Path,
        final: _JobState,
        attempts: list[dict[str, str]],
        job_id: str,
    ) -> RunOutput:
        run_out = job_dir / "run"
        data = json.loads((run_out / "result.json").read_text())
        # Every file the node side wrote is the run's evidence (logs, the combined stream,
        # timeline, node.json); result.json is this round trip's own.
        for src in sorted(run_out.iterdir()):
            if src.name != "result.json" and src.is_file() and not src.is_symlink():
                shutil.copyfile(src, request.run_dir / src.name)
        self._copy_scheduler_log(job_dir, job_id, request.run_dir)
        completed = completed_from_json(data["completed"], request.run_dir)
        termination = completed.termination
        if termination.kind == "interrupted" and not request.stop_event.is_set():
            # Not our cancel: Slurm signalled the job ahead of its time limit.
            completed = dataclasses.replace(
                completed,
                termination=Termination(
                    "timeout",
                    termination.returncode,
                    termination.signal,
                    f"slurm time limit: stopped before the job's limit ({final.state})",
                ),
            )
        peaks = Peaks(**data["peaks"]) if data.get("peaks") else None
        return RunOutput(
            completed,
            peaks,
            data["isolation"],
            _placement(job_id, data.get("node") or final.node, final, attempts),
        )

    @staticmethod
    def _copy_scheduler_log(job_dir: Path, job_id: str, run_dir: Path) -> None:
        log = job_dir / f"slurm-{job_id}.out"
        if log.is_file():
            shutil.copyfile(log, run_dir / "scheduler.log")

    def _scheduler_outcome(
        self,
        request: RunRequest,
        job_dir: Path,
        final: _JobState,
        attempts: list[dict[str, str]],
        job_id: str,
    ) -> RunOutput:
        """The job ended without the run's result: the scheduler's own verdict."""
        self._copy_scheduler_log(job_dir, job_id, request.run_dir)
        if request.stop_event.is_set():
            kind = "interrupted"
            text = f"interrupted: slurm {final.state}"
        elif final.state == "TIMEOUT":
            kind, text = "timeout", "slurm TIMEOUT: the job's time limit"
        elif final.state == "NOT_SCHEDULED":
            kind, text = "scheduler", f"slurm: not scheduled: {final.reason}"
        else:
            kind = "scheduler"
            text = f"slurm {final.state}" + (f": {final.reason}" if final.reason else "")
        return self._outcome(request, Termination(kind, None, None, text), attempts, final, job_id)  # type: ignore[arg-type]

    def _not_started(
        self, request: RunRequest, text: str, attempts: list[dict[str, str]]
    ) -> RunOutput:
        final = _JobState("REJECTED", attempts[-1]["reason"] if attempts else "")
        return self._outcome(
            request, Termination("scheduler", None, None, text), attempts, final, None
        )

    def _outcome(
        self,
        request: RunRequest,
        termination: Termination,
        attempts: list[dict[str, str]],
        final: _JobState,
        job_id: str | None,
    ) -> RunOutput:
        empty = hashlib.sha256(b"").hexdigest()
        captures = []
        for stream in ("stdout", "stderr"):
            path = request.run_dir / f"{stream}.log"
            if not path.exists():
                path.write_bytes(b"")
            captures.append(StreamCapture(path, 0, 0, empty, False))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        completed = Completed(
            argv=tuple(request.argv),
            termination=termination,
            stdout=captures[0],
            stderr=captures[1],
            wall_s=0.0,
            cpu_user_s=0.0,
            cpu_sys_s=0.0,
            started_at=now,
            finished_at=now,
            pid=0,
            survivors_killed=0,
        )
        return RunOutput(
            completed,
            None,
            "slurm",
            _placement(job_id, final.node, final, attempts),
        )


def completed_to_json(completed: Completed) -> dict[str, Any]:
    """The node side's half of the round trip: every field, each stream capture's path as
    its file name (the auditor's copy lives in another directory)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(completed):
        value = getattr(completed, f.name)
        if isinstance(value, StreamCapture):
            out[f.name] = {**dataclasses.asdict(value), "path": value.path.name}
        elif isinstance(value, Termination):
            out[f.name] = dataclasses.asdict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def completed_from_json(data: dict[str, Any], run_dir: Path) -> Completed:
    """:func:`completed_to_json` read back, with each capture's path in ``run_dir``."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Completed):
        if f.name not in data:
            continue  # a field the node's rb did not have keeps its default
        value = data[f.name]
        if isinstance(value, dict) and "sha256" in value and "path" in value:
            values[f.name] = StreamCapture(**{**value, "path": run_dir / Path(value["path"]).name})
        elif f.name == "termination":
            values[f.name] = Termination(**value)
        elif f.name == "argv":
            values[f.name] = tuple(value)
        else:
            values[f.name] = value
    return Completed(**values)


def slurm_available(runner: Runner = _run) -> tuple[bool, str]:
    """Whether the Slurm client commands work here, and what ``sinfo`` says (or why not)."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False, "sbatch/sinfo not on PATH"
    try:
        proc = runner(["sinfo", "-h", "-o", "%P %a %D %G"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"sinfo: {exc}"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["sinfo failed"])[-1]
    return True, proc.stdout.strip()
