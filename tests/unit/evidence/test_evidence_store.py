"""One meaning of "finished" (evidence/store.py) behind every reader of a bundle.

Before the store, an audit killed between writing ``audit.json`` and sealing was done for
``rb report``, flagged by ``rb verify``, resumable by ``--resume`` and refused by
``rb archive``: ``test_an_audit_killed_before_its_seal_is_unfinished_for_every_command``
runs the real auditor to that point and asks every command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.archive.members import select_audits
from reprobridge.errors import ArchiveError, AuditError
from reprobridge.evidence.errors import EvidenceError
from reprobridge.evidence.provenance import register
from reprobridge.evidence.records import (
    AuditSummary,
    Plan,
    RecordError,
    RunRecord,
    RunStatus,
    StreamSummary,
    TerminationRecord,
)
from reprobridge.evidence.store import EvidenceStore, bundle_state
from reprobridge.report.load import resolve_bundle


def _bundle(root: Path, audit_id: str, *files: str) -> Path:
    """A bundle this operator started (recorded as the auditor records its own)."""
    path = root / audit_id
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_text("{}")
    register(path)
    return path


def test_states_follow_the_order_of_writes(tmp_path: Path) -> None:
    empty = _bundle(tmp_path, "20260101T000000Z-000001")
    running = _bundle(tmp_path, "20260101T000000Z-000002", "plan.json")
    unsealed = _bundle(tmp_path, "20260101T000000Z-000003", "plan.json", "audit.json")
    done = _bundle(tmp_path, "20260101T000000Z-000004", "plan.json", "audit.json", "SHA256SUMS")
    broken = _bundle(tmp_path, "20260101T000000Z-000005", "plan.json", "SHA256SUMS")
    _bundle(tmp_path, ".workspaces")  # the auditor's machinery, not a bundle
    (tmp_path / "20260101T000000Z-000006").symlink_to(done)  # a link is never a bundle
    store = EvidenceStore(tmp_path)
    assert store.bundles() == [empty, running, unsealed, done, broken]
    assert [bundle_state(p) for p in store.bundles()] == [
        "unfinished",
        "unfinished",
        "unfinished",
        "finished",
        "broken",
    ]
    assert store.unfinished() == [empty, running, unsealed]
    assert store.latest() == done
    assert store.resolve(None) == done and store.resolve(done.name) == done
    with pytest.raises(EvidenceError, match="not finished") as info:
        store.resolve(unsealed.name)
    assert info.value.hint == f"resume it: rb audit --resume {unsealed.name}"
    with pytest.raises(EvidenceError, match=r"audit\.json missing"):
        store.resolve(str(broken))
    with pytest.raises(EvidenceError, match="no evidence bundle"):
        store.resolve("20990101T000000Z-ffffff")
    assert EvidenceStore(tmp_path / "nowhere").latest() is None


def test_records_read_bundles_from_before_their_format_and_refuse_a_newer_one() -> None:
    old_plan = {"tier": "full", "runs": [{"experiment": "m", "k": 0, "seed": 1, "timeout_s": 9}]}
    plan = Plan.from_json(old_plan)
    assert plan.runs[0].key == "m/0" and plan.to_json()["format"] == "rb-plan/1"
    assert Plan.from_json(plan.to_json()) == plan
    with pytest.raises(RecordError, match="format"):
        Plan.from_json({**old_plan, "format": "rb-plan/2"})
    with pytest.raises(RecordError, match="runs"):
        Plan.from_json({"tier": "full", "runs": [{"experiment": "m"}]})
    summary = AuditSummary.from_json({"passed": True, "experiments": {}})
    assert summary.verdict == "PASS"  # before INCOMPLETE: read from `passed`
    with pytest.raises(RecordError, match="termination"):
        RunRecord.from_json({"termination": "exit"})
    with pytest.raises(RecordError, match=r"not_started\.reason"):
        RunRecord.from_json({"not_started": {"level": "procedure"}})
    record = RunRecord("m", 0, 1, "full", "host", True, "bubblewrap")
    status = RunStatus(record)
    assert RunStatus.from_json(status.to_json()) == status


def test_records_type_each_field_they_read() -> None:
    """Untrusted values are typed or refused by name; a status's malformed file entries
    are left to Bundle.check_run (which reports them), not read as files."""
    with pytest.raises(RecordError, match=r"record\.extra_ro_binds: not a list of strings"):
        RunRecord.from_json({"extra_ro_binds": ["/opt", 3]})
    with pytest.raises(RecordError, match=r"record\.termination\.returncode: not an integer"):
        RunRecord.from_json({"termination": {"kind": "exit", "returncode": "0"}})
    listed = {"a": {"sha256": "0" * 64, "size": 1}, "b": "junk", "c": {"sha256": 1, "size": 2}}
    raw = {**RunStatus(RunRecord("m", 0, 1, "full", "host", True, "bwrap")).to_json()}
    status = RunStatus.from_json({**raw, "files": listed})
    assert list(status.files) == ["a"] and status.files["a"].size == 1
    summary = AuditSummary.from_json({"hermetic": "yes", "sandboxed": False})
    assert (summary.hermetic, summary.sandboxed) == (None, False)


def test_a_run_record_with_every_field_set_reads_back_equal() -> None:
    """Fields past the identity are read by their annotation: each one round-trips, and a
    value of the wrong type is refused by the field's name."""
    stream = StreamSummary(10, "ab" * 32, True)
    record = RunRecord(
        "m", 2, 7, "smoke", "nix", False, "bubblewrap", ("/opt",),
        workspace={"path": "/w"}, max_processes=64, process_limit_by=("rlimit",), threads=4,
        built_from_source={"without_wheel": ["x"], "built": ["x"]},
        executor="local", placement={"node": "n1"}, files_refused={"a": "link"},
        termination=TerminationRecord("exit", 0, None, "exited 0"), wall_s=1.5,
        cpu_user_s=1.0, cpu_sys_s=0.25, cpu_source="rusage", started_at="s",
        finished_at="f", survivors_killed=0, stdout=stream, stderr=stream, output=stream,
        peaks={"rss_mb": 3},
    )  # fmt: skip
    assert RunRecord.from_json(record.to_json()) == record
    for key, bad, message in [
        ("wall_s", "1.5", r"record\.wall_s: not a number"),
        ("threads", 1.5, r"record\.threads: not an integer"),
        ("cpu_source", 3, r"record\.cpu_source: not a string"),
        ("stdout", {"total_bytes": "10"}, r"record\.stdout\.total_bytes: not an integer"),
    ]:
        with pytest.raises(RecordError, match=message):
            RunRecord.from_json({**record.to_json(), key: bad})


