"""rb bench's runner with a stand-in rb (tests/fixtures/bench/fake_rb.py): copies, causes,
time limit, resume after an interruption, reuse; and one real end-to-end run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from reprobridge.bench.runner import BenchOptions, load_record, make_report, run_bench
from reprobridge.bench.suite import load_suite
from reprobridge.bench.table import render_markdown, totals
from tests.conftest import FIXTURES, git_init, write_tree

FAKE_RB = (sys.executable, str(FIXTURES / "bench" / "fake_rb.py"))


def _exp(
    env: str = "pass", proc: str = "pass", values: dict[str, float] | None = None
) -> dict[str, Any]:
    return {
        "environment": {
            "status": env,
            "reason": "host environment" if env == "pass" else "uv sync failed",
        },
        "procedure": {
            "status": proc,
            "reason": "all 1 run(s) completed" if proc == "pass" else "0 of 1 run(s) completed",
        },
        "metric": {
            "status": "pass" if values else "not-applicable",
            "reason": "no metric declared",
        },
        "per_metric": {n: {"values": [v], "counted": [True]} for n, v in (values or {}).items()},
    }


def _audit(exps: dict[str, Any], claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "audit_id": "a1",
        "path": "repro/evidence/a1",
        "experiments": exps,
        "claims": claims or [],
    }


def _ok(summary: dict[str, Any]) -> dict[str, Any]:
    return {"doc": summary}


def _init(reqs: list[str], experiments: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest = {"environment": {"python_requirements": reqs}, "experiments": experiments or {}}
    return {"doc": {"manifest": manifest, "warnings": []}}


def _repo(root: Path, play: dict[str, Any], extra: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True)
    write_tree(root, {"fake.json": json.dumps(play), "train.py": "print('hi')\n", **(extra or {})})
    return git_init(root)


def _suite(tmp_path: Path, entries: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text('[bench]\nname = "t"\n' + textwrap.dedent(entries))
    return path


def _bench(tmp_path: Path, suite_path: Path, **kw: Any) -> list[Any]:
    suite, base = load_suite(suite_path)
    opts = BenchOptions(out=tmp_path / "out", rb_argv=FAKE_RB, **kw)
    return run_bench(suite, base, opts)


def test_levels_and_the_cause_of_each_failure(tmp_path: Path) -> None:
    _repo(
        tmp_path / "good",
        {
            "init": _init(["numpy>=1", "torch"], {"train": {"tiers": {"smoke": {}}}, "nb": {}}),
            "audit": _ok(_audit({"train": _exp(values={"acc": 0.91})})),
        },
    )
    _repo(
        tmp_path / "initfails",
        {"init": {"exit": 5, "stderr": "error: setup.py: line 3: cannot parse\nhint: fix it"}},
    )
    _repo(
        tmp_path / "nosmoke",
        {
            "init": _init([]),
            "audit": {
                "exit": 9,
                "stderr": "error: reprobridge.toml: experiments: no experiment has a smoke tier",
            },
        },
    )
    _repo(
        tmp_path / "crash",
        {
            "init": _init(["torch", "good"]),
            "audit": {
                "exit": 1,
                "doc": _audit({"train": _exp(proc="fail")}),
                "files": {
                    "repro/evidence/a1/runs/train/0/stderr.log": "Traceback\nModuleNotFoundError: No module named 'matplotlib'\n"
                },
            },
        },
        extra={"good/__init__.py": ""},
    )
    not_started = {"record": {"not_started": {"level": "procedure", "reason": "hw-unavailable"}}}
    _repo(
        tmp_path / "nogpu",
        {
            "init": _init([]),
            "audit": {
                "exit": 1,
                "doc": _audit({"train": _exp(proc="fail")}),
                "files": {"repro/evidence/a1/runs/train/0/status.json": json.dumps(not_started)},
            },
        },
    )
    _repo(
        tmp_path / "slowrun",
        {
            "init": _init([]),
            "audit": {
                "exit": 1,
                "doc": _audit(
                    {
                        "train": {
                            **_exp(proc="fail"),
                            "procedure": {
                                "status": "fail",
                                "reason": "1 of 1 run(s) failed (run 1: exit(124))",
                            },
                        }
                    }
                ),
                "files": {
                    "repro/evidence/a1/runs/train/0/stderr.log": "[IPKernelApp] WARNING | noise\n"
                },
            },
        },
    )
    _repo(tmp_path / "noexp", {"init": _init([]), "audit": {"exit": 0, "doc": _audit({})}})
    _repo(
        tmp_path / "miss",
        {"init": _init([]), "audit": _ok(_audit({"t": _exp(values={"acc": 0.5})}))},
    )
    suite = _suite(
        tmp_path,
        """
        [[repo]]
        name = "good"
        path = "good"
        dependencies = ["numpy", "torch", "scikit-learn|sklearn"]
        expected = { acc = { value = 0.9, tolerance = 0.02 } }
        [[repo]]
        name = "initfails"
        path = "initfails"
        [[repo]]
        name = "nosmoke"
        path = "nosmoke"
        [[repo]]
        name = "crash"
        path = "crash"
        dependencies = ["torch", "matplotlib"]
        [[repo]]
        name = "nogpu"
        path = "nogpu"
        [[repo]]
        name = "slowrun"
        path = "slowrun"
        [[repo]]
        name = "noexp"
        path = "noexp"
        [[repo]]
        name = "miss"
        path = "miss"
        expected = { acc = { value = 0.9, tolerance = 0.02 } }
        """,
    )
    recs = {r.name: r for r in _bench(tmp_path, suite, jobs=2, time_limit_s=60)}
    good = recs["good"]
    assert good.levels == {
        "init": True,
        "environment": True,
        "procedure": True,
        "metric": True,
        "target": True,
    }
    assert good.cause == "" and good.failed_level is None
    assert good.declared_experiments == ["nb", "train"] and good.smoke_experiments == ["train"]
    assert good.dependencies.found == ["numpy", "torch"]
    assert good.dependencies.missing == ["scikit-learn|sklearn"]
    assert recs["initfails"].failed_level == "init"
    assert recs["initfails"].cause == "setup.py: line 3: cannot parse"
    assert recs["nosmoke"].failed_level == "environment"
    assert "no experiment has a smoke tier" in recs["nosmoke"].cause
    crash = recs["crash"]
    assert crash.levels["environment"] and crash.levels["procedure"] is False
    assert "No module named 'matplotlib'" in crash.cause
    assert crash.dependencies.local == ["good"]  # the repository's own package declared
    # The host backend's environment verdict passes before installing anything: a run
    # that never started (no GPU here) built no environment.
    assert recs["nogpu"].levels["environment"] is False
    assert recs["nogpu"].experiments[0].environment == "not-built"
    assert recs["slowrun"].cause == (
        "train: procedure: 1 of 1 run(s) failed (run 1: exit(124)) — stopped by the launcher's timeout"
    )
    assert recs["noexp"].cause == "rb init wrote no experiment"
    assert recs["miss"].levels["metric"] and recs["miss"].levels["target"] is False
    assert "expected acc 0.9±0.02, measured {'acc': 0.5}" in recs["miss"].cause
    # The user's checkouts are never written: the stand-in wrote into the copy only.
    assert not (tmp_path / "crash" / "repro").exists()
    assert (tmp_path / "out" / "work" / "crash" / "repro" / "evidence").is_dir()
    t = totals(list(recs.values()))
    assert (t.levels["metric"].k, t.levels["metric"].n) == (2, 8)
    assert (t.levels["target"].k, t.levels["target"].n) == (1, 2)
    assert (t.dependency_recall.k, t.dependency_recall.n) == (3, 5)
    assert t.local_module_repos == ["crash"]


def test_the_time_limit_stops_a_repository_and_says_so(tmp_path: Path) -> None:
    _repo(tmp_path / "slow", {"init": _init([]), "audit": {"sleep": 60}})
    suite = _suite(tmp_path, '[[repo]]\nname = "slow"\npath = "slow"\n')
    t0 = time.monotonic()
    (rec,) = _bench(tmp_path, suite, time_limit_s=3)
    assert time.monotonic() - t0 < 30
    assert rec.failed_level == "environment"
    assert rec.cause == "time limit 3s reached in rb audit"


def test_a_directory_that_is_not_a_checkout_is_copied(tmp_path: Path) -> None:
    src = tmp_path / "plain"
    src.mkdir()
    write_tree(
        src,
        {
            "fake.json": json.dumps(
                {"init": _init([]), "audit": _ok(_audit({"t": _exp(values={"x": 1.0})}))}
            )
        },
    )
    suite = _suite(tmp_path, '[[repo]]\nname = "plain"\npath = "plain"\n')
    (rec,) = _bench(tmp_path, suite)
    assert rec.levels["metric"] is True
    assert len(rec.commit) == 40
    assert not (src / ".git").exists()


def test_a_copied_directory_brings_no_git_config(tmp_path: Path) -> None:
    """A suite path whose ``.git`` sets ``core.worktree`` elsewhere is not a checkout's
    root, so it is copied; its ``.git`` (config naming a filter and fsmonitor) must not
    come along, and nothing it names runs while rb commits the copy."""
    marker = tmp_path / "pwned"
    src = tmp_path / "plain"
    src.mkdir()
    play = {"init": _init([]), "audit": _ok(_audit({"t": _exp(values={"x": 1.0})}))}
    write_tree(src, {"fake.json": json.dumps(play), ".gitattributes": "* filter=x\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    for key, value in {
        "core.worktree": str(elsewhere),
        "filter.x.clean": f"touch {marker}; cat",
        "core.fsmonitor": f"touch {marker}",
    }.items():
        subprocess.run(["git", "-C", str(src), "config", key, value], check=True)
    suite = _suite(tmp_path, '[[repo]]\nname = "plain"\npath = "plain"\n')
    (rec,) = _bench(tmp_path, suite)
    assert not marker.exists(), "a program from the copied .git/config ran"
    assert rec.levels["metric"] is True
    work = tmp_path / "out" / "work" / "plain"
    assert (work / "fake.json").is_file() and not (work / "elsewhere").exists()
    got = subprocess.run(
        ["git", "-C", str(work), "config", "--local", "--get", "core.worktree"], check=False
    )
    assert got.returncode == 1  # its own, new repository


_DRIVER = """
import sys
from pathlib import Path
from reprobridge.bench.runner import BenchOptions, run_bench
from reprobridge.bench.suite import load_suite
from reprobridge.errors import BenchInterrupted
suite, base = load_suite(Path(sys.argv[1]))
try:
    run_bench(suite, base, BenchOptions(out=Path(sys.argv[2]), rb_argv=(sys.executable, sys.argv[3]),
              progress=lambda n, t: print(n, t, flush=True)))
