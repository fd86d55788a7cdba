"""Only the operator's own bundles are resumed or taken as "the latest audit".

A bundle directory can arrive with the repository: committed under ``repro/evidence``
with a name dated in the future, or copied there. Before provenance, ``rb audit --resume``
took the newest unfinished bundle by name, reused its "sealed" runs without running
anything, judged them and signed the result with the operator's key; ``rb report`` and
``rb archive`` took a future-dated finished one as the latest audit. These tests plant such
bundles in a real git repository next to a real audit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.archive.members import select_audits
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.errors import AuditError
from reprobridge.evidence.provenance import provenance, register
from reprobridge.evidence.store import EvidenceStore
from reprobridge.report.html import render_html
from reprobridge.report.load import load_audit, resolve_bundle

FORGED = "29991231T235959Z-f0f0f0"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _plant(own: Path, name: str, *, unfinish: bool) -> Path:
    """A copy of the bundle ``own`` under another name (a bundle this operator never
    started); ``unfinish``: without its seal and audit.json, so its runs look resumable."""
    forged = own.parent / name
    shutil.copytree(own, forged)
    for dirpath, _, _ in os.walk(forged):
        os.chmod(dirpath, 0o755)  # a sealed bundle is read-only
    if unfinish:
        (forged / "SHA256SUMS").unlink()
        (forged / "audit.json").unlink()
    return forged


@pytest.fixture
def audited(tiny_repo: Callable[..., Path]) -> tuple[Path, Path]:
    """A repository and the one sealed bundle a real audit of it wrote."""
    root = tiny_repo()
    result = run_audit(root, AuditOptions(runs=1, backend="host", sandbox="off"))
    assert result.verdict == "PASS"
    return root, result.path


def test_resume_never_completes_a_bundle_this_operator_did_not_start(
    audited: tuple[Path, Path],
) -> None:
    root, own = audited
    forged = _plant(own, FORGED, unfinish=True)
    # Copied in (a tarball, a shared disk): same HEAD, same manifest, sealed runs.
    assert provenance(forged).foreign is not None
    assert provenance(own).own
    with pytest.raises(AuditError, match=r"no unfinished audit to resume \(1 unfinished"):
        run_audit(root, AuditOptions(resume="latest", backend="host", sandbox="off"))
    with pytest.raises(AuditError, match="not started by this operator"):
        run_audit(root, AuditOptions(resume=FORGED, backend="host", sandbox="off"))
    assert not (forged / "SHA256SUMS").exists()


def test_a_committed_bundle_is_foreign_even_when_this_operator_started_it(
    audited: tuple[Path, Path],
) -> None:
    root, own = audited
    assert resolve_bundle(None, root) == own
    _git(root, "add", "-f", "repro/evidence")
    _git(root, "commit", "-q", "-m", "evidence")
    assert provenance(own).foreign == "tracked in git (it came with the repository)"
    assert EvidenceStore(root / "repro/evidence").latest() is None


def test_resume_requires_the_plan_commit_to_be_head(audited: tuple[Path, Path]) -> None:
    root, own = audited
    unfinished = _plant(own, "20000101T000000Z-0a0a0a", unfinish=True)
    register(unfinished)  # as if this operator had started it and been killed
    (root / "later.txt").write_text("a later commit\n")
    _git(root, "add", "later.txt")
    _git(root, "commit", "-q", "-m", "later")
    with pytest.raises(AuditError, match="HEAD is"):
        run_audit(root, AuditOptions(resume="latest", backend="host", sandbox="off"))


def test_a_future_dated_foreign_bundle_is_never_the_latest_and_is_shown_foreign(
    audited: tuple[Path, Path],
) -> None:
    root, own = audited
    forged = _plant(own, FORGED, unfinish=False)
    _git(root, "add", "-f", f"repro/evidence/{FORGED}")
    _git(root, "commit", "-q", "-m", "a finished audit, from the future")
    # rb report and rb archive: the latest audit is the operator's own.
    assert resolve_bundle(None, root) == own
    assert [a.audit_id for a in select_audits(root, ["latest"])] == [own.name]
    # Named, it is read, and shown as foreign wherever it appears.
    page = render_html(load_audit(forged))
    assert "foreign bundle: not started by this operator" in page
    assert "foreign bundle" not in render_html(load_audit(own))
    out = verify_audit(forged)
    assert out.provenance.startswith("foreign: ")
    assert json.loads(json.dumps(out.to_json()))["provenance"] == out.provenance
    assert verify_audit(own).provenance == "own (started by this operator)"
