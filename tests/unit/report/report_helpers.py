"""Shared by the report tests: the session's audits and a hostile bundle edit."""

from __future__ import annotations

import json
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