except BenchInterrupted as exc:
    sys.exit(exc.exit_status())
"""


def _running(fragment: str) -> list[str]:
    """Command lines of live processes that mention ``fragment``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if fragment in cmd:
            found.append(cmd)
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_bench_resumes_and_skips_finished_repositories(
    tmp_path: Path, signum: int
) -> None:
    quick = {"init": _init([]), "audit": _ok(_audit({"t": _exp(values={"x": 1.0})}))}
    _repo(tmp_path / "r1", quick)
    hang = _repo(tmp_path / "r2", {"init": _init([]), "audit": {"sleep": 120}})
    _repo(tmp_path / "r3", quick)
    suite = _suite(
        tmp_path, "".join(f'[[repo]]\nname = "r{i}"\npath = "r{i}"\n' for i in (1, 2, 3))
    )
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(suite), str(out), FAKE_RB[1]],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("r2 rb audit"):
            break
    assert load_record(out, "r1") is not None
    proc.send_signal(signum)
    proc.communicate(timeout=60)
    # 130 or 143 as shells report signals, and the running child was stopped with it.
    assert proc.returncode == 128 + signum
    assert _running(str(out / "work" / "r2")) == []
    assert load_record(out, "r2") is None and load_record(out, "r3") is None
    first = (out / "records" / "r1.json").read_bytes()
    # The hang is gone on the second try; r1 is not redone.
    (hang / "fake.json").write_text(json.dumps(quick))
    subprocess.run(["git", "-C", str(hang), "commit", "-qam", "quick"], check=True)
    said: list[str] = []
    suite_obj, base = load_suite(suite)
    recs = run_bench(
        suite_obj,
        base,
        BenchOptions(out=out, rb_argv=FAKE_RB, progress=lambda n, t: said.append(f"{n} {t}")),
    )
    assert [r.name for r in recs] == ["r1", "r2", "r3"]
    assert all(r.levels["metric"] for r in recs)
    assert "r1 done earlier; record kept" in said
    assert (out / "records" / "r1.json").read_bytes() == first


