"""`rb audit`: run experiments in isolation, record evidence, judge it against the manifest.

Contract of :func:`run_audit`:

* every run starts from a clean copy of HEAD plus rb's artifacts
  (:mod:`reprobridge.audit.workspace`), its datasets checked against their sha256 first;
* runs execute with a cleared environment (the backend's variables plus an allowlist;
  secrets of the auditor's environment never reach them), inside bubblewrap when it
  works (no network unless the experiment declares it; a PID namespace, so nothing
  outlives the run), with a timeout that ends in SIGKILL of the whole tree;
* output is redacted while it streams, capped (head + tail, with the size and sha256 of
  the whole stream), and every file of a run is sealed by its ``status.json``, written last;
* metrics are extracted by the auditor from the stored logs and output copies, judged with
  the same functions ``repro/check.py`` uses, aggregated over runs under the experiment's
  stability policy, and claims are evaluated on the measured values only;
* an interrupted audit (SIGINT/SIGTERM, or the auditor killed) resumes with ``resume``:
  sealed runs are verified and reused, partial ones set aside and run again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import posixpath
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Unpack

from reprobridge import __version__, _proc, sandbox
from reprobridge._log import emit
from reprobridge._machine import MIN_NIX, Runner, Where, dotted, nix_version
from reprobridge._proc.monitored import Completed, StreamCapture, Termination, signals_handled
from reprobridge.audit import fingerprint as fp
from reprobridge.audit import limits
from reprobridge.audit.backends import (
    NO_BUILD_FLAG,
    SETUP_TIMEOUT,
    AuditBackend,
    BuildPolicy,
    EnvironmentState,
    HostBackend,
    NixBackend,
    RunSetup,
    SetupContext,
    SetupStep,
)
from reprobridge.audit.claims import ClaimError, references
from reprobridge.audit.collect import collect_files
from reprobridge.audit.datasets import check_datasets
from reprobridge.audit.dirty import NOT_IN_RUNS, dirty_tree
from reprobridge.audit.executors import (
    BatchExecutor,
    Executor,
    LocalExecutor,
    RunOutput,
    RunRequest,
    StepRequest,
    workload_cpu,
)
from reprobridge.audit.hostenv import HostInstall, built_from_source
from reprobridge.audit.insync import check_in_sync
from reprobridge.audit.judge import RunJudgement
from reprobridge.audit.offline import offline_requirements
from reprobridge.audit.pkglisting import PackageListings
from reprobridge.audit.plan import PlannedRun, Tier, plan_runs, select_experiments
from reprobridge.audit.threads import THREAD_VARS, thread_env
from reprobridge.audit.verdicts import judgement_json, rejudge_run, summarize
from reprobridge.audit.workspace import (
    Removal,
    SourceArchive,
    WorkspaceInfo,
    head_commit,
    prepare_workspace,
)
from reprobridge.constants import (
    EVIDENCE_DIR,
    FLAKE_LOCK_FILE,
    LAUNCHERS_DIR,
    MANIFEST_FILE,
    WHEELS_DIR,
)
from reprobridge.errors import AuditError, MachineError
from reprobridge.evidence.bundle import Bundle
from reprobridge.evidence.errors import EvidenceError
from reprobridge.evidence.layout import (
    AUDIT_FILE,
    DIRTY_DIFF,
    DIRTY_RECORD,
    ENVIRONMENT_FILE,
    PLAN_FILE,
)
from reprobridge.evidence.provenance import provenance
from reprobridge.evidence.provenance import register as register_bundle
from reprobridge.evidence.records import (
    AuditSummary,
    NotStarted,
    Plan,
    RunRecord,
    RunStatus,
    StreamSummary,
    TerminationRecord,
    jsonable,
)
from reprobridge.evidence.redact import Redactor, scrub_env, secrets_from_env
from reprobridge.evidence.sign import load_private_key, sign_bundle
from reprobridge.evidence.store import EvidenceStore
from reprobridge.manifest.io import read_manifest
from reprobridge.manifest.schema import Experiment, Hardware, Manifest
from reprobridge.settings import DEFAULT_MAX_OUTPUT_MB

__all__ = ["AuditOptions", "AuditResult", "Backend", "SandboxMode", "Tier", "run_audit"]

Backend = Literal["auto", "nix", "host"]
SandboxMode = Literal["auto", "on", "off"]
#: Host variables a run may see (with their values); everything else is not passed at all.
RUN_ENV_ALLOWLIST = (
    "LANG",
    "LC_ALL",
    "TZ",
    "CUDA_VISIBLE_DEVICES",
    # The host's thread limits pass as they are; ``--threads`` replaces them.
    *THREAD_VARS,
)
#: Variables stored with their values in env.json; others are recorded as redacted.
ENV_RECORD_ALLOWLIST = (
    *RUN_ENV_ALLOWLIST,
    "PATH",
    "HOME",
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "SOURCE_DATE_EPOCH",
    "VIRTUAL_ENV",
    "RB_RUN_ID",
    "RB_RUN_MARKER",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "WANDB_MODE",
    "UV_PYTHON",
    "UV_PYTHON_DOWNLOADS",
    "PYTHONNOUSERSITE",
    # Where the run's libraries and CUDA come from (the driver directory, a devShell's).
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
)
#: Seconds the auditor waits past the launcher's own timeout (which already TERMs and KILLs).
TIMEOUT_MARGIN = 60.0
#: Default process-count limit of a run: far above what a training job with data-loader
#: workers needs, far below what exhausts a machine (a fork bomb).
DEFAULT_MAX_PROCESSES = 4096


@dataclass
class AuditOptions:
    """What to audit and how (the CLI's flags)."""

    experiments: list[str] | None = None
    runs: int = 3
    tier: Tier = "full"
    backend: Backend = "auto"
    resume: str | None = None  # an audit id, or "latest"
    sign_key: Path | None = None
    nix_overrides: dict[str, str] = field(default_factory=dict)
    nix_binary: str = "nix"
    #: Host paths the operator lets every sandboxed run read (tools outside /nix/store);
    #: recorded in each run's record.
    extra_ro_binds: tuple[Path, ...] = ()
    sandbox: SandboxMode = "auto"
    echo: bool = False
    sample_interval: float = 0.5
    grace: float = 30.0
    #: Where runs execute (default: this machine, sandboxed when possible); the cluster seam.
    executor: Executor | None = None
    #: Where run workspaces are made (default: TMPDIR); a cluster needs a shared path.
    work_root: Path | None = None
    #: Refuse to build packages that have no wheel. Without it the host backend builds
    #: them in the run's sandbox when runs are sandboxed (never without a sandbox).
    no_build: bool = False
    #: Install Python packages only from the unpacked supplement's ``wheels/`` and never
    #: touch the network (:mod:`reprobridge.audit.offline`); host backend only.
    offline: bool = False
    #: Most processes a run (and each setup step) may have at once; None: no limit.
    max_processes: int | None = DEFAULT_MAX_PROCESSES
    #: With no experiment named: every experiment with the tier (``--all``), not only the
    #: main ones rb expects to finish (:func:`reprobridge.audit.plan.select_experiments`).
    everything: bool = False
    #: Audit a work tree with uncommitted changes (not rb's own): its commit, recording
    #: the changes, which no run includes (:mod:`reprobridge.audit.dirty`).
    allow_dirty: bool = False
    #: CPU threads each run may use (:mod:`reprobridge.audit.threads`: OMP_NUM_THREADS and
    #: the like, set over the backend's environment); None: not set, the host's pass.
    threads: int | None = None
    #: Where the bundle goes (default: the repository's ``repro/evidence``). `rb init`'s probe
    #: keeps its bundles apart, so they are never an audit of the repository.
    evidence_root: Path | None = None
    #: A trial (`rb init`'s probe, never `rb audit`): a run whose GPUs this machine lacks
    #: runs with no GPU visible, and one whose dataset check fails runs anyway, so that what
    #: the code does without them is evidence. Its verdicts are not an audit's.
    trial: bool = False
    #: The longest any run, and any setup step of it, may take (the probe's time budget),
    #: over the tier's timeout and the setup steps' own limit.
    max_timeout_s: float | None = None
    #: MiB the copies of one run's declared outputs may total in the bundle
    #: (:mod:`reprobridge.audit.collect`; the operator's ``max_output_mb``, never the
    #: manifest's).
    max_output_mb: int = DEFAULT_MAX_OUTPUT_MB
    #: Judge the runs under this rb's Python when the host lacks the manifest's (the
    #: environment level is then ``incomplete`` and says so); otherwise such an audit is
    #: NOT JUDGED.
    python_mismatch_ok: bool = False


@dataclass
class AuditResult:
    """Where the bundle is and what it concluded (``verdict``: PASS, FAIL, INCOMPLETE or
    NOT JUDGED;
    ``passed`` only for PASS). A detached audit (runs left to a scheduler) has no summary
    yet: ``record`` is None, ``verdict`` DETACHED and ``detached_runs`` says how many."""

    audit_id: str
    path: Path
    passed: bool
    record: AuditSummary | None
    detached_runs: int = 0

    @property
    def summary(self) -> dict[str, Any]:
        """``audit.json`` as stored (for a detached audit: its verdict and run count)."""
        if self.record is None:
            return {"verdict": "DETACHED", "detached_runs": self.detached_runs}
        return self.record.to_json()

    @property
    def verdict(self) -> str:
        return "DETACHED" if self.record is None else self.record.verdict


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _new_audit_id(manifest_bytes: bytes, commit: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{hashlib.sha256(manifest_bytes + commit.encode()).hexdigest()[:6]}"


def _fresh_audit_id(evidence_root: Path, manifest_bytes: bytes, commit: str) -> str:
    """A :func:`_new_audit_id` no bundle under ``evidence_root`` has yet. The id is the
    second and the inputs' digest, so a second audit of the same inputs within the same
    second (a short audit run twice by a script) waits for the next second rather than
    failing with "evidence bundle already exists"; two audits started at once still meet
    that error from the atomic mkdir in ``Bundle.create``."""
    for _ in range(3):
        audit_id = _new_audit_id(manifest_bytes, commit)
        if not (evidence_root / audit_id).exists():
            return audit_id
        time.sleep(1.0 - time.time() % 1.0 + 0.01)
    return _new_audit_id(manifest_bytes, commit)


def build_policy(opts: AuditOptions, sandbox_off: str | None) -> BuildPolicy:
    """Builds of packages without a wheel run in the run's sandbox, which exposes nothing
    the experiment's own code could not reach: allowed when runs are sandboxed, unless
    ``--no-build``; never without a sandbox (the build's code would run on the host)."""
    if opts.no_build:
        return BuildPolicy(False, f"{NO_BUILD_FLAG} given")
    if sandbox_off is not None:
        return BuildPolicy(False, f"runs are {sandbox_off}, and a build runs the package's code")
    return BuildPolicy(True)


def choose_backend(
    opts: AuditOptions, manifest: Manifest, root: Path, sandbox_off: str | None = "unknown"
) -> tuple[AuditBackend, EnvironmentState]:
    """The backend and its prepared environment; ``auto`` falls back to the host when nix
    cannot materialize the devShell (and says why). ``sandbox_off`` is why runs are not
    sandboxed (None when they are). What this machine lacks for the backend (nix, its
    sandbox, uv: a MachineError of ``prepare``) is an environment that is not judged."""
    fetch = bool(manifest.environment.python_requirements)
    host = HostBackend(
        manifest.environment.python,
        has_requirements=fetch,
        builds=build_policy(opts, sandbox_off),
        install=HostInstall.from_manifest(manifest),
        offline=root / WHEELS_DIR if opts.offline else None,
        install_project=manifest.environment.install_project,
        # A trial asks what the code does here, whatever Python this machine has.
        python_mismatch_ok=opts.python_mismatch_ok or opts.trial,
    )
    if opts.offline:
        return _offline_host(opts, host, root)
    if opts.backend == "host":
        return host, _prepared(host, root)
    version = nix_version(opts.nix_binary)
    if opts.backend == "auto" and (
        version is None or (version < MIN_NIX and not opts.nix_overrides)
    ):
        state = _prepared(host, root)
        why = (
            "nix is not installed"
            if version is None
            else f"nix {dotted(version)} < {dotted(MIN_NIX)}"
        )
        state.warnings.append(f"--backend auto chose the host: {why}")
        return host, state
    nix = NixBackend(overrides=opts.nix_overrides, nix=opts.nix_binary, fetch_packages=fetch)
    state = _prepared(nix, root)
    if not state.ok and opts.backend == "auto":
        fallback = _prepared(host, root)
        fallback.warnings.append(
            f"--backend auto chose the host: the nix environment failed ({state.reason})"
        )
        return host, fallback
    return nix, state


def _prepared(backend: AuditBackend, root: Path) -> EnvironmentState:
    """``backend.prepare(root)``; a MachineError (nix or uv missing, a Nix sandbox rb cannot
    require) is this machine's problem: an environment that is not judged, with the error
    and its hint as the reason."""
    try:
        return backend.prepare(root)
    except MachineError as exc:
        reason = exc.message + (f" ({exc.hint})" if exc.hint else "")
        state = EnvironmentState(backend.name, ok=False, reason="", hermetic=False)
        return state.not_judged_because(reason)


def _offline_host(
    opts: AuditOptions, host: HostBackend, root: Path
) -> tuple[AuditBackend, EnvironmentState]:
    """``--offline``: the host backend from the supplement's wheels. The Nix backend from
    its ``nix-cache/`` is not wired yet, so ``--backend nix`` is refused rather than left
    to download."""
    if opts.backend == "nix":
        raise AuditError(
            "--offline supports the host backend only (the Nix backend from an archive's "
            "nix-cache/ is not wired into rb audit yet)",
            hint="use --backend host (or auto) with --offline",
        )
    state = _prepared(host, root)
    if opts.backend == "auto":
        state.warnings.append("--offline: the host backend, from the archive's wheels/")
    return host, state


class _Interrupt:
    """SIGINT/SIGTERM to the auditor: stop launching, kill the running run, journal it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None

    def _handler(self, signum: int, frame: object) -> None:
        self.signum = signum
        self.event.set()

    def installed(self) -> contextlib.AbstractContextManager[None]:
        return signals_handled(self._handler)


class AuditInterrupted(AuditError):
    """The auditor was asked to stop; the bundle is resumable (exit 130 or 143)."""

    def __init__(self, message: str, *, signum: int, bundle: Path) -> None:
        super().__init__(message, hint=f"resume with: rb audit --resume {bundle.name}")
        self.signum = signum
        self.bundle = bundle

    def exit_status(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as shells report them


def run_audit(root: Path, opts: AuditOptions) -> AuditResult:
    """See the module docstring. Raises AuditError/MachineError for what stops the audit
    itself; failing experiments are verdicts in the result, not exceptions."""
    root = root.resolve()
    manifest_path = root / MANIFEST_FILE
    manifest = read_manifest(manifest_path)
    manifest_bytes = manifest_path.read_bytes()
    selection = select_experiments(
        manifest, opts.experiments, opts.tier, root=root, everything=opts.everything
    )
    plan = plan_runs(manifest, list(selection.ids), runs=opts.runs, tier=opts.tier)
    if opts.max_timeout_s is not None:
        cap = opts.max_timeout_s
        plan = [dataclasses.replace(r, timeout_s=min(r.timeout_s, cap)) for r in plan]
    _check_claim_references(manifest)
    # Before anything is written: a stale launcher would run another command than the
    # manifest the bundle records.
    check_in_sync(root, manifest, dict.fromkeys(run.experiment for run in plan))
    dirty = dirty_tree(root)
    if dirty.dirty and not opts.allow_dirty:
        # Every run starts from HEAD: judged evidence would not include these changes.
        raise AuditError(
            f"uncommitted changes that no run would include: {dirty.files()}",
            path=str(root),
            hint="commit them (every run starts from the commit), or pass --allow-dirty to "
            "audit the commit and record the changes in the evidence",
        )
    commit = head_commit(root)
    # Before any bundle exists or any environment is set up: `--sandbox on` on a machine
    # without a working bubblewrap fails here, leaving nothing to resume or clean up.
    sandboxed = _sandbox_choice(opts)
    _check_operator_inputs(opts)
    evidence_root = opts.evidence_root or root / EVIDENCE_DIR
    if opts.offline and manifest.environment.python_requirements:
        # Fail fast: a missing wheel is named before any evidence bundle is started.
        offline_requirements(root, root / WHEELS_DIR, manifest.environment.python)
    if opts.resume:
        bundle_path = _resume_path(evidence_root, opts.resume)
        bundle = Bundle.open(bundle_path)
    else:
        bundle = Bundle.create(
            evidence_root, _fresh_audit_id(evidence_root, manifest_bytes, commit)
        )
        register_bundle(bundle.path)
    interrupt = _Interrupt()
    with bundle.lock(), interrupt.installed(), contextlib.ExitStack() as stack:
        audit_id = bundle.path.name
        # A bundle killed before its plan.json was written holds no evidence yet: resuming
        # it starts it afresh, with the options given now.
        restart = bool(opts.resume) and not (bundle.path / PLAN_FILE).is_file()
        if opts.resume and not restart:
            previous = Plan.from_json(bundle.read_json(PLAN_FILE))
            if previous.manifest_sha256 != hashlib.sha256(manifest_bytes).hexdigest():
                raise AuditError(
                    "the manifest changed since this audit started; start a new audit",
                    path=str(bundle.path / PLAN_FILE),
                )
            if previous.commit != commit:
                # Reused runs ran another commit's code: completing the audit would judge
                # HEAD by them.
                raise AuditError(
                    f"the audit ran on commit {previous.commit[:12] or 'unknown'}, HEAD is "
                    f"{(commit or 'none')[:12]}; start a new audit",
                    path=str(bundle.path / PLAN_FILE),
                )
            plan = list(previous.runs)
            opts.tier = previous.tier  # type: ignore[assignment]
            bundle.journal_append({"event": "resumed", "at": _now()})
        else:
            bundle.write_bytes("inputs/reprobridge.toml", manifest_bytes)
            lock_file = root / FLAKE_LOCK_FILE
            if lock_file.is_file() and not lock_file.is_symlink():  # never a host file
                bundle.write_bytes("inputs/flake.lock", (root / FLAKE_LOCK_FILE).read_bytes())
            bundle.write_json(
                PLAN_FILE,
                Plan(
                    audit_id=audit_id,
                    rb_version=__version__,
                    tier=opts.tier,
                    backend_requested=opts.backend,
                    commit=commit,
                    manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
                    runs=tuple(plan),
                ).to_json(),
            )
            register_bundle(bundle.path)  # the record names this plan
            started_event: dict[str, Any] = {"event": "started", "at": _now(), "runs": len(plan)}
            if selection.skipped:
                started_event["skipped"] = selection.skipped
            if restart:
                started_event["restarted"] = "the audit was killed before its plan was recorded"
            bundle.journal_append(started_event)
        if dirty.dirty and not (bundle.path / DIRTY_RECORD).is_file():
            bundle.write_json(DIRTY_RECORD, dirty.record())
            if dirty.record()["diff_stored"]:
                bundle.write_bytes(DIRTY_DIFF, dirty.diff)
        if selection.skipped and not opts.resume:
            emit("skipped", experiments=selection.skipped)
        emit("audit-start", audit_id=audit_id, runs=len(plan), path=str(bundle.path))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rb-fingerprint") as pool:
            # The machine is fingerprinted while the backend is chosen, whose interpreter
            # check mostly waits on a process (a shim: some twenty): both only read.
            prints = pool.submit(_machine_fingerprints, root)
            # The longest quiet phase of a first audit: a venv, packages downloaded and
            # installed, or a Nix environment built.
            emit("environment-start", backend=opts.backend)
            backend, state = choose_backend(opts, manifest, root, sandboxed)
            host, gpu, git = prints.result()
        emit(
            "environment",
            backend=backend.name,
            ok=state.ok,
            reason=state.reason,
            not_judged=state.not_judged,
        )
        bundle.write_json(ENVIRONMENT_FILE, jsonable(dataclasses.replace(state, base_env={})))
        bundle.write_json("fingerprint/host.json", host)
        bundle.write_json("fingerprint/gpu.json", gpu)
        bundle.write_json("fingerprint/git.json", git)
        if backend.name == "nix":
            bundle.write_json("fingerprint/nix.json", fp.nix_fingerprint(root, nix=opts.nix_binary))
        started = _now()
        judgements: dict[str, list[RunJudgement | None]] = {}
        if opts.resume:
            _remove_leftovers(bundle.path, opts.work_root)
        cache = Path(
            tempfile.mkdtemp(prefix=f"rb-cache-{_tmp_tag(bundle.path)}-", dir=opts.work_root)
        )
        stack.callback(shutil.rmtree, cache, ignore_errors=True)
        # The committed tree, archived once for every run's workspace; in a directory of
        # the auditor's own, which no sandbox binds (the cache above is a setup step's).
        source_dir = Path(
            tempfile.mkdtemp(prefix=f"rb-source-{_tmp_tag(bundle.path)}-", dir=opts.work_root)
        )
        stack.callback(shutil.rmtree, source_dir, ignore_errors=True)
        source = SourceArchive(root, commit, source_dir)
        executor = opts.executor or LocalExecutor(unsandboxed=sandboxed)
        # Runs share a package listing only where a run writes nothing outside its own
        # directory (bubblewrap) and the next run is on this machine.
        listings = PackageListings(
            reuse=isinstance(executor, LocalExecutor) and executor.unsandboxed is None
        )
        removal = Removal()
        # Registered last, so run first: every workspace is gone before the audit ends.
        stack.callback(removal.wait)
        results: dict[int, RunJudgement | None] = {}
        detached = 0
        for group in _groups(plan, executor):
            if interrupt.event.is_set():
                break
            prepared: list[tuple[int, _RunSteps, RunRequest]] = []
            for i in group:
                if interrupt.event.is_set():
                    break
                steps = _one_run(
                    root,
                    manifest,
                    plan[i],
                    opts,
                    bundle,
                    backend,
                    state,
                    sandboxed,
                    interrupt,
                    gpu,
                    cache,
                    source,
                    executor,
                    listings,
                    removal,
                )
                try:
                    prepared.append((i, steps, next(steps)))
                except StopIteration as done:  # reused, or sealed without running
                    results[i] = done.value
            if interrupt.event.is_set():
                for _, steps, _ in prepared:
                    steps.close()  # prepared, never submitted: nothing to collect
                break
            detached += _execute_group(executor, prepared, results)
        if interrupt.event.is_set():
            bundle.journal_append(
                {"event": "interrupted", "at": _now(), "signal": interrupt.signum}
            )
            signum = interrupt.signum or signal.SIGINT
            raise AuditInterrupted(
                f"interrupted by signal {signum}; completed runs are sealed",
                signum=signum,
                bundle=bundle.path,
            )
        if detached:
            removal.wait()
            stack.pop_all()  # the jobs' environments may link into the cache: kept
            bundle.journal_append({"event": "detached", "at": _now(), "runs": detached})
            emit("audit-detached", audit_id=audit_id, runs=detached)
            return AuditResult(audit_id, bundle.path, False, None, detached_runs=detached)
        for i in sorted(results):
            judgements.setdefault(plan[i].experiment, []).append(results[i])
        # Every job is collected: the caches kept for jobs that outlived an auditor can go
        # (once this audit's own removals are done: the sweep looks at the same names).
        removal.wait()
        _remove_leftovers(bundle.path, opts.work_root)
        dirty_hash = _dirty_hash(bundle)
        summary = AuditSummary(
            judged=summarize(
                manifest,
                opts.tier,
                judgements,
                environment_ok=state.ok,
                environment_reason=state.reason,
                environment_substituted=bool(state.substituted or state.python_mismatch),
                environment_not_judged=state.not_judged,
            ),
            audit_id=audit_id,
            rb_version=__version__,
            backend=backend.name,
            hermetic=state.hermetic,
            sandboxed=sandboxed is None,
            sandbox=sandboxed or "bubblewrap",
            started=started,
            finished=_now(),
            warnings=(*state.warnings, *_dirty_warning(dirty_hash)),
            threads=opts.threads,
            dirty_tree=dirty_hash,
        )
        passed = summary.passed is True
        bundle.write_json(AUDIT_FILE, summary.to_json())
        bundle.journal_append(
            {"event": "finished", "at": _now(), "passed": passed, "verdict": summary.verdict}
        )
        bundle.write_sha256sums()
        if opts.sign_key:
            sign_bundle(bundle, opts.sign_key, _predicate(summary, manifest_bytes, root, commit))
        emit("audit-done", audit_id=audit_id, passed=passed, verdict=summary.verdict)
        return AuditResult(audit_id, bundle.path, passed, summary)


def _dirty_hash(bundle: Bundle) -> str | None:
    """The hash of the uncommitted changes the bundle records (``--allow-dirty``), or None."""
    if not (bundle.path / DIRTY_RECORD).is_file():
        return None
    return str(bundle.read_json(DIRTY_RECORD).get("sha256") or "") or None


def _dirty_warning(dirty_hash: str | None) -> list[str]:
    """The summary's warning for an ``--allow-dirty`` audit of a dirty tree."""
    return [f"dirty tree: {dirty_hash}: {NOT_IN_RUNS}"] if dirty_hash else []


def _machine_fingerprints(root: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """This machine's host, GPU and git fingerprints (each records its own failures)."""
    return fp.host_fingerprint(), fp.gpu_fingerprint(), fp.git_fingerprint(root)


#: One run as a coroutine (:func:`_one_run`): it yields its request once prepared, is sent
#: the executor's output (None: detached, the job runs on) and returns its judgement.
_RunSteps = Generator[RunRequest, RunOutput | None, RunJudgement | None]


def _groups(plan: list[PlannedRun], executor: Executor) -> Iterator[list[int]]:
    """Indices into ``plan`` handed to the executor together: every run of an experiment
    for a :class:`~reprobridge.audit.executors.BatchExecutor` (one job array), else one
    run at a time (prepared, run and sealed before the next starts)."""
    if not isinstance(executor, BatchExecutor):
        yield from ([i] for i in range(len(plan)))
        return
    group: list[int] = []
    for i, run in enumerate(plan):
        if group and plan[group[0]].experiment != run.experiment:
            yield group
            group = []
        group.append(i)
    if group:
        yield group


def _execute_group(
    executor: Executor,
    started: list[tuple[int, _RunSteps, RunRequest]],
    results: dict[int, RunJudgement | None],
) -> int:
    """Run the prepared runs, send each its output, store each judgement in ``results``;
    returns how many were left detached (submitted, not waited for)."""
    if not started:
        return 0
    requests = [request for _, _, request in started]
    try:
        if isinstance(executor, BatchExecutor):
            outputs = executor.execute_batch(requests)
        else:
            outputs = [executor.execute(request) for request in requests]
    except OSError as exc:
        # The logs could not be written (a full disk): the first run reports it as the
        # evidence error it is; the others are left unsealed for --resume.
        for _, steps, _ in started[1:]:
            steps.close()
        started[0][1].throw(exc)
        raise  # unreachable: the run turns it into an EvidenceError
    detached = 0
    for (i, steps, _), output in zip(started, outputs, strict=True):
        detached += output is None
        try:
            steps.send(output)
        except StopIteration as done:
            results[i] = done.value
    return detached


def _resume_path(evidence_root: Path, which: str) -> Path:
    """The bundle to resume: ``which`` by id, or the latest unfinished one
    (:class:`~reprobridge.evidence.store.EvidenceStore` says what is finished: sealed; a
    bundle killed between ``audit.json`` and the seal is unfinished, and so is one without
    ``plan.json``, which a resume starts afresh)."""
    store = EvidenceStore(evidence_root)
    if which != "latest":
        path = evidence_root / which
        if not path.is_dir() or path not in store.bundles():
            raise AuditError(f"no audit {which!r} to resume", path=str(evidence_root))
        if store.state(path) != "unfinished":
            raise AuditError(
                f"audit {which!r} is finished (sealed); there is nothing to resume",
                path=str(path),
                hint=f"check it with: rb verify {path}",
            )
        # A bundle the repository brought would be completed from its own "sealed" runs
        # and signed with the operator's key: only the operator's own bundles resume.
        origin = provenance(path)
        if not origin.own:
            raise AuditError(
                f"audit {which!r} is {origin.label}; rb resumes only audits it started",
                path=str(path),
                hint="start a new audit: rb audit",
            )
        return path
    newest = store.resumable()
    if newest is None:
        foreign = len(store.unfinished())
        raise AuditError(
            "no unfinished audit to resume"
            + (
                f" ({foreign} unfinished bundle(s) here were not started by you)" if foreign else ""
            ),
            path=str(evidence_root),
        )
    return newest


def scheduler_jobs(root: Path, which: str) -> bool:
    """Whether the audit that ``--resume which`` continues submitted jobs to a scheduler
    (job records under ``<evidence>/.slurm/``): such an audit resumes on the scheduler,
    which finds them by id. False when there is nothing to resume (the audit says why)."""
    evidence_root = root.resolve() / EVIDENCE_DIR
    try:
        bundle_path = _resume_path(evidence_root, which)
    except AuditError:
        return False
    jobs = evidence_root / ".slurm" / _tmp_tag(bundle_path)
    return jobs.is_dir() and any(jobs.rglob("job.json"))


def _check_operator_inputs(opts: AuditOptions) -> None:
    """Refuse a bad ``--sign`` key or ``--ro-bind`` path before any bundle exists: found
    after the runs, they left a sealed unsigned bundle (which ``--resume`` refuses) or an
    unsealed one (which blocks ``rb archive``)."""
    if opts.sign_key is not None:
        load_private_key(opts.sign_key)
    for path in opts.extra_ro_binds:
        if not path.exists():
            raise AuditError(f"--ro-bind {path} does not exist")
        sandbox.check_bind(path)


def _process_limit_by(limit: int | None, sandbox_off: str | None) -> list[str]:
    """What enforces the run's process limit here (recorded with the run)."""
    if limit is None:
        return []
    return [
        *(["RLIMIT_NPROC (prlimit in the sandbox)"] if sandbox_off is None else []),
        *(["pids cgroup (pids.max)"] if limits.available() else []),
    ]


def _timeout_label(completed: Completed, timeout_s: float) -> Completed:
    """``completed`` with a SIGKILL at or after the experiment's timeout labelled as the
    timeout it is: the launcher's ``timeout`` TERMs the run, and KILLs it when it ignores
    TERM, which ends the launcher with 137, otherwise read as "killed-9 (possible OOM)"."""
    term = completed.termination
    if term.kind != "killed" or completed.wall_s < timeout_s:
        return completed
    return dataclasses.replace(
        completed,
        termination=Termination(
            "timeout",
            term.returncode,
            term.signal,
            f"timeout after {timeout_s:g}s (TERM ignored; KILL after the launcher's grace)",
        ),
    )


def _remove_leftovers(bundle_path: Path, work_root: Path | None = None) -> list[Path]:
    """Remove the temporary run directories and caches an auditor of this bundle left in
    the temporary directory when it was killed (only ours: same owner, not links), except
    a workspace a scheduler job of the bundle still runs in (``.slurm/<id>/*/job.json``:
    the resumed auditor attaches to that job; the caches too while such a workspace
    exists). Called with the bundle's lock held, so no
    live auditor of that bundle is using them."""
    removed: list[Path] = []
    base = work_root or Path(tempfile.gettempdir())
    tag = _tmp_tag(bundle_path)
    keep: set[Path] = set()
    for job in (bundle_path.parent / ".slurm" / tag).rglob("job.json"):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            keep.add(Path(json.loads(job.read_text()).get("workspace", "")).parent)
    patterns = [f"rb-run-{tag}-*", f"rb-source-{tag}-*"]
    # A job's environment may link into the audit's uv cache: kept while a job's workspace is.
    if not any(p.is_dir() for p in keep):
        patterns.append(f"rb-cache-{tag}-*")
    for pattern in patterns:
        for path in sorted(base.glob(pattern)):
            try:
                st = path.lstat()
            except OSError:
                continue
            if path.is_symlink() or not path.is_dir() or st.st_uid != os.getuid():
                continue
            if path in keep:
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _sandbox_choice(opts: AuditOptions) -> str | None:
    """None when runs go into bubblewrap, else why not."""
    if opts.sandbox == "off":
        return "not sandboxed (--sandbox off)"
    reason = sandbox.sandbox_unusable()
    if reason and opts.sandbox == "on":
        raise MachineError(
            f"bubblewrap cannot run here: {reason}", hint="see `rb doctor`, or --sandbox off"
        )
    return f"not sandboxed: {reason}" if reason else None


def _check_claim_references(manifest: Manifest) -> None:
    for i, claim in enumerate(manifest.claims):
        try:
            refs = references(claim.expr)
        except ClaimError as exc:
            raise AuditError(exc.message, path=MANIFEST_FILE, field=f"claims[{i}].expr") from exc
        for exp_id, metric in sorted(refs):
            exp = manifest.experiments.get(exp_id)
            if exp is None or metric not in exp.metrics:
                raise AuditError(
                    f"refers to {exp_id}.{metric}, which the manifest does not define",
                    path=MANIFEST_FILE,
                    field=f"claims[{i}].expr",
                )


def _one_run(
    root: Path,
    manifest: Manifest,
    run: PlannedRun,
    opts: AuditOptions,
    bundle: Bundle,
    backend: AuditBackend,
    state: EnvironmentState,
    sandbox_off: str | None,
    interrupt: _Interrupt,
    gpu: dict[str, Any],
    cache: Path,
    source: SourceArchive,
    executor: Executor,
    listings: PackageListings,
    removal: Removal,
) -> _RunSteps:
    """Execute (or reuse, when resuming) one run; return its RunJudgement. ``cache`` is
    the audit's private uv cache for sandboxed setup steps; ``source`` the committed tree
    every run's workspace is extracted from; ``listings`` lists the run's
    Python packages (once per environment of the audit, see audit/pkglisting.py);
    ``removal`` removes the run's temporary directory once it is done with.

    A coroutine, so that an executor can take many prepared runs at once (a job array):
    once the workspace and environment are ready it yields the run's request and is sent
    the executor's output. None sent means the run was detached (its job runs on in this
    workspace, which is kept; ``--attach`` collects it): the run is left unsealed and
    returns None, as an interrupted one does. Closing it before the send removes the
    workspace. Runs that are reused or cannot start return without yielding."""

    exp = manifest.experiments[run.experiment]

    def rel(p: Path) -> str:
        return p.relative_to(bundle.path).as_posix()

    run_state = bundle.run_state(run.experiment, run.k)
    if run_state == "sealed":
        # Verified by run_state (every file against status.json), so reusing it is safe.
        bundle.journal_append({"event": "run-reused", "run": run.key, "at": _now()})
        emit("run-reused", run=run.key)
        run_dir = bundle.run_dir(run.experiment, run.k)
        status = RunStatus.from_json(bundle.read_json(f"{rel(run_dir)}/status.json"))
        return rejudge_run(exp, opts.tier, run_dir, status.record)
    if run_state in {"partial", "corrupt"}:
        moved = bundle.set_aside_partial(run.experiment, run.k)
        bundle.journal_append(
            {"event": f"set-aside-{run_state}", "run": run.key, "to": moved.name, "at": _now()}
        )
    run_dir = bundle.run_dir(run.experiment, run.k)
    # Not fsynced on its own (nothing depends on it): the run's seal event carries it.
    bundle.journal_append(
        {"event": "run-started", "run": run.key, "seed": run.seed, "at": _now()}, sync=False
    )
    emit(
        "run-start",
        run=run.key,
        seed=run.seed,
        experiment=run.experiment,
        timeline=str(run_dir / "timeline.jsonl"),
        # Prepared here, run later with the experiment's other runs (a job array).
        batched=isinstance(executor, BatchExecutor),
    )
    record = RunRecord.for_run(
        run,
        tier=opts.tier,
        backend=backend.name,
        hermetic=state.hermetic,
        sandbox=sandbox_off or "bubblewrap",
        extra_ro_binds=tuple(str(p) for p in opts.extra_ro_binds),
    )
    if not state.ok:
        return _seal_failure(
            bundle,
            run,
            run_dir,
            record,
            "environment",
            state.reason,
            exp,
            opts.tier,
            machine=state.not_judged,
        )
    # A scheduler's nodes, not this host, have the GPUs: the scheduler judges the request.
    missing = _machine_lacks(exp, manifest, gpu) if _local(opts) else None
    if missing is not None and not opts.trial:
        # Never a pass on the wrong hardware, never a failure of the paper: the run does
        # not start, and this machine could not judge it.
        return _seal_failure(
            bundle, run, run_dir, record, "procedure", missing, exp, opts.tier, machine=True
        )

    checks = check_datasets(manifest, run.experiment, root)
    bundle.write_json(f"{rel(run_dir)}/datasets.json", jsonable(checks))
    bad = [c for c in checks if not c.ok]
    if bad and not opts.trial:
        reason = "; ".join(f"dataset {c.id}: {c.reason}" for c in bad)
        return _seal_failure(bundle, run, run_dir, record, "procedure", reason, exp, opts.tier)
    tmp = tempfile.mkdtemp(prefix=_workspace_prefix(bundle.path, run), dir=opts.work_root)
    detached = False
    try:
        workspace = Path(tmp) / "repo"
        info: WorkspaceInfo = prepare_workspace(root, workspace, source=source)
        record = record.with_(
            workspace={"commit": info.commit, "overlaid": info.overlaid, "skipped": info.skipped},
            max_processes=opts.max_processes,
            process_limit_by=tuple(_process_limit_by(opts.max_processes, sandbox_off)),
            threads=opts.threads,
        )
        ctx = SetupContext(home=Path(tmp) / "home", scratch=Path(tmp) / "rb", cache=cache)
        extra = tuple(opts.extra_ro_binds)
        ctx.home.mkdir()
        ctx.scratch.mkdir()
        try:
            setup = backend.setup_run(state, workspace, ctx)
            try:
                _run_setup_steps(
                    setup,
                    extra,
                    workspace,
                    run_dir,
                    executor,
                    opts.max_processes,
                    run.key,
                    # The probe's budget bounds a source build as it bounds the run.
                    min(SETUP_TIMEOUT, opts.max_timeout_s or SETUP_TIMEOUT),
                )
            finally:
                record = record.with_(built_from_source=_built_from_source(setup, run_dir))
        except AuditError as exc:
            return _seal_failure(
                bundle, run, run_dir, record, "environment", exc.message, exp, opts.tier
            )
        env = backend.after_setup(setup, workspace, ctx)
        request, run_env = _run_request(
            workspace, run, exp, opts, env, setup.ro_binds, run_dir, interrupt
        )
        emit("run-exec", run=run.key)
        try:
            output = yield request
        except OSError as exc:
            # The run's logs stream into the bundle; a full disk there ends the audit the
            # way a failed evidence write does (run_monitored has killed the run, which is
            # left unsealed, so --resume runs it again).
            raise EvidenceError(
                f"could not write the run's logs ({exc.strerror or exc}); the run is left unsealed",
                path=rel(run_dir),
                hint=f"free some disk space, then rb audit --resume {bundle.path.name}",
            ) from exc
        if output is None:
            detached = True  # the job runs on in this workspace
            return None
        completed, peaks, placement = output.completed, output.peaks, output.placement
        record = record.with_(
            executor=executor.name,
            placement=jsonable(placement) if placement is not None else None,
        )
        if completed.termination.kind == "interrupted":
            return None  # not sealed: --resume runs it again
        completed = _timeout_label(completed, run.timeout_s)
        emit("run-checks", run=run.key)

        cpu = workload_cpu(completed, peaks, output.cgroup_cpu)
        not_copied = _copy_outputs(workspace, exp, opts.tier, run_dir / "files", opts.max_output_mb)
        # Only refusals are evidence (a missing file is reported by the output check).
        record = record.with_(files_refused={p: r for p, r in not_copied.items() if r != "missing"})

        recorded = (*ENV_RECORD_ALLOWLIST, *sandbox.offline_env(), *sandbox.headless_env())
        bundle.write_json(f"{rel(run_dir)}/env.json", scrub_env(run_env, recorded))
        # The listing runs the run's python3, which the run could have replaced: in its
        # sandbox, never on the host.
        binds = (*setup.ro_binds, *extra)
        listing = listings.listing(
            "python3",
            run_env,
            run=_step_runner(executor, workspace, ctx.scratch, binds, run.key),
            run_dir=Path(tmp),
            workspace=workspace,
            ro_binds=binds,
        )
        bundle.write_json(f"{rel(run_dir)}/packages.json", listing)
    finally:
        if not detached:
            removal.remove(Path(tmp))
    term = completed.termination
    record = record.with_(
        termination=TerminationRecord(term.kind, term.returncode, term.signal, term.description),
        wall_s=completed.wall_s,
        cpu_user_s=cpu.user_s,
        cpu_sys_s=cpu.sys_s,
        cpu_source=cpu.source,
        started_at=completed.started_at,
        finished_at=completed.finished_at,
        survivors_killed=completed.survivors_killed,
        stdout=_stream_record(completed.stdout),
        stderr=_stream_record(completed.stderr),
        output=_stream_record(completed.combined) if completed.combined is not None else None,
        peaks=jsonable(peaks),
    )
    judgement = rejudge_run(exp, opts.tier, run_dir, record)
    bundle.write_json(f"{rel(run_dir)}/metrics.json", judgement_json(judgement))
    bundle.seal_run(run.experiment, run.k, record)
    bundle.journal_append(
        {
            "event": "run-sealed",
            "run": run.key,
            "at": _now(),
            "procedure_ok": judgement.procedure_ok,
        }
    )
    emit(
        "run-done",
        run=run.key,
        ok=judgement.procedure_ok,
        termination=completed.termination.description,
    )
    return judgement


def _local(opts: AuditOptions) -> bool:
    """Whether runs go to this machine (its GPUs count), not a scheduler's nodes."""
    return opts.executor is None or opts.executor.name == "local"


def _machine_lacks(exp: Experiment, manifest: Manifest, gpu: Mapping[str, Any]) -> str | None:
    """Why this machine cannot run ``exp`` (its GPUs, or a driver older than the pinned
    CUDA of a GPU experiment), or None."""
    missing = hardware_missing(exp.hardware, gpu)
    if missing is None and exp.hardware.gpus > 0:
        cuda = fp.cuda_driver_problem(manifest.environment.cuda, gpu)
        if cuda:
            missing = f"{cuda} (upgrade the driver, or audit on a machine with a newer one)"
    return missing


def hardware_missing(hardware: Hardware, gpu: Mapping[str, Any]) -> str | None:
    """Why this machine lacks the GPUs ``hardware`` asks for (``hw-unavailable: ...``), or
    None when it has them. ``gpu`` is :func:`~reprobridge.audit.fingerprint.gpu_fingerprint`'s
    answer; with ``gpu_memory_gb`` only GPUs with at least that much memory count, in GB of
    10^9 bytes as GPUs are sold (a "16 GB" card reports 15-17 * 10^9)."""
    gpus = [g for g in gpu.get("gpus") or [] if isinstance(g, dict)]
    state = gpu.get("state", "unknown")
    if hardware.gpu_memory_gb is None or hardware.gpus == 0:
        if hardware.gpus <= len(gpus):
            return None
        return (
            f"hw-unavailable: needs {hardware.gpus} GPU(s), this machine has {len(gpus)} "
            f"(NVML: {state})"
        )
    least = hardware.gpu_memory_gb * 1e9
    sizes = [g.get("memory_bytes") for g in gpus]
    big = [b for b in sizes if isinstance(b, int) and b >= least]
    if hardware.gpus <= len(big):
        return None
    largest = max((b for b in sizes if isinstance(b, int)), default=None)
    have = f", the largest {largest / 1e9:.1f} GB" if largest is not None else ""
    return (
        f"hw-unavailable: needs {hardware.gpus} GPU(s) with {hardware.gpu_memory_gb:g} GB "
        f"each, this machine has {len(big)} (of {len(gpus)} GPU(s){have}; NVML: {state})"
    )


def _stream_record(capture: StreamCapture) -> StreamSummary:
    """What the run record keeps of one captured stream (the whole stream's size and hash)."""
    return StreamSummary(capture.total_bytes, capture.sha256, capture.truncated)


def _run_request(
    workspace: Path,
    run: PlannedRun,
    exp: Experiment,
    opts: AuditOptions,
    env: dict[str, str],
    ro_binds: tuple[Path, ...],
    run_dir: Path,
    interrupt: _Interrupt,
) -> tuple[RunRequest, dict[str, str]]:
    """The run's request for the executor (cleared environment + allowlist, headless and
    offline switches, marker) and that environment."""
    marker = f"{_tmp_tag(run_dir.parents[2])}:{run.key}"
    run_env = {k: os.environ[k] for k in RUN_ENV_ALLOWLIST if k in os.environ}
    run_env.update(env)
    if exp.hardware.gpus > 0:
        # The host driver's libraries, linked in the sandbox (sandbox.DRIVER_LIB_DIR): a
        # Nix-built program finds them nowhere else.
        run_env["LD_LIBRARY_PATH"] = sandbox.driver_library_path(run_env)
    if opts.threads is not None:
        # The operator's share of the CPUs wins over the host's and the backend's values.
        run_env.update(thread_env(opts.threads))
    run_env.update(RB_RUN_ID=run.key, RB_RUN_MARKER=marker, PYTHONHASHSEED="0")
    run_env.update(sandbox.headless_env())
    if opts.trial and exp.hardware.gpus > 0:
        # The trial asks what the code does without a GPU: none is visible to it.
        run_env["CUDA_VISIBLE_DEVICES"] = ""
    if not exp.network:
        run_env.update(sandbox.offline_env())
    # The binds come from the backend, never from the environment (which a shellHook sets).
    ro = [*ro_binds, *opts.extra_ro_binds]
    request = RunRequest(
        argv=(
            "bash",
            f"{LAUNCHERS_DIR}/{run.experiment}.sh",
            "--tier",
            opts.tier,
            "--seed",
            str(run.seed),
        ),
        workspace=workspace,
        env=run_env,
        run_dir=run_dir,
        timeout_s=run.timeout_s + TIMEOUT_MARGIN,
        marker=marker,
        redactor=Redactor(secrets_from_env(os.environ)),
        stop_event=interrupt.event,
        stop_reason=lambda: f"signal {interrupt.signum} to the auditor",
        network=exp.network,
        gpu=exp.hardware.gpus > 0 and not opts.trial,
        gpus=0 if opts.trial else exp.hardware.gpus,
        cpus=exp.hardware.cpus,
        memory_gb=exp.hardware.memory_gb,
        ro_binds=tuple(ro),
        grace=opts.grace,
        sample_interval=opts.sample_interval,
        echo=opts.echo,
        max_processes=opts.max_processes,
    )
    return request, run_env


def _tmp_tag(bundle_path: Path) -> str:
    """What names one bundle's temporary directories and its runs' process markers: its
    audit id and a hash of its path (two clones at the same commit, audited in the same
    second, get the same id; with the id alone, one audit's end-of-run sweep killed the
    other's run)."""
    digest = hashlib.sha256(str(bundle_path.resolve()).encode()).hexdigest()[:8]
    return f"{bundle_path.name}-{digest}"


def _workspace_prefix(bundle_path: Path, run: PlannedRun) -> str:
    """The temporary directory of a run names its bundle, so ``--resume`` can remove what
    a killed auditor left behind (:func:`_remove_leftovers`)."""
    return f"rb-run-{_tmp_tag(bundle_path)}-{run.experiment}-{run.k}-"


def _run_setup_steps(
    setup: RunSetup,
    extra_ro_binds: tuple[Path, ...],
    workspace: Path,
    run_dir: Path,
    executor: Executor,
    max_processes: int | None,
    key: str,
    timeout_s: float = SETUP_TIMEOUT,
) -> None:
    """Run the backend's setup steps in the run's sandbox, each within ``timeout_s`` (a step
    past it, a source build most often, fails saying so); their logs are evidence of the run
    (``setup-<i>.stdout.log``). When a step fails and has a ``fallback``, the fallback's
    steps run instead (``setup-<i>.retry-<j>.*.log``). AuditError (an environment failure)
    when a step, or its fallback, fails, unless it is optional (its log then says it failed
    and the run goes on)."""

    def one(step: SetupStep, stem: str) -> str | None:
        """Run ``step``; None when it succeeded, else its failure in one line."""
        marker = f"{_tmp_tag(run_dir.parents[2])}:{key}:{stem}"
        emit("setup-step", run=key, step=stem, what=step.what)
        done = executor.run_step(
            StepRequest(
                argv=step.argv,
                workspace=workspace,
                env={**step.env, "RB_RUN_MARKER": marker},
                stdout_path=run_dir / f"{stem}.stdout.log",
                stderr_path=run_dir / f"{stem}.stderr.log",
                timeout_s=timeout_s,
                marker=marker,
                redactor=Redactor(secrets_from_env(os.environ)),
                network=step.network,
                ro_binds=(*setup.ro_binds, *extra_ro_binds, *step.ro_binds),
                rw_binds=step.rw_binds,
                max_processes=max_processes,
            )
        )
        if done.termination.kind == "exit" and done.termination.returncode == 0:
            return None
        tail = done.stderr.path.read_bytes()[-2000:].decode("utf-8", "replace")
        lines = [ln.strip() for ln in tail.splitlines() if ln.strip()][-3:]
        if done.termination.kind == "timeout":
            return (
                f"{step.what} did not finish within {timeout_s:g}s in the sandbox (a package "
                f"built from source takes longest; its log: {stem}.stderr.log)"
            )
        return f"{step.what} failed in the sandbox ({done.termination.description})" + (
            f": {' | '.join(lines)}" if lines else ""
        )

    def note(stem: str, text: str) -> None:
        with (run_dir / f"{stem}.stderr.log").open("a", encoding="utf-8") as log:
            log.write(f"\nrb: {text}\n")

    for i, step in enumerate(setup.steps):
        failed = one(step, f"setup-{i}")
        if failed is not None and step.fallback:
            note(f"setup-{i}", f"{step.what} failed; retrying: {step.fallback_why}")
            first, failed = failed, None
            for j, retry in enumerate(step.fallback):
                failed = one(retry, f"setup-{i}.retry-{j}")
                if failed is not None and retry.optional:
                    note(f"setup-{i}.retry-{j}", "optional: the retry goes on without it")
                    failed = None
                if failed is not None:
                    failed = f"{failed} (retried after: {first})"
                    break
        if failed is None:
            continue
        if step.optional:
            note(f"setup-{i}", f"{step.what} failed; optional: the run goes on without it")
            continue
        raise AuditError(failed)


def _built_from_source(setup: RunSetup, run_dir: Path) -> dict[str, list[str]]:
    """What the setup steps built from source: the packages set aside as having no wheel,
    and those uv's log of the steps says it built (``Built X==1.0``)."""
    logs = sorted(run_dir.glob("setup-*.stderr.log")) + sorted(run_dir.glob("setup-*.stdout.log"))
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in logs)
    return {"without_wheel": list(setup.needs_build), "built": built_from_source(text)}


def _step_runner(
    executor: Executor, workspace: Path, scratch: Path, ro_binds: tuple[Path, ...], key: str
) -> Runner:
    """A :class:`reprobridge._machine.Runner` that runs its command in the run's
    sandbox (no network), from ``scratch`` instead of the ``cwd`` asked for."""

    def run(argv: Sequence[str], *, timeout: float, **where: Unpack[Where]) -> _proc.Result:
        env = where.get("env")
        marker = f"{scratch.parent.name}:{key}:probe"
        # The output goes to a directory of the auditor's own, outside everything the run
        # could write: a link the run planted there would have the auditor write through it.
        with tempfile.TemporaryDirectory(prefix="rb-probe-") as private:
            out, err = Path(private) / "stdout", Path(private) / "stderr"
            done = executor.run_step(
                StepRequest(
                    argv=tuple(argv),
                    workspace=workspace,
                    env={**(env or {}), "RB_RUN_MARKER": marker},
                    stdout_path=out,
                    stderr_path=err,
                    timeout_s=timeout,
                    marker=marker,
                    redactor=Redactor({}),
                    ro_binds=ro_binds,
                )
            )
            code = done.termination.returncode
            return _proc.Result(
                tuple(argv), -1 if code is None else code, out.read_bytes(), err.read_bytes()
            )

    return run


def _copy_outputs(
    workspace: Path, exp: Experiment, tier: str, dest: Path, max_mb: int
) -> dict[str, str]:
    """Declared outputs and metric source files, copied for judging and for `rb verify`.

    The workspace is the run's (untrusted): :func:`~reprobridge.audit.collect.collect_files`
    never follows a link in it, copies at most ``max_mb`` MiB in all and no sparse file.
    Returns ``{path: reason}`` for what was not copied.
    """
    metrics = exp.tier(tier).metrics or exp.metrics  # type: ignore[arg-type]
    wanted = {o.path for o in exp.outputs} | {
        m.source.file for m in metrics.values() if m.source.file
    }
    spec = exp.tiers.get(tier)  # type: ignore[call-overload]
    derived = spec.derived(tier) if spec is not None else None
    if derived is not None:
        # The copy the tier ran (literals lowered, names renamed) is evidence of what ran;
        # kept when it lies under the workdir (the bundle's files are workdir-relative).
        copy = posixpath.relpath(derived[1], exp.workdir) if exp.workdir != "." else derived[1]
        if not copy.startswith("../"):
            wanted.add(copy)
    return collect_files(workspace, exp.workdir, wanted, dest, max_bytes=max_mb << 20)


def _seal_failure(
    bundle: Bundle,
    run: PlannedRun,
    run_dir: Path,
    record: RunRecord,
    level: str,
    reason: str,
    exp: Experiment,
    tier: str,
    *,
    machine: bool = False,
) -> RunJudgement:
    """Seal a run that could not start, failing at ``level``; not judged at that level
    instead when ``machine`` (this machine, not the repository, is why)."""
    record = record.with_(not_started=NotStarted(level, reason, machine))
    judgement = rejudge_run(exp, tier, run_dir, record)
    bundle.write_json(
        f"{run_dir.relative_to(bundle.path).as_posix()}/metrics.json", judgement_json(judgement)
    )
    bundle.seal_run(run.experiment, run.k, record)
    bundle.journal_append(
        {"event": "run-sealed", "run": run.key, "at": _now(), "not_started": level}
    )
    why = "not judged" if machine else "not started"
    emit("run-done", run=run.key, ok=False, termination=f"{why}: {reason}", not_judged=machine)
    return judgement


def _predicate(
    summary: AuditSummary, manifest_bytes: bytes, root: Path, commit: str
) -> dict[str, Any]:
    lock = root / FLAKE_LOCK_FILE
    return {
        "audit_id": summary.audit_id,
        "rb_version": __version__,
        "passed": summary.passed is True,
        "verdict": summary.verdict,
        "startedOn": summary.started,
        "finishedOn": summary.finished,
        "materials": {
            "git_commit": commit,
            "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(),
            "flake_lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest()
            if lock.is_file()
            else None,
        },
    }
