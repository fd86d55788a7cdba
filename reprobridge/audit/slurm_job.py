"""The node side of ``rb audit --executor slurm``: ``python -m reprobridge.audit.slurm_job SPEC``.

Runs one request, described by the ``spec.json`` the submitting auditor wrote, with the
:class:`~reprobridge.audit.executors.LocalExecutor` (bubblewrap when this node has it), and
writes into the spec's ``out_dir``: ``stdout.log``, ``stderr.log``, ``timeline.jsonl``,
``node.json`` (this node's host and GPU fingerprint, taken here, not on the login host) and
last ``result.json`` (atomically; its presence means the run's evidence is complete).

SIGTERM (``scancel --signal=TERM`` or Slurm's ``--signal`` before the time limit) stops the
run the way Ctrl-C stops a local one: TERM to the run, its grace period, then KILL.

Log redaction here is rule-based only: the operator's secret values never leave the
submitting process (the run's environment is cleared of them anyway), and the bundle's
seal-time scanner checks every file again. Exit status: 0 when ``result.json`` was written,
2 for a malformed spec.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import socket
import sys
import threading
from pathlib import Path

from reprobridge._fs import write_atomic


def main(argv: list[str]) -> int:
    # First of all, before the imports (seconds on a loaded node): a TERM from scancel
    # while they run must stop the run, not kill this process before its result exists.
    stop = threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        signalled.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    from reprobridge._proc.monitored import Termination
    from reprobridge.audit import fingerprint as fp
    from reprobridge.audit.executors import LocalExecutor, RunRequest
    from reprobridge.audit.slurm import JobResult, JobSpec, completed_to_json
    from reprobridge.evidence.redact import Redactor
    from reprobridge.sandbox import sandbox_unusable

    if len(argv) != 1:
        print("usage: python -m reprobridge.audit.slurm_job SPEC", file=sys.stderr)
        return 2
    spec: JobSpec = json.loads(Path(argv[0]).read_text())
    out_dir = Path(spec["out_dir"])
    node = socket.gethostname()
    unsandboxed: str | None = None
    if spec.get("sandbox") == "off":
        unsandboxed = "not sandboxed (--sandbox off)"
    else:
        reason = sandbox_unusable()
        if reason:
            unsandboxed = f"not sandboxed on node {node}: {reason}"

    def fingerprint() -> None:
        write_atomic(
            out_dir / "node.json",
            (
                json.dumps(
                    {"node": node, "host": fp.host_fingerprint(), "gpu": fp.gpu_fingerprint()},
                    indent=1,
                    sort_keys=True,
                    default=str,
                )
                + "\n"
            ).encode(),
        )

    # Taken while the run starts, not before it: the probes (NVML, /proc) only read, and
    # the run's first output no longer waits for them (benchmarks/slurm_overhead.py).
    fingerprinting = threading.Thread(target=fingerprint, name="rb-node-fingerprint")
    fingerprinting.start()
    request = RunRequest(
        argv=tuple(spec["argv"]),
        workspace=Path(spec["workspace"]),
        env=dict(spec["env"]),
        run_dir=out_dir,
        timeout_s=float(spec["timeout_s"]),
        marker=spec["marker"],
        redactor=Redactor(),
        stop_event=stop,
        stop_reason=lambda: f"signal {signalled[0] if signalled else '?'} from slurm",
        network=bool(spec["network"]),
        gpu=bool(spec["gpu"]),
        ro_binds=tuple(Path(p) for p in spec["ro_binds"]),
        max_processes=spec.get("max_processes"),
        grace=float(spec["grace"]),
        sample_interval=float(spec["sample_interval"]),
    )
    output = LocalExecutor(unsandboxed=unsandboxed).execute(request)
    fingerprinting.join()  # node.json is written before result.json, which marks the end
    completed = output.completed
    if signalled and completed.termination.kind in {"exit", "signal", "killed"}:
        # The signal reached the run's processes too (``scancel --batch`` signals the whole
        # batch step), so the run ended before we stopped it: it was stopped all the same,
        # never a run that failed (or passed) on its own.
        term = completed.termination
        completed = dataclasses.replace(
            completed,
            termination=Termination(
                "interrupted",
                term.returncode,
                term.signal,
                f"interrupted ({request.stop_reason()}; the run ended {term.description})",
            ),
        )
    peaks = output.peaks
    result: JobResult = {
        "node": node,
        "isolation": output.isolation,
        "completed": completed_to_json(completed),
        "peaks": None if peaks is None else dataclasses.asdict(peaks),
    }
    write_atomic(
        out_dir / "result.json",
        (json.dumps(result, indent=1, sort_keys=True) + "\n").encode(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
