"""The manifest draft the agent proposes values into.

Contract: a proposal is accepted only when the whole draft still validates against the
manifest schema; the agent never sets a metric's target or thresholds (a number it reports
becomes the metric's ``claimed``), and a changed experiment command must name a script or
module that exists in the repository. A refusal is a :class:`ToolError` for the model.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reprobridge.agent.workspace import ToolError
from reprobridge.errors import ManifestError
from reprobridge.manifest.io import flatten, validate_document


@dataclass(frozen=True)
class Proposal:
    """An accepted manifest change: dotted path, JSON value, the model's reason."""

    path: str
    value: Any
    reason: str


_METRIC_LEAF = re.compile(r"^experiments\.[^.]+\.(?:tiers\.[^.]+\.)?metrics\.[^.]+\.(\w+)$")
_THRESHOLDS = frozenset({"target", "tolerance", "relative_tolerance", "min", "max"})
_PATH = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")


@dataclass
class ManifestDraft:
    """The static manifest (plain data, no ``derived``) plus the proposals accepted so far."""

    data: dict[str, Any]
    exists: Callable[[str], bool]
    accepted: list[Proposal] = field(default_factory=list)

    def propose(self, path: object, value: Any, reason: object) -> str:
        """Validate and accept one proposal; ToolError with a one-line reason otherwise."""
        if not isinstance(path, str) or not _PATH.match(path):
            raise ToolError("path must be dotted keys, e.g. environment.python_requirements")
        if not isinstance(reason, str) or not reason.strip():
            raise ToolError("give a reason")
        parts = path.split(".")
        if parts[0] not in {"project", "environment", "datasets", "experiments", "claims"}:
            raise ToolError(f"{path}: only project, environment, datasets, experiments, claims")
        note = ""
        m = _METRIC_LEAF.match(path)
        if m and m.group(1) == "target":
            # A number the agent reports is a claim: the auditor measures, the paper sets targets.
            parts[-1] = "claimed"
            path = ".".join(parts)
            note = " (stored as `claimed`: an agent's number never becomes a target)"
        candidate = copy.deepcopy(self.data)
        cur = candidate
        for p in parts[:-1]:
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ToolError(f"{path}: {p} is not a table")
            cur = nxt
        cur[parts[-1]] = value
        before, after = flatten(self.data), flatten(candidate)
        for key in sorted(set(before) | set(after)):
            mm = _METRIC_LEAF.match(key)
            if mm and mm.group(1) in _THRESHOLDS and before.get(key) != after.get(key):
                raise ToolError(
                    f"{key}: targets and thresholds come from the paper, not from the agent; "
                    "propose the metric's `claimed` value instead"
                )
        try:
            validate_document({"schema": 1, **candidate}, path="reprobridge.toml")
        except ManifestError as exc:
            raise ToolError(str(exc)) from None
        for exp_id, exp in (candidate.get("experiments") or {}).items():
            old = (self.data.get("experiments") or {}).get(exp_id) or {}
            if exp.get("command") != old.get("command") or exp.get("workdir") != old.get("workdir"):
                missing = _missing_script(exp["command"], exp.get("workdir", "."), self.exists)
                if missing:
                    raise ToolError(
                        f"experiments.{exp_id}.command: {missing} does not exist in the repository"
                    )
        self.data = candidate
        self.accepted.append(Proposal(path, value, reason.strip()))
        return f"accepted {path}{note}"


def _missing_script(command: str, workdir: str, exists: Callable[[str], bool]) -> str | None:
    """The script or module a command runs when it is missing, else None."""
    try:
        words = shlex.split(command)
    except ValueError:
        return f"`{command}` (unbalanced quotes)"
    base = "" if workdir in ("", ".") else workdir.rstrip("/") + "/"
    for i, w in enumerate(words):
        if w == "-m" and i + 1 < len(words):
            mod = base + words[i + 1].replace(".", "/")
            if not any(exists(mod + s) for s in (".py", "/__init__.py", "/__main__.py")):
                return f"module {words[i + 1]}"
            return None
        if re.search(r"\.(py|sh|ipynb|R|jl)$", w) and not w.startswith("-"):
            target = os.path.normpath(base + w)
            return None if exists(target) else target
    return None
