"""rb report never blocks on a file of the bundle: a FIFO in place of a log hung it
(opening a FIFO for reading waits for a writer, and a bundle has none)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from reprobridge.report.html import render_html
from reprobridge.report.load import AuditData, load_audit


def test_a_fifo_in_place_of_a_log_or_record_is_read_as_absent(bundle_copy: Path) -> None:
    run = next(p for p in (bundle_copy / "runs").glob("*/0") if p.is_dir())
    for name in ("stderr.log", "timeline.jsonl", "env.json"):
        os.chmod(run, 0o755)
        (run / name).unlink()
        os.mkfifo(run / name)
    got: list[AuditData] = []
    reader = threading.Thread(target=lambda: got.append(load_audit(bundle_copy)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "rb report blocked on a FIFO in the bundle"
    (audit,) = got
    shown = next(r for e in audit.experiments for r in e.runs if r.k == 0)
    assert (shown.stderr_tail, shown.timeline, shown.env) == ("", [], {})
    assert "<!DOCTYPE html>" in render_html(audit)