def test_reuse_audits_the_first_pass_copies_and_compares(tmp_path: Path) -> None:
    _repo(
        tmp_path / "r", {"init": _init([]), "audit": {"exit": 9, "stderr": "error: no smoke tier"}}
    )
    suite_path = _suite(tmp_path, '[[repo]]\nname = "r"\npath = "r"\n')
    (raw,) = _bench(tmp_path, suite_path)
    assert raw.levels["environment"] is False
    # A person refines the first pass's copy (here: what the stand-in will play).
    refined = tmp_path / "out" / "work" / "r" / "fake.json"
    refined.write_text(json.dumps({"audit": _ok(_audit({"t": _exp(values={"x": 1.0})}))}))
    suite, base = load_suite(suite_path)
    opts = BenchOptions(out=tmp_path / "second", rb_argv=FAKE_RB, reuse=tmp_path / "out")
    (rec,) = run_bench(suite, base, opts)
    assert rec.pass_kind == "reuse" and rec.init_exit is None
    assert rec.levels["metric"] is True
    md = render_markdown(make_report(suite_path, suite, opts, [rec]))
    assert "| r | no → yes | no → yes | no → yes | — → — | error: no smoke tier |" not in md
    assert "| r | no → yes | no → yes | no → yes | — → — | no smoke tier |  |" in md


