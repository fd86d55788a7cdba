"""`rb report`: finding the bundle, writing the file or stdout, errors and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_helpers import Audits

from reprobridge.errors import AuditError
from reprobridge.report import render_report
from reprobridge.report.load import resolve_bundle


def _rb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reprobridge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
        timeout=120,
    )


def test_resolve_bundle_newest_id_and_path(audits: Audits, tmp_path: Path) -> None:
    assert resolve_bundle(None, audits.repo) == audits.second  # the newest finished
    assert resolve_bundle(audits.first.name, audits.repo) == audits.first
    assert resolve_bundle(str(audits.first), tmp_path) == audits.first
    with pytest.raises(AuditError, match="no evidence bundle"):
        resolve_bundle("20000101T000000Z-000000", audits.repo)
    with pytest.raises(AuditError, match="no finished audit"):
        resolve_bundle(None, tmp_path)
    unfinished = tmp_path / "repro" / "evidence" / "20990101T000000Z-abcdef"
    unfinished.mkdir(parents=True)
    (unfinished / "plan.json").write_text("{}")
    with pytest.raises(AuditError, match="not finished") as info:
        resolve_bundle(unfinished.name, tmp_path)
    assert info.value.hint == f"resume it: rb audit --resume {unfinished.name}"


def test_rb_report_writes_html_and_prints_the_path(audits: Audits, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    got = _rb("report", audits.first.name, "-o", str(out), cwd=audits.repo)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == str(out)
    assert out.read_text() == render_report(audits.repo, audits.first.name)


def test_rb_report_default_output_markdown_stdout_and_compare(audits: Audits) -> None:
    got = _rb("report", "-C", str(audits.repo), cwd=audits.repo.parent)
    assert got.returncode == 0, got.stderr
    written = audits.repo / "repro" / "report.html"
    try:
        assert got.stdout.strip() == str(written)
        assert audits.second.name in written.read_text()
    finally:
        written.unlink()
    md = _rb(
        "report",
        "--format",
        "md",
        "-o",
        "-",
        "--compare",
        audits.first.name,
        audits.second.name,
        cwd=audits.repo,
    )
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("## ❌ FAIL")
    assert "Compared with audit" in md.stdout
    assert "different plans" not in md.stderr + md.stdout  # same tier, backend and runs


def test_rb_report_compare_warns_on_the_terminal_when_plans_differ(
    audits: Audits, bundle_copy: Path
) -> None:
    summary = json.loads((bundle_copy / "audit.json").read_text())
    summary["tier"] = "smoke"
    (bundle_copy / "audit.json").write_text(json.dumps(summary))
    got = _rb(
        "report", "-o", "-", "--compare", str(audits.first), str(bundle_copy), cwd=audits.repo
    )
    assert got.returncode == 0, got.stderr
    assert got.stderr.startswith(
        "warning: the audits ran different plans: tier differs: full in A, smoke in B"
    )
    assert "The audits ran different plans" in got.stdout


def test_rb_report_errors(audits: Audits) -> None:
    missing = _rb("report", "nope", cwd=audits.repo)
    assert missing.returncode == AuditError.exit_code
    assert missing.stderr.startswith("error: ")
    both = _rb("report", "x", "--compare", "a", "b", cwd=audits.repo)
    assert both.returncode == 2