@pytest.mark.slow
def test_an_audit_killed_before_its_seal_is_unfinished_for_every_command(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    root = tiny_repo()
    clean = {k: v for k, v in os.environ.items() if k not in {"RB_TESTING", "RB_FAULT"}}

    def rb(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "reprobridge", *args],
            cwd=root,
            capture_output=True,
            text=True,
            env={**clean, **env},
            check=False,
            timeout=300,
        )

    # Writes of a one-run audit: 1-7 inputs, plan and fingerprints, 8-12 the run,
    # 13 audit.json, 14 SHA256SUMS. Die right after audit.json is in place.
    crashed = rb(
        "audit",
        "--runs",
        "1",
        "--backend",
        "host",
        "-q",
        RB_TESTING="1",
        RB_FAULT="after_rename:13",
    )
    assert crashed.returncode == -9, crashed.stderr
    (bundle,) = (root / "repro/evidence").iterdir()
    assert (bundle / "audit.json").is_file() and not (bundle / "SHA256SUMS").exists()

    # rb report: neither the newest finished audit nor reportable by name.
    with pytest.raises(AuditError, match="no finished audit"):
        resolve_bundle(None, root)
    named = rb("report", bundle.name, "-o", str(tmp_path / "r.html"))
    assert named.returncode != 0 and "not finished" in named.stderr, named.stderr
    # rb verify: a problem, with the command that finishes it.
    verify = rb("verify", str(bundle), "--json")
    assert verify.returncode == 1, verify.stderr
    problems = json.loads(verify.stdout)["problems"]
    assert f"{bundle.name}: not finished (not sealed); resume it first" in "\n".join(problems)
    # rb archive: `latest` is the newest finished audit (there is none), a name is refused.
    with pytest.raises(ArchiveError, match="no finished audit"):
        select_audits(root, ["latest"])
    with pytest.raises(ArchiveError, match="not finished"):
        select_audits(root, [bundle.name])
    # rb audit --resume: the one command that completes it; then every reader takes it.
    resumed = rb("audit", "--resume", "--backend", "host", "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert Path(json.loads(resumed.stdout)["path"]) == bundle
    assert resolve_bundle(None, root) == bundle
    assert rb("verify", str(bundle)).returncode == 0
    assert [a.audit_id for a in select_audits(root, ["latest"])] == [bundle.name]
    assert "nothing to resume" in rb("audit", "--resume", bundle.name).stderr
