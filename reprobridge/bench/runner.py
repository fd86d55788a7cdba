"""Bench every repository of a suite: copy it, `rb init`, smoke audit, one record each.

Contract of :func:`run_bench`:

* Each repository is worked on in a copy under ``<out>/work/<name>`` (a ``git clone`` of a
  local checkout's committed HEAD, a plain copy of a directory that is not a checkout, or a
  clone of ``url`` at ``commit``); the user's checkout is only read.
* `rb init` and `rb audit` run as child processes of this same rb (``python -m reprobridge``
  with this package first on ``PYTHONPATH``), supervised by
  :func:`reprobridge._proc.monitored.run_monitored`: their logs go to
  ``<out>/logs/<name>/``, and the repository's time limit covers both (TERM, then KILL).
* Up to ``jobs`` repositories run at once. A repository's record is written atomically
  when it is done, whatever the outcome; one that already has a record is skipped, so an
  interrupted bench (Ctrl-C, a killed machine) resumes where it stopped. An interrupted
  repository gets no record and is redone from a fresh copy.
* With ``reuse`` (a first pass's output directory), each repository starts from the first
  pass's copy, with the artifacts rb wrote and whatever a person or agent refined there,
  and only the audit runs: the raw-vs-refined comparison.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import reprobridge
from reprobridge import _proc
from reprobridge._fs import write_atomic
from reprobridge._proc.monitored import MARKER_VAR, Completed, run_monitored, signals_handled
from reprobridge.audit.threads import share_per_job, usable_cpus
from reprobridge.bench.records import LEVELS, BenchReport, Dependencies, ExperimentRow, RepoRecord
from reprobridge.bench.suite import RepoEntry, Suite, resolve_source
from reprobridge.errors import VERDICT_EXIT, BenchInterrupted, ReproBridgeError, SuiteError
from reprobridge.evidence.records import AuditSummary, RecordError, RunStatus

Progress = Callable[[str, str], None]

#: The share of a repository's time limit `rb init`'s probe may take (unless the operator
#: set RB_PROBE_BUDGET): the rest is the lock, static recovery and the smoke audit.
PROBE_SHARE = 0.4

#: How long a child gets between TERM and KILL when the time limit is reached (rb audit
#: uses it to stop its own run and seal the bundle).
GRACE_S = 20.0


@dataclass
class BenchOptions:
    """How to bench (the CLI's flags)."""

    out: Path
    jobs: int = 1
    time_limit_s: float = 600.0
    tier: str = "smoke"
    runs: int = 1
    backend: str = "host"
    agent: str = "static"
    reuse: Path | None = None
    only: Sequence[str] = ()
    #: CPU threads each audited run may use (``rb audit --threads``); None: this machine's
    #: usable CPUs shared equally between the ``jobs`` (:func:`run_threads`).
    threads: int | None = None
    #: The rb to run (tests substitute a stand-in); default this interpreter and package.
    rb_argv: Sequence[str] = field(default_factory=lambda: (sys.executable, "-m", "reprobridge"))
    progress: Progress | None = None


def run_threads(opts: BenchOptions) -> tuple[int, str]:
    """The thread count each repository's audit gets, and where it comes from: the
    operator's, else ``max(1, usable CPUs // jobs)``, so that ``jobs`` audits side by side
    do not each start a thread pool as large as the machine (oversubscribed, they ran
    10-20x slower than alone)."""
    if opts.threads is not None:
        return opts.threads, "set by the operator"
    cpus = usable_cpus()
    return share_per_job(opts.jobs, cpus), f"{cpus} usable CPU(s) // {opts.jobs} job(s)"


def record_path(out: Path, name: str) -> Path:
    """Where the record of ``name`` lives."""
    return out / "records" / f"{name}.json"


def load_record(out: Path, name: str) -> RepoRecord | None:
    """The finished record of ``name`` under ``out``, or None (absent or unreadable: redo)."""
    path = record_path(out, name)
    try:
        return RepoRecord.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def run_bench(suite: Suite, base: Path, opts: BenchOptions) -> list[RepoRecord]:
    """Bench the suite's repositories; return every record (earlier ones included) in suite
    order. Raises KeyboardInterrupt after stopping the running children when interrupted."""
    entries = [e for e in suite.repos if not opts.only or e.name in opts.only]
    if opts.only:
        unknown = sorted(set(opts.only) - {e.name for e in suite.repos})
        if unknown:
            raise SuiteError(f"no repository named {', '.join(unknown)}", field="--only")
    todo = [e for e in entries if load_record(opts.out, e.name) is None]
    say = opts.progress or (lambda _name, _text: None)
    for e in entries:
        if e not in todo:
            say(e.name, "done earlier; record kept")
    stop = threading.Event()
    caught: list[int] = []
    with _signals_stop(stop, caught), ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        pending: set[Future[RepoRecord | None]] = {
            pool.submit(bench_one, e, base, opts, stop) for e in todo
        }
        try:
            while pending and not stop.is_set():
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    fut.result()
        except BaseException:
            stop.set()
            raise
        finally:
            # Queued repositories never start; running ones see ``stop`` and end their child
            # (TERM, then KILL) without writing a record.
            for fut in pending:
                fut.cancel()
    if caught:
        raise BenchInterrupted(caught[0])
    records = [load_record(opts.out, e.name) for e in entries]
    return [r for r in records if r is not None]


def _signals_stop(
    stop: threading.Event, caught: list[int]
) -> contextlib.AbstractContextManager[None]:
    """On the main thread, SIGINT and SIGTERM set ``stop`` (and are noted in ``caught``)
    instead of killing the bench, so its children are stopped too. A bench started in the
    background has SIGINT ignored by its shell; this handler makes `kill -INT` work as well."""

    def handler(signum: int, frame: object) -> None:
        caught.append(signum)
        stop.set()

    return signals_handled(handler)


class _Interrupted(Exception):
    """The bench was stopped while a child ran (:func:`_child`): no record is written."""


def bench_one(
    entry: RepoEntry, base: Path, opts: BenchOptions, stop: threading.Event
) -> RepoRecord | None:
    """Bench one repository; write and return its record (None when interrupted)."""
    try:
        return _bench_one(entry, base, opts, stop)
    except _Interrupted:
        return None


def _bench_one(
    entry: RepoEntry, base: Path, opts: BenchOptions, stop: threading.Event
) -> RepoRecord | None:
    say = opts.progress or (lambda _name, _text: None)
    if stop.is_set():
        return None
    t0 = time.monotonic()
    deadline = t0 + opts.time_limit_s
    work = opts.out / "work" / entry.name
    logs = opts.out / "logs" / entry.name
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    rec = RepoRecord(
        name=entry.name,
        shape=entry.shape,
        cpu_runnable=entry.cpu_runnable,
        notes=entry.notes,
        source=_describe_source(entry, base, opts),
        pass_kind="reuse" if opts.reuse else "raw",
        # target applies only where the suite says what to expect.
        levels={**dict.fromkeys(LEVELS), "target": False if entry.expected else None},
    )
    say(entry.name, "copying")
    try:
        rec.commit = _prepare_copy(entry, base, opts, work)
        local = local_modules(work)
    except ReproBridgeError as exc:
        return _finish(rec, opts, t0, "init", f"copy: {str(exc)[-300:]}")
    init_doc: dict[str, Any] | None = None
    if opts.reuse is None:
        say(entry.name, "rb init")
        argv = [*opts.rb_argv, "init", str(work), "--json", "--agent", opts.agent]
        if not os.environ.get("RB_PROBE_BUDGET"):
            # The time limit covers init and audit: the probe gets its share of it, so
            # the audit that follows has time to run (the operator's budget wins).
            argv += ["--probe-budget", f"{max(60.0, PROBE_SHARE * opts.time_limit_s):.0f}"]
        done = _child(argv, work, logs / "init", deadline, stop)
        rec.init_exit, rec.init_s = done.termination.returncode, done.wall_s
        if (late := _past_limit(done, opts, "rb init")) is not None:
            return _finish(rec, opts, t0, "init", late)
        if done.termination.returncode != 0:
            return _finish(rec, opts, t0, "init", _error_line(logs / "init.stderr"))
        init_doc = _json_or_none(logs / "init.stdout")
        if init_doc is None:
            return _finish(rec, opts, t0, "init", "rb init printed no JSON report")
        rec.agent_cost_usd = _agent_cost(init_doc)
        rec.warnings = [str(w) for w in init_doc.get("warnings", [])][:20]
        _read_probe(rec, init_doc.get("probe"))
    rec.levels["init"] = True
    manifest = _manifest(work, init_doc)
    rec.dependencies = dependencies(_declared(manifest), entry.dependencies, local)
    experiments = manifest.get("experiments", {})
    if isinstance(experiments, dict):
        rec.declared_experiments = sorted(str(k) for k in experiments)
        rec.smoke_experiments = sorted(
            str(k)
            for k, v in experiments.items()
            if isinstance(v, dict) and "smoke" in (v.get("tiers") or {})
        )
    say(entry.name, "rb audit")
    argv = [
        *opts.rb_argv,
        "audit",
        "-C",
        str(work),
        "--tier",
        opts.tier,
        "--runs",
        str(opts.runs),
        "--backend",
        opts.backend,
        "--threads",
        str(run_threads(opts)[0]),
        # The bench measures what rb recovers and runs here: a repository asking for a
        # Python this machine lacks runs under rb's own (its environment level says so)
        # rather than not being judged at all.
        "--python-mismatch-ok",
        "--json",
        "-q",
    ]
    done = _child(argv, work, logs / "audit", deadline, stop)
    rec.audit_exit, rec.audit_s = done.termination.returncode, done.wall_s
    if (late := _past_limit(done, opts, "rb audit")) is not None:
        return _finish(rec, opts, t0, "environment", late)
    doc = _json_or_none(logs / "audit.stdout")
    # Every verdict (PASS, FAIL, INCOMPLETE) comes with the summary; other exits are errors.
    if doc is None or done.termination.returncode not in VERDICT_EXIT.values():
        return _finish(rec, opts, t0, "environment", _error_line(logs / "audit.stderr"))
    try:
        summary = AuditSummary.from_json(doc)
        _judge(rec, summary, _bundle_path(work, doc), entry)
    except RecordError as exc:
        return _finish(rec, opts, t0, "environment", f"rb audit --json: {exc.message}")
    return _finish(rec, opts, t0, None, "")


def _past_limit(done: Completed, opts: BenchOptions, verb: str) -> str | None:
    """Why ``verb`` failed when the repository's time limit stopped it, else None."""
    if done.termination.kind != "timeout":
        return None
    return f"time limit {opts.time_limit_s:g}s reached in {verb}"


def _finish(
    rec: RepoRecord, opts: BenchOptions, t0: float, failed: str | None, cause: str
) -> RepoRecord:
    if failed is not None:
        rec.levels[failed] = False
        for later in LEVELS[LEVELS.index(failed) + 1 :]:
            rec.levels[later] = (
                False if later != "target" or rec.levels[later] is not None else None
            )
    if rec.failed_level is None:
        rec.failed_level = next((lvl for lvl in LEVELS if rec.levels[lvl] is False), None)
    rec.cause = rec.cause or cause
    rec.wall_s = time.monotonic() - t0
    write_atomic(
        record_path(opts.out, rec.name),
        (rec.model_dump_json(indent=2) + "\n").encode(),
    )
    if opts.progress:
        opts.progress(
            rec.name,
            f"done: {rec.failed_level or 'all levels'}" + (f" — {rec.cause}" if rec.cause else ""),
        )
    return rec


# -- the copy -------------------------------------------------------------------------------


def _describe_source(entry: RepoEntry, base: Path, opts: BenchOptions) -> str:
    if opts.reuse is not None:
        return f"reuse {opts.reuse / 'work' / entry.name}"
    local = resolve_source(entry, base)
    if local is not None:
        return f"path {local}"
    return f"{entry.url}@{entry.commit}"


def _prepare_copy(entry: RepoEntry, base: Path, opts: BenchOptions, work: Path) -> str:
    """Make ``work`` a fresh copy of the repository; return its HEAD commit."""
    if work.exists():
        shutil.rmtree(work)
    work.parent.mkdir(parents=True, exist_ok=True)
    if opts.reuse is not None:
        earlier = opts.reuse / "work" / entry.name
        if not earlier.is_dir():
            raise ReproBridgeError(f"the first pass has no copy at {earlier}")
        shutil.copytree(earlier, work, symlinks=True)
    else:
        local = resolve_source(entry, base)
        if local is not None and _is_checkout_root(local):
            _proc.git(
                work.parent,
                "-c",
                "protocol.file.allow=always",
                "clone",
                "--no-hardlinks",
                "-q",
                str(local),
                str(work),
                timeout=600,
            )
        elif local is not None:
            # Not a checkout's root (a subdirectory, or a `.git` whose core.worktree points
            # elsewhere): copy the files only. A copied `.git` would bring its config, whose
            # filters and fsmonitor the commit below would run.
            shutil.copytree(local, work, symlinks=True, ignore=_without_git_metadata)
            _commit_all(work)
        elif entry.url is not None and entry.commit is not None:
            _proc.git(
                work.parent,
                "-c",
                "protocol.https.allow=always",
                "-c",
                "protocol.file.allow=always",
                "clone",
                "-q",
                "--no-checkout",
                entry.url,
                str(work),
                timeout=1800,
            )
            _proc.git(work, "checkout", "-q", entry.commit)
        else:
            raise ReproBridgeError(f"{entry.path} does not exist and no url is given")
    return _proc.head_commit(work) or ""


def _is_checkout_root(path: Path) -> bool:
    res = _proc.git(path, "rev-parse", "--show-toplevel", check=False)
    return res.returncode == 0 and Path(res.text.strip()).resolve() == path.resolve()


def _without_git_metadata(_directory: str, names: list[str]) -> list[str]:
    """``copytree``'s ignore: every ``.git`` (any case), file or directory, at any depth."""
    return [n for n in names if n.lower() == ".git"]


def _read_probe(rec: RepoRecord, probe: object) -> None:
    """The probe's cost and decisions from `rb init --json` (nothing when it did not probe)."""
    if not isinstance(probe, dict):
        return
    wall, runs = probe.get("wall_s"), probe.get("run_wall_s")
    rec.probe_s = float(wall) if isinstance(wall, int | float) else None
    rec.probe_run_s = float(runs) if isinstance(runs, int | float) else None
    rec.probe_stopped = str(probe.get("stopped", ""))[:300]
    decisions = probe.get("decisions")
    rec.probe_decisions = [
        f"{d.get('repair')}: {d.get('target')}"
        for d in (decisions if isinstance(decisions, list) else [])
        if isinstance(d, dict)
    ][:40]


def _commit_all(work: Path) -> None:
    _proc.git(work, "init", "-q")
    _proc.git(work, "add", "-A")
    _proc.git(
        work,
        "-c",
        "user.name=rb bench",
        "-c",
        "user.email=bench@reprobridge.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "rb bench: copy",
    )


# -- children -------------------------------------------------------------------------------


def _child(
    argv: list[str], work: Path, log: Path, deadline: float, stop: threading.Event
) -> Completed:
    """Run one rb child until ``deadline`` (its output in ``log``.stdout and .stderr);
    raises :class:`_Interrupted` when ``stop`` ended it."""
    env = dict(os.environ)
    pkg_parent = str(Path(reprobridge.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    marker = f"rb-bench-{uuid.uuid4().hex}"
    env[MARKER_VAR] = marker
    done = run_monitored(
        argv,
        cwd=work,
        env=env,
        stdout_path=log.with_name(log.name + ".stdout"),
        stderr_path=log.with_name(log.name + ".stderr"),
        timeout=max(1.0, deadline - time.monotonic()),
        grace=GRACE_S,
        marker=marker,
        stop_event=stop,
        stop_reason=lambda: "rb bench interrupted",
    )
    if done.termination.kind == "interrupted":
        raise _Interrupted
    return done


def _json_or_none(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _error_line(stderr: Path) -> str:
    """The child's ``error:`` line (its one-line cause), else its last line."""
    try:
        lines = stderr.read_text("utf-8", "replace").splitlines()
    except OSError:
        return "no output"
    for line in lines:
        if line.startswith("error: "):
            return line.removeprefix("error: ").strip()[:400]
    last = [ln for ln in lines if ln.strip()]
    return (last[-1].strip() if last else "no output")[:400]


def _agent_cost(init_doc: dict[str, Any]) -> float | None:
    agent = init_doc.get("agent")
    if isinstance(agent, dict) and isinstance(agent.get("cost_usd"), int | float):
        return float(agent["cost_usd"])
    return None


# -- judging the audit ----------------------------------------------------------------------


def _judge(rec: RepoRecord, summary: AuditSummary, bundle: Path, entry: RepoEntry) -> None:
    """Fill the levels, experiments, claims and cause from ``rb audit --json`` (RecordError
    when it is malformed)."""
    rows: list[ExperimentRow] = []
    for exp_id, v in sorted(summary.experiments.items()):
        env_st = v.levels["environment"].status
        proc_st = v.levels["procedure"].status
        metrics: dict[str, float] = {}
        for name, m in sorted(v.per_metric.items()):
            for i, value in enumerate(m.values):
                if value is not None and (i >= len(m.counted) or m.counted[i]):
                    metrics[name] = value
        failed = v.failed_level
        reason = f"{failed}: {v.levels[failed].reason}" if failed else ""
        started = _runs_started(bundle, exp_id)
        if env_st == "pass" and started is False:
            # The host backend's environment verdict passes before anything is installed:
            # the environment is built only for a run that started.
            env_st = "not-built"
        if proc_st == "fail" and "exit(124)" in reason:
            # GNU timeout's status: the launcher stopped the run at its tier's timeout; the
            # last stderr line is then whatever the run was printing, not a cause.
            reason += " — stopped by the launcher's timeout"
        elif proc_st == "fail" and started is not False:
            tail = _run_tail(bundle, exp_id)
            if tail:
                reason += f" — {tail}"
        # The audit's procedure is `incomplete` only when the run ended normally but its
        # notebook cells raised unmarked (audit/judge.py): it ran, and says what raised.
        raised = proc_st == "incomplete"
        if raised and not failed:
            reason = f"procedure incomplete: {v.levels['procedure'].reason}"
        if not reason and not metrics:
            reason = "metric: " + (v.levels["metric"].reason or "no metric extracted")
        rows.append(
            ExperimentRow(
                id=exp_id,
                environment=env_st,
                procedure=proc_st,
                metric_extracted=proc_st in {"pass", "incomplete"} and bool(metrics),
                reason=reason,
                metrics=metrics,
                cells_raised=raised,
            )
        )
    rec.experiments = rows
    rec.audit_id = summary.audit_id or None
    claims = summary.claims
    rec.claims_total = len(claims)
    rec.claims_holding = sum(1 for c in claims if c.holds is True)
    rec.levels["environment"] = any(r.environment == "pass" for r in rows)
    rec.levels["procedure"] = any(r.environment == "pass" and _ran(r) for r in rows)
    rec.levels["metric"] = any(r.metric_extracted for r in rows)
    if entry.expected:
        rec.levels["target"] = rec.levels["metric"] and all(
            any(
                exp.met_by(r.metrics[name])
                for r in rows
                if name in r.metrics and (exp.experiment is None or exp.experiment == r.id)
            )
            for name, exp in entry.expected.items()
        )
    if not rows:
        rec.cause = "rb init wrote no experiment"
        for lvl in ("environment", "procedure", "metric"):
            rec.levels[lvl] = False
        return
    failed = next((lvl for lvl in LEVELS if rec.levels[lvl] is False), None)
    if failed == "target":
        got = {n: r.metrics[n] for r in rows for n in entry.expected if n in r.metrics}
        rec.cause = f"target: expected {_expected_text(entry)}, measured {got or 'nothing'}"
    elif failed is not None:
        # The experiment that got furthest explains the repository's miss.
        best = max(rows, key=lambda r: (r.environment == "pass", _ran(r)))
        rec.cause = (
            f"{best.id}: {best.reason}" if best.reason else f"{best.id}: {failed} not reached"
        )


def _ran(row: ExperimentRow) -> bool:
    """Whether the row counts as "procedure ran": its procedure passed, or it ran to the end
    with notebook cells raising unmarked (listed apart in the totals)."""
    return row.procedure == "pass" or row.cells_raised


def _expected_text(entry: RepoEntry) -> str:
    return ", ".join(f"{n} {e.value:g}±{e.tolerance:g}" for n, e in sorted(entry.expected.items()))


def _bundle_path(work: Path, doc: dict[str, Any]) -> Path:
    """The bundle ``rb audit --json`` names (``path``), relative to ``work`` if relative."""
    bundle = Path(str(doc.get("path") or ""))
    return bundle if bundle.is_absolute() else work / bundle


def _run_dirs(bundle: Path, exp_id: str) -> list[Path]:
    runs = bundle / "runs" / exp_id
    if not runs.is_dir():
        return []
    return sorted(
        (p for p in runs.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )


def _runs_started(bundle: Path, exp_id: str) -> bool | None:
    """Whether any sealed run of the experiment started (its status.json records no
    ``not_started``); None when the bundle has no sealed run to tell."""
    seen = False
    for run in _run_dirs(bundle, exp_id):
        try:
            status = RunStatus.from_json(json.loads((run / "status.json").read_bytes()))
        except (OSError, ValueError, RecordError):
            continue
        seen = True
        if status.record.not_started is None:
            return True
    return False if seen else None


def _run_tail(bundle: Path, exp_id: str) -> str:
    """The last meaningful stderr line of the experiment's first run (the traceback's end)."""
    for run in _run_dirs(bundle, exp_id)[:1]:
        for name in ("stderr.log", "stdout.log"):
            try:
                text = (run / name).read_bytes()[-65536:].decode("utf-8", "replace")
            except OSError:
                continue
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            if lines:
                return lines[-1][:300]
    return ""


# -- dependencies ---------------------------------------------------------------------------

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """A distribution name in PEP 503 form (``Scikit_Learn`` -> ``scikit-learn``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str | None:
    """The normalized distribution name of a requirement line, or None."""
    m = _NAME.match(requirement)
    return normalize(m.group(1)) if m else None


def local_modules(root: Path) -> set[str]:
    """Normalized names of the repository's own top-level modules: ``*.py`` files and
    packages at the root and under ``src/`` (what a requirement must never name)."""
    names: set[str] = set()
    for top in (root, root / "src"):
        if not top.is_dir() or top.is_symlink():
            continue
        for p in top.iterdir():
            if p.is_symlink():
                continue
            if p.is_file() and p.suffix == ".py" and p.stem != "setup":
                names.add(normalize(p.stem))
            elif p.is_dir() and (p / "__init__.py").is_file():
                names.add(normalize(p.name))
    return names


def _manifest(work: Path, init_doc: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest rb init reported, else (a reused copy) the one in the copy."""
    if init_doc is not None:
        doc = init_doc.get("manifest", {})
        return doc if isinstance(doc, dict) else {}
    import tomllib

    try:
        return tomllib.loads((work / "reprobridge.toml").read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _declared(manifest: dict[str, Any]) -> list[str]:
    env = manifest.get("environment", {})
    reqs = [str(r) for r in env.get("python_requirements", [])] if isinstance(env, dict) else []
    return sorted({n for n in (requirement_name(r) for r in reqs) if n})


def dependencies(declared: list[str], needed: Sequence[str], local: set[str]) -> Dependencies:
    """Compare what rb declared with what a person verified is needed (``"a|b"``: either)."""
    have = set(declared)
    found: list[str] = []
    missing: list[str] = []
    for item in needed:
        options = [normalize(x.strip()) for x in item.split("|") if x.strip()]
        (found if any(o in have for o in options) else missing).append(item)
    return Dependencies(
        declared=sorted(have),
        needed=list(needed),
        found=found,
        missing=missing,
        local=sorted(have & local),
    )


def rb_commit() -> str:
    """The git commit of the rb being measured ("" when it is not a checkout)."""
    root = Path(reprobridge.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return ""
    commit = _proc.head_commit(root) or ""
    dirty = _proc.git(root, "status", "--porcelain", "--untracked-files=no", check=False)
    return commit + ("+dirty" if commit and dirty.text.strip() else "")


def make_report(
    suite_path: Path, suite: Suite, opts: BenchOptions, records: list[RepoRecord]
) -> BenchReport:
    """The bench's report: its settings, these records and the first pass's (``reuse``)."""
    baseline = None
    if opts.reuse is not None:
        names = [r.name for r in records]
        baseline = [b for b in (load_record(opts.reuse, n) for n in names) if b is not None]
    threads, threads_from = run_threads(opts)
    return BenchReport(
        suite=str(suite_path),
        suite_name=suite.bench.name,
        rb_version=reprobridge.__version__,
        rb_commit=rb_commit(),
        tier=opts.tier,
        runs=opts.runs,
        backend=opts.backend,
        agent=opts.agent if opts.reuse is None else "reused",
        time_limit_s=opts.time_limit_s,
        jobs=opts.jobs,
        threads=threads,
        threads_from=threads_from,
        reuse=str(opts.reuse) if opts.reuse else None,
        records=records,
        baseline=baseline,
    )