@pytest.mark.slow
def test_real_rb_on_a_fixture_repository(tmp_path: Path) -> None:
    """The real rb (init, then a smoke audit on the host) on a stdlib-only trainer."""
    suite_path = _suite(
        tmp_path,
        f"""
        [[repo]]
        name = "tiny"
        path = "{FIXTURES / "bench" / "tiny-trainer"}"
        expected = {{ test_accuracy = {{ value = 0.99, tolerance = 0.02 }} }}
        """,
    )
    suite, base = load_suite(suite_path)
    (rec,) = run_bench(suite, base, BenchOptions(out=tmp_path / "out", time_limit_s=300))
    assert rec.levels == {
        "init": True,
        "environment": True,
        "procedure": True,
        "metric": True,
        "target": True,
    }, rec.cause


def _audit_argv(tmp_path: Path, name: str) -> list[str]:
    argv: list[str] = json.loads(
        (tmp_path / "out/work" / name / "fake-audit.argv.json").read_text()
    )
    return argv


def test_each_job_gets_its_share_of_the_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three audits side by side on 8 CPUs get 2 threads each (8 // 3), and the table says
    so; before, each started a thread pool as large as the machine."""
    from reprobridge.bench import runner

    monkeypatch.setattr(runner, "usable_cpus", lambda: 8)
    play = {"init": _init([]), "audit": _ok(_audit({"t": _exp(values={"x": 1.0})}))}
    for name in ("a", "b"):
        _repo(tmp_path / name, play)
    suite = _suite(tmp_path, '[[repo]]\nname = "a"\npath = "a"\n[[repo]]\nname = "b"\npath = "b"\n')
    suite_obj, _ = load_suite(suite)
    opts = BenchOptions(out=tmp_path / "out", rb_argv=FAKE_RB, jobs=3)
    records = run_bench(suite_obj, tmp_path, opts)
    for name in ("a", "b"):
        argv = _audit_argv(tmp_path, name)
        assert argv[argv.index("--threads") + 1] == "2"
    report = make_report(suite, suite_obj, opts, records)
    assert (report.threads, report.threads_from) == (2, "8 usable CPU(s) // 3 job(s)")
    assert "3 job(s) at once, 2 CPU thread(s) per run (8 usable CPU(s) // 3 job(s))" in (
        render_markdown(report)
    )
    # More jobs than CPUs: still one thread each, never zero.
    monkeypatch.setattr(runner, "usable_cpus", lambda: 2)
    assert runner.run_threads(BenchOptions(out=tmp_path, jobs=3)) == (
        1,
        "2 usable CPU(s) // 3 job(s)",
    )


def test_the_operators_thread_count_replaces_the_share(tmp_path: Path) -> None:
    _repo(tmp_path / "a", {"init": _init([]), "audit": _ok(_audit({"t": _exp()}))})
    suite = _suite(tmp_path, '[[repo]]\nname = "a"\npath = "a"\n')
    suite_obj, _ = load_suite(suite)
    opts = BenchOptions(out=tmp_path / "out", rb_argv=FAKE_RB, jobs=2, threads=5)
    records = run_bench(suite_obj, tmp_path, opts)
    argv = _audit_argv(tmp_path, "a")
    assert argv[argv.index("--threads") + 1] == "5"
    report = make_report(suite, suite_obj, opts, records)
    assert (report.threads, report.threads_from) == (5, "set by the operator")


def test_a_notebook_run_with_unmarked_raising_cells_counts_apart(tmp_path: Path) -> None:
    raised = {
        **_exp(values={"loss": 0.5}),
        "procedure": {
            "status": "incomplete",
            "reason": "all 1 run(s) completed, but notebook cells raised (run 1: "
            "nb.executed.ipynb: 1 cell(s) raised that nothing marks as meant to raise: "
            "cell 23 (ValueError: List arity mismatch: 5 != 4))",
        },
    }
    _repo(tmp_path / "lessons", {"init": _init([]), "audit": _ok(_audit({"nb": raised}))})
    suite = _suite(tmp_path, '[[repo]]\nname = "lessons"\npath = "lessons"\n')

    (rec,) = _bench(tmp_path, suite, jobs=1, time_limit_s=60)

    # It ran to the end and its metric was read from cells that did not raise: counted,
    # with the audit's own word kept and the cells named.
    assert rec.levels["procedure"] and rec.levels["metric"]
    (row,) = rec.experiments
    assert row.cells_raised and row.procedure == "incomplete" and row.metric_extracted
    assert row.reason.startswith("procedure incomplete: all 1 run(s) completed, but notebook")
    report = make_report(suite, load_suite(suite)[0], BenchOptions(out=tmp_path / "out"), [rec])
    assert (
        "- counted with notebook cells that raised unmarked (audit procedure incomplete): "
        "lessons (nb: procedure incomplete: all 1 run(s) completed, but notebook cells raised"
    ) in render_markdown(report)
    # The same totals without such runs, beside them: here nothing is left.
    assert (
        "- without them (only runs whose procedure passed), CPU-runnable: procedure ran "
        "0/1 = 0% [0–79%]; metric extracted 0/1 = 0% [0–79%]"
    ) in render_markdown(report)
