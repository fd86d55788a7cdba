"""Experiments packaged as shell scripts (``scripts/train.sh``, ``run_all.sh``).

Every ``*.sh`` file (outside vendored directories; ReproBridge's own ``repro/`` is never
indexed) that runs Python — ``python x.py``, ``python -m pkg``, ``torchrun``, ``accelerate
launch``, ``deepspeed`` — is one experiment run as ``bash path/to/x.sh`` from the
repository root, kind ``shell``, medium confidence (the script is declared, but whether it
is an experiment is inferred). Scripts named for installing, linting or testing are not
experiments; data download/preparation scripts are reported with low confidence.

The id is the script's stem (``train_cifar``); a stem already taken gets its directory
prepended. The description is the first comment under the shebang. A distributed
launcher's literal process count becomes a ``hardware`` finding keyed on the script.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import PurePosixPath

from reprobridge.detect._text import (
    RunCommand,
    continued_lines,
    python_runs,
    slugify,
    unique_id,
)
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ExperimentValue, HardwareValue

_NOT_EXPERIMENT = re.compile(
    r"^(?:install|setup|lint|format|fmt|test|tests|check|clean|env|docker)"
)
_PREPARE = re.compile(r"^(?:download|prepare|preprocess|get|fetch|make_data|build_data)")


def script_lines(text: str) -> list[tuple[int, str]]:
    """Continuation-joined, non-comment lines of a shell script with their first line number."""

    def lines() -> Iterator[tuple[int, str]]:
        continued = False
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if continued or (line and not line.startswith("#")):
                yield number, line
                continued = line.endswith("\\")

    return [
        (start, " ".join(p for p in (part.rstrip() for part in parts) if p))
        for start, parts in continued_lines(lines())
    ]


def runs_in(text: str) -> list[tuple[int, RunCommand]]:
    """Every Python-running command in a shell script, in file order."""
    return python_runs(script_lines(text))


def _description(text: str) -> str:
    for line in text.splitlines()[:20]:
        stripped = line.strip()
        if stripped.startswith("#!") or not stripped:
            continue
        if stripped.startswith("#"):
            comment = stripped.lstrip("#").strip()
            if comment:
                return comment[:200]
            continue
        break
    return ""


class ShellScriptsDetector(Detector):
    """Shell scripts that run Python, each an experiment (see module docstring)."""

    name = "shell"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        taken: set[str] = set()
        scripts = (
            p
            for p in ctx.index.with_suffix(".sh")
            if not _NOT_EXPERIMENT.match(PurePosixPath(p).stem.lower())
        )
        for path, text in ctx.own_texts(scripts):
            stem = PurePosixPath(path).stem
            runs = runs_in(text)
            if not runs:
                continue
            parent = PurePosixPath(path).parent.name
            base = slugify(stem) or "script"
            if base in taken and parent:
                base = slugify(f"{parent}-{stem}") or base
            exp_id = unique_id(base, taken)
            entries = sorted({r.entry for _, r in runs})
            prepare = bool(_PREPARE.match(stem.lower()))
            note = "runs " + ", ".join(entries[:8])
            if prepare:
                note += "; looks like data preparation rather than an experiment"
            evidence = tuple(Evidence(path, n) for n, _ in runs[:5])
            findings.append(
                Finding(
                    kind="experiment",
                    key=exp_id,
                    value=ExperimentValue(
                        f"bash {shlex.quote(path)}", "shell", _description(text), path, "."
                    ),
                    evidence=evidence,
                    detector=self.name,
                    confidence="low" if prepare else "medium",
                    note=note,
                )
            )
            gpus = max((r.gpus or 0 for _, r in runs), default=0)
            if gpus:
                findings.append(
                    Finding(
                        kind="hardware",
                        key=path,
                        value=HardwareValue(gpus),
                        evidence=evidence,
                        detector=self.name,
                        confidence="medium",
                        note="process count of the distributed launcher",
                    )
                )
        return findings
