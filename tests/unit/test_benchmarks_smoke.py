"""The benchmark scripts run end to end at a tiny size (they are not tests themselves)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(*argv: str) -> str:
    proc = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_startup_smoke():
    out = _run(str(BENCH / "cli_startup.py"), "--runs", "1", "--top", "3")
    assert "rb --help" in out and "python -c pass" in out and "ratio" in out
    assert "reprobridge.cli" in out


def test_init_static_smoke():
    out = _run(str(BENCH / "init_static.py"), "--files", "200", "--no-transformers")
    assert "generated-200" in out and "ratio" in out
    assert "detectors ran" in out


def test_generated_repo_has_exactly_n_files(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        import init_static
    finally:
        sys.path.remove(str(BENCH))
    init_static.generate_repo(tmp_path, 150)
    assert sum(1 for p in tmp_path.rglob("*") if p.is_file()) == 150
    # The shape with many entry scripts and notebooks (pykan-like) too.
    init_static.generate(tmp_path / "entries", 400, "entries")
    files = [p for p in (tmp_path / "entries").rglob("*") if p.is_file()]
    assert len(files) == 400
    assert sum(p.suffix == ".ipynb" for p in files) == 8
    assert sum(p.parent.name == "experiments" for p in files) == 20


def test_manifest_render_smoke():
    out = _run(str(BENCH / "manifest_render.py"), "--keys", "50,120", "--old-limit", "50")
    lines = out.splitlines()
    assert "ratio old/new" in lines[0] and "same bytes" in lines[0]
    assert lines[1].split()[0] == "50" and lines[1].split()[-1] == "yes"
    assert lines[2].split()[0] == "120" and "skipped" in lines[2]
    assert lines[2].split()[-1] == "yes"  # the emitter's bytes are tomlkit's


def test_init_command_smoke():
    # rb init as users run it, against the parse floor (no pipreqs: it is not a dependency).
    out = _run(str(BENCH / "init_command.py"), "--files", "120", "--runs", "1")
    row = next(line for line in out.splitlines() if line.startswith("| generated-120 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "120" and cells[7].endswith("x") and cells[8].endswith("x")
    assert float(cells[13]) > 0  # rb's peak RSS in MB


def test_verify_smoke():
    out = _run(
        str(BENCH / "verify.py"), "--files", "60", "--mb", "0.1", "--runs", "2", "--repeat", "1"
    )
    assert "rb verify" in out and "sha256sum -c" in out
    assert "target <= 2.5x" in out and "peak" in out


def test_archive_source_smoke():
    # issue 14's archive rows: rb archive --with-source against tar in the same run.
    out = _run(
        str(BENCH / "archive_source.py"),
        *("--files", "30", "--repeat", "1", "--no-unpack", "--formats", "gz"),
    )
    assert "fixed cost" in out and "rb archive" in out
    assert "ratio rb/tar" in out and "size rb/tar" in out
