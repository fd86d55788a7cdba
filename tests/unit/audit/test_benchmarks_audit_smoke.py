"""benchmarks/audit_overhead.py runs end to end, two pairs of N=1 (a smoke run, not a measurement)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


def test_audit_overhead_smoke() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "audit_overhead.py"), "--runs", "1", "--repeats", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "bare" in out and "audited" in out
    assert "extra per run" in out and "ratio audited/bare" in out
    assert "median of 2 pairs: extra per run wall" in out
