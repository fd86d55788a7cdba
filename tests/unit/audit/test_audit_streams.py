""" "Last match" means last in time across stdout and stderr (issue 8).

The old auditor searched stdout, then stderr: a value printed on stdout *after* one on
stderr lost to it. Runs now also store both streams as one, in arrival order
(``output.log``), and regex metrics are read there; ``rb verify`` re-derives the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit


def test_value_printed_later_on_stdout_wins(tiny_repo: Callable[..., Path]) -> None:
    script = "echo acc=0.6 >&2\nsleep 0.3\necho acc=0.9\n"
    root = tiny_repo(script)
    manifest = root / "reprobridge.toml"
    manifest.write_text(manifest.read_text().replace("min = 0.5", "min = 0.8"))
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    per = result.summary["experiments"]["main"]["per_metric"]["acc"]
    assert per["values"] == [0.9], json.dumps(per, indent=1)
    assert result.summary["verdict"] == "PASS"
    run_dir = result.path / "runs/main/0"
    combined = (run_dir / "output.log").read_text()  # the launcher's `set -x` lines too
    assert combined.endswith("acc=0.6\nacc=0.9\n"), combined
    assert (run_dir / "stdout.log").read_text().endswith("acc=0.9\n")
    record = json.loads((run_dir / "status.json").read_text())["record"]
    assert record["output"]["total_bytes"] == len(combined.encode())
    checked = verify_audit(result.path)
    assert checked.ok and checked.verdict == "PASS", checked.problems
