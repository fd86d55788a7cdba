"""The evidence is what ran: an audit refuses launchers rendered from another manifest
than the one it records, and a work tree with uncommitted changes (which no run would
include) unless ``--allow-dirty``, which records them."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.cli import main
from reprobridge.constants import EVIDENCE_DIR
from reprobridge.errors import AuditError
from reprobridge.initializer import init_repository

_PY = f"{sys.version_info.major}.{sys.version_info.minor}"
_MANIFEST = f"""schema = 1
[project]
name = "epochs"
[environment]
python = "{_PY}"
nixpkgs = {{release = "nixos-25.11", rev = "b6018f87da91d19d0ab4cf979885689b469cdd41", narHash = "sha256-twXPFqFsrrY5r28Zh7Homgcp2gUMBgQ6WDS98Q/3xFI=", lastModified = 1782847189}}
[experiments.main]
command = "bash train.sh --epochs {{epochs}}"
params = {{epochs = 10}}
timeout = "5m"
[experiments.main.metrics.acc]
source = {{regex = "acc=([0-9.]+)"}}
min = 0.5
"""


def _opts(**kw: object) -> AuditOptions:
    return AuditOptions(runs=1, backend="host", sandbox="off", **kw)  # type: ignore[arg-type]


@pytest.fixture
def epochs_repo(make_repo: Callable[..., Path]) -> Path:
    """A committed repository after `rb init` whose one experiment prints its arguments."""
    root = make_repo({"train.sh": 'echo "args: $*"\necho acc=0.9\n', "reprobridge.toml": _MANIFEST})
    init_repository(root, lock="never")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)
    return root


def _edit_epochs(root: Path, value: int) -> None:
    manifest = root / "reprobridge.toml"
    manifest.write_text(manifest.read_text().replace("epochs = 10", f"epochs = {value}"))


def test_a_launcher_stale_against_the_manifest_is_refused(
    epochs_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = epochs_repo
    _edit_epochs(root, 3)  # the launcher still says --epochs 10
    with pytest.raises(AuditError, match=r"repro/launchers/main\.sh \(stale\)") as err:
        run_audit(root, _opts())
    assert err.value.hint is not None and "rb init" in err.value.hint
    assert not (root / EVIDENCE_DIR).exists()  # refused before any bundle was started
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "-C", str(root), "--backend", "host", "--sandbox", "off", "--runs", "1"])
    assert exit_.value.code == 9
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("error: ") and "repro/launchers/main.sh (stale)" in first

    # `rb init` renders it again: the run is now the one the recorded manifest says.
    init_repository(root, lock="never")
    result = run_audit(root, _opts())
    assert result.passed
    log = (result.path / "runs" / "main" / "0" / "stdout.log").read_text()
    assert "args: --epochs 3" in log
    assert "epochs = 3" in (result.path / "inputs" / "reprobridge.toml").read_text()


def test_a_missing_launcher_is_refused(epochs_repo: Path) -> None:
    (epochs_repo / "repro" / "launchers" / "main.sh").unlink()
    with pytest.raises(AuditError, match=r"repro/launchers/main\.sh \(missing\)"):
        run_audit(epochs_repo, _opts())


def test_a_launcher_from_another_rb_version_is_in_sync(epochs_repo: Path) -> None:
    """Only the header's version differs: the script is what this rb renders."""
    launcher = epochs_repo / "repro" / "launchers" / "main.sh"
    text = launcher.read_text()
    launcher.write_text(re.sub(r"\(rb [^)]*\)", "(rb 0.0.1)", text, count=1))
    assert "(rb 0.0.1)" in launcher.read_text()
    subprocess.run(["git", "-C", str(epochs_repo), "commit", "-qam", "old rb"], check=True)
    assert run_audit(epochs_repo, _opts()).passed


def _first_audit_repo(make_repo: Callable[..., Path]) -> Path:
    """The code committed, `rb init` run and nothing of it committed yet: every first
    audit's state (the manifest, flake, launchers and check script only `git add -N`)."""
    root = make_repo({"train.sh": 'echo "args: $*"\necho acc=0.9\n', "reprobridge.toml": _MANIFEST})
    init_repository(root, lock="never")
    return root


