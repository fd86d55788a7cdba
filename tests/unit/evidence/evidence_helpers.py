"""Shared builders for the evidence tests: a complete bundle, and fake secrets made at runtime.

Fake tokens are assembled from pieces so that this repository never contains a string a
secret scanner (ours, gitleaks) would flag.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

from reprobridge.constants import EVIDENCE_DIR
from reprobridge.evidence import Bundle

AUDIT_ID = "2026-01-01T00-00-00Z-test"


def build_bundle(root: Path, *, seal: bool = True, audit_id: str = AUDIT_ID) -> Bundle:
    """A small but complete bundle under ``root/repro/evidence``: plan, fingerprint, two
    sealed runs, journal, audit.json."""
    bundle = Bundle.create(root / EVIDENCE_DIR, audit_id)
    with bundle.lock():
        bundle.write_json("plan.json", {"experiments": ["train"], "repeats": 2})
        bundle.journal_append({"event": "started"})
        bundle.write_json("fingerprint/host.json", {"cpu": "test", "ram_gb": 1})
        bundle.write_json("fingerprint/gpu.json", {"gpus": [], "note": "no NVIDIA GPU"})
        for k in (1, 2):
            run = bundle.run_dir("train", k)
            (run / "stdout.log").write_bytes(f"epoch 1 loss=0.{k}234\nacc=0.9{k}\n".encode())
            (run / "stderr.log").write_bytes(b"")
            bundle.write_json(f"runs/train/{k}/metrics.json", {"acc": 0.9 + k / 100})
            bundle.seal_run("train", k, {"exit": 0, "wall_s": 1.5})
            bundle.journal_append({"event": "run-sealed", "run": f"train/{k}"})
        bundle.write_json("audit.json", {"verdict": "PASS"})
        bundle.journal_append({"event": "finished"})
        if seal:
            bundle.write_sha256sums()
    return bundle


_rnd = random.Random(1234)


def rand(alphabet: str, n: int, rnd: random.Random = _rnd) -> str:
    return "".join(rnd.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
TOKCH = ALNUM + "_-"
UPPER_DIGITS = string.ascii_uppercase + string.digits


def fake(kind: str, rnd: random.Random = _rnd) -> str:
    """A syntactically valid fake secret of ``kind`` (one per redaction rule)."""
    sk = "s" + "k-"
    if kind == "anthropic-api03":
        return sk + "ant-" + "api" + "03-" + rand(TOKCH, 93, rnd) + "A" + "A"
    if kind == "anthropic-admin01":
        return sk + "ant-" + "admin" + "01-" + rand(TOKCH, 93, rnd) + "A" + "A"
    if kind == "anthropic-oat01":
        return sk + "ant-" + "oat" + "01-" + rand(TOKCH, 60, rnd)
    if kind == "openai-legacy":
        return sk + rand(ALNUM, 48, rnd)
    if kind == "openai-proj":
        return sk + "pr" + "oj-" + rand(TOKCH, 120, rnd)
    if kind == "huggingface":
        return "h" + "f_" + rand(string.ascii_letters, 34, rnd)
    if kind == "aws":
        return "AK" + "IA" + rand(UPPER_DIGITS, 16, rnd)
    if kind == "github":
        return "gh" + "p_" + rand(ALNUM, 36, rnd)
    if kind == "github-pat":
        return "github" + "_pat_" + rand(ALNUM + "_", 82, rnd)
    if kind == "jwt":
        return ".".join(
            [
                "ey" + "J" + rand(TOKCH, 30, rnd),
                "ey" + "J" + rand(TOKCH, 40, rnd),
                rand(TOKCH, 43, rnd),
            ]
        )
    if kind == "pem":
        body = "\n".join(rand(ALNUM + "+/", 64, rnd) for _ in range(5))
        label = "PRIV" + "ATE KEY"
        return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
    raise ValueError(kind)
