"""benchmarks/hashing.py runs end to end at a tiny size (it is not a test itself)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "hashing.py"


def test_hashing_benchmark_smoke(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--size-mb",
            "4",
            "--files",
            "50",
            "--repeat",
            "1",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "rb sha256_file" in out and "openssl dgst -sha256" in out
    assert "ratio rb/openssl throughput" in out
    assert (
        "find | xargs -0 sha256sum" in out
        and "ratio rb sha256_files (walk) / sha256sum time" in out
    )
    assert list(tmp_path.iterdir()) == []  # the temp files are gone