def test_a_first_audit_after_rb_init_is_not_dirty(make_repo: Callable[..., Path]) -> None:
    """rb's own artifacts are what every workspace takes from the work tree; REPRODUCE.md,
    repro/.gitignore and earlier evidence are read by no run: none makes the tree dirty."""
    root = _first_audit_repo(make_repo)
    status = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert "reprobridge.toml" in status and "repro/launchers/main.sh" in status
    first = run_audit(root, _opts())
    assert first.passed and first.record is not None and first.record.dirty_tree is None
    second = run_audit(root, _opts())  # the first audit's evidence is untracked now
    assert second.passed and not (second.path / "inputs" / "dirty.json").exists()


@pytest.mark.parametrize("change", ["tracked", "untracked"])
def test_a_dirty_tree_is_refused(
    epochs_repo: Path, change: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = epochs_repo
    if change == "tracked":
        (root / "train.sh").write_text('echo "args: $*"\necho acc=0.99\n')
        named = "train.sh"
    else:
        (root / "helper.py").write_text("X = 1\n")
        named = "helper.py (untracked)"
    with pytest.raises(AuditError, match="uncommitted changes that no run would include") as err:
        run_audit(root, _opts())
    assert named in err.value.message and "--allow-dirty" in (err.value.hint or "")
    assert not (root / EVIDENCE_DIR).exists()
    with pytest.raises(SystemExit) as exit_:
        main(["run", "main", "-C", str(root), "--backend", "host", "--sandbox", "off"])
    assert exit_.value.code == 9
    assert named in capsys.readouterr().err.splitlines()[0]


def test_allow_dirty_records_the_changes_the_runs_did_not_include(
    epochs_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = epochs_repo
    (root / "train.sh").write_text('echo "args: $*"\necho acc=0.1\n')  # would fail the metric
    (root / "notes.txt").write_text("todo\n")
    diff = subprocess.run(
        ["git", "-C", str(root), "diff", "HEAD", "--binary", "--", "train.sh"],
        capture_output=True,
        check=True,
    ).stdout
    expected = hashlib.sha256(diff + b"notes.txt\0").hexdigest()

    result = run_audit(root, _opts(allow_dirty=True))
    record = json.loads((result.path / "inputs" / "dirty.json").read_text())
    assert record["sha256"] == expected and record["in_runs"] is False
    assert record["changed"] == ["train.sh"] and record["untracked"] == ["notes.txt"]
    assert (result.path / "inputs" / "dirty.diff").read_bytes() == diff
    # The run was the commit's (acc=0.9 passes), as the evidence says.
    assert result.passed
    assert "acc=0.9" in (result.path / "runs" / "main" / "0" / "stdout.log").read_text()
    summary = json.loads((result.path / "audit.json").read_text())
    assert summary["dirty_tree"] == expected
    assert any(w.startswith(f"dirty tree: {expected}") for w in summary["warnings"])
    assert (
        subprocess.run(
            [sys.executable, "-m", "reprobridge", "verify", str(result.path)], capture_output=True
        ).returncode
        == 0
    )

    # The verdict line says so.
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "run",
                "main",
                "-C",
                str(root),
                "--backend",
                "host",
                "--sandbox",
                "off",
                "--allow-dirty",
            ]
        )
    assert exit_.value.code == 0
    verdict = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("verdict:")]
    assert verdict and f"dirty tree: {expected}" in verdict[0]


def test_the_report_lists_only_changes_the_runs_did_not_use(
    make_repo: Callable[..., Path],
) -> None:
    from reprobridge.report.html import audit_warnings
    from reprobridge.report.load import load_audit

    root = _first_audit_repo(make_repo)
    (root / "train.sh").write_text('echo "args: $*"\necho acc=0.8\n')
    result = run_audit(root, _opts(allow_dirty=True))
    notes = [w for w in audit_warnings(load_audit(result.path)) if "working tree" in w]
    assert len(notes) == 1, notes
    assert "train.sh" in notes[0] and "1 uncommitted change(s)" in notes[0]
    for own in ("reprobridge.toml", "repro/launchers", "flake.nix", "repro/check.py"):
        assert own not in notes[0]
