"""What `rb audit` must refuse before it runs anything: resuming with a manifest that
changed since the audit started, and `--sandbox on` where bubblewrap cannot isolate."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge import sandbox
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.cli import main
from reprobridge.constants import EVIDENCE_DIR
from reprobridge.errors import AuditError, MachineError


def _unfinished_audit(root: Path) -> Path:
    """A finished audit with its seal removed: what a kill before sealing leaves."""
    bundle = run_audit(root, AuditOptions(runs=1, backend="host", sandbox="off")).path
    (bundle / "SHA256SUMS").unlink()
    return bundle


def test_resume_with_a_changed_manifest_is_refused(
    tiny_repo: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tiny_repo("echo acc=0.9\n")
    bundle = _unfinished_audit(root)
    journal = (bundle / "journal.jsonl").read_bytes()
    manifest = root / "reprobridge.toml"
    manifest.write_text(manifest.read_text().replace("min = 0.5", "min = 0.95"))
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "stricter"], check=True)

    with pytest.raises(AuditError, match="the manifest changed since this audit started"):
        run_audit(root, AuditOptions(backend="host", sandbox="off", resume="latest"))
    # Refused before anything was added to the bundle, and it stays unsealed.
    assert (bundle / "journal.jsonl").read_bytes() == journal
    assert not (bundle / "SHA256SUMS").exists()
    # The same from the command line: one error line, exit 9.
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "audit",
                "-C",
                str(root),
                "--backend",
                "host",
                "--sandbox",
                "off",
                "--resume",
                "latest",
            ]
        )
    assert exit_.value.code == 9
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "manifest changed" in err.splitlines()[0]


def test_resume_with_the_same_manifest_finishes(tiny_repo: Callable[..., Path]) -> None:
    """The contrast: the refusal above is the manifest check, not resuming as such."""
    root = tiny_repo("echo acc=0.9\n")
    bundle = _unfinished_audit(root)
    result = run_audit(root, AuditOptions(backend="host", sandbox="off", resume="latest"))
    assert result.path == bundle and (bundle / "SHA256SUMS").is_file() and result.passed


@pytest.fixture(params=["missing", "no-namespaces"])
def no_bwrap(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> str:
    """This machine without a usable bubblewrap: none at /usr/bin/bwrap (the only place rb
    looks), or one that cannot create namespaces (a container)."""
    if request.param == "missing":
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
        why = "/usr/bin/bwrap not found"
    else:
        fake = tmp_path / "bwrap"
        fake.write_text(
            "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
        why = "No permissions to create new namespace"
    # The probe is cached per process: use the uncached one, so no other test sees this.
    monkeypatch.setattr(sandbox, "sandbox_unusable", sandbox.sandbox_unusable.__wrapped__)
    return why


def test_sandbox_on_without_bubblewrap_fails_before_anything(
    no_bwrap: str, tiny_repo: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tiny_repo("echo acc=0.9\n")
    with pytest.raises(MachineError, match="bubblewrap cannot run here") as err:
        run_audit(root, AuditOptions(runs=1, backend="host", sandbox="on"))
    assert no_bwrap in str(err.value) and "--sandbox off" in (err.value.hint or "")
    evidence = root / EVIDENCE_DIR
    assert not evidence.exists() or not any(evidence.iterdir()), "no bundle left behind"
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "-C", str(root), "--backend", "host", "--sandbox", "on"])
    assert exit_.value.code == 11
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("error: bubblewrap cannot run here") and lines[1].startswith(
        "hint: "
    )


def test_sandbox_auto_without_bubblewrap_says_so_in_the_evidence(
    no_bwrap: str, tiny_repo: Callable[..., Path]
) -> None:
    root = tiny_repo("echo acc=0.9\n")
    result = run_audit(root, AuditOptions(runs=1, backend="host", sandbox="auto"))
    audit = json.loads((result.path / "audit.json").read_text())
    assert audit["sandboxed"] is False and no_bwrap in audit["sandbox"]
