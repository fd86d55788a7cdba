"""Shared by the report tests: the session's audits and a hostile bundle edit."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Audits:
    """The example repository and its two audits (A passes; B fails baseline's metric)."""

    repo: Path
    first: Path
    second: Path


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def hostile_bundle(bundle: Path) -> None:
    """Put HOSTILE into a reason, a metric and an experiment name, a claim, a warning, a
    log, an environment variable and the host fingerprint of ``bundle``."""
    summary = json.loads((bundle / "audit.json").read_text())
    exp = summary["experiments"]["baseline"]
    exp["metric"]["reason"] = HOSTILE
    exp["per_metric"][HOSTILE] = exp["per_metric"]["test_accuracy"]
    summary["claims"][0]["expr"] = HOSTILE
    summary["warnings"].append(HOSTILE)
    summary["experiments"][HOSTILE] = summary["experiments"].pop("mixup")
    (bundle / "audit.json").write_text(json.dumps(summary))
    (bundle / "runs" / "baseline" / "0" / "stdout.log").write_text(f"</pre>{HOSTILE}\n")
    env = json.loads((bundle / "runs" / "baseline" / "0" / "env.json").read_text())
    env[HOSTILE] = HOSTILE
    (bundle / "runs" / "baseline" / "0" / "env.json").write_text(json.dumps(env))
    host = json.loads((bundle / "fingerprint" / "host.json").read_text())
    host["cpu"]["model"] = HOSTILE
    (bundle / "fingerprint" / "host.json").write_text(json.dumps(host))


#: What a console error, a refused load or a failed request looks like in the log.
PROBLEMS = re.compile(r":CONSOLE|Uncaught|Refused to|violates the following|net::ERR_")


def chromium(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``page`` (``extra``: --screenshot=..., --dump-dom) with
    every console message on stderr (see PROBLEMS)."""
    argv = [
        shutil.which("chromium") or "chromium",
        "--headless=new",
        "--no-sandbox",  # root in CI and containers
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing could reach a network anyway
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--log-level=0",
        *extra,
        page.as_uri(),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
