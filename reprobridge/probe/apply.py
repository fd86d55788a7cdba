"""Apply the probe's decisions to a draft: one stage of `rb init`, after the merge.

Contract of :func:`apply_decisions`: every decision whose target exists in the draft is
applied in the file's order; the value goes through the manifest's own validation (a
decision can never make an invalid manifest: one that would is skipped with a warning), its
``[derived]`` entries name the repair and the log line, and the guide lists it as a
decision. A decision about an experiment the draft no longer has is skipped with a warning,
never an error: the repository moved on, and the next probe re-derives what still holds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from reprobridge.manifest.io import digest, flatten, manifest_data
from reprobridge.manifest.schema import Derivation, Manifest, requirement_name
from reprobridge.probe.record import Decision
from reprobridge.recovery._common import MergeResult

#: The manifest keys a decision may set, by their first parts (the rest is the decision's):
#: what a run can settle, and nothing that widens what a run may do (network, timeouts,
#: hardware beyond GPUs, datasets' URLs) or what the environment trusts (indexes).
_SETTABLE = (
    ("experiments", "*", "hardware", "gpus"),
    ("experiments", "*", "workdir"),
    ("experiments", "*", "command"),
    ("experiments", "*", "metrics", "*"),
    ("experiments", "*", "main"),
    ("experiments", "*", "unbounded"),
    ("experiments", "*", "datasets"),
    ("datasets", "*"),
    ("environment", "python"),
    ("environment", "python_requirements"),
    ("environment", "pythonpath"),
)


def settable(target: str) -> bool:
    """Whether a decision may set ``target`` (a dotted manifest key)."""
    parts = tuple(target.split("."))
    return any(
        len(parts) == len(shape) and all(s in ("*", p) for s, p in zip(shape, parts, strict=True))
        for shape in _SETTABLE
    )


def _applied(data: dict[str, Any], d: Decision) -> str | None:
    """Apply ``d`` to ``data`` in place; why not (a sentence), or None when applied."""
    parts = d.target.split(".")
    if not settable(d.target):
        return f"`{d.target}` is not a key the probe may set"
    if parts[0] == "experiments" and parts[1] not in data.get("experiments", {}):
        return f"experiment `{parts[1]}` is no longer recovered"
    if d.op in ("set", "add"):
        cur = data
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        if d.op == "set":
            cur[parts[-1]] = d.value
            return None
        items = cur.get(parts[-1], [])
        if not isinstance(items, list):
            return f"`{d.target}` is not a list"
        if d.value not in items:
            cur[parts[-1]] = [*items, d.value]
        return None
    reqs: list[str] = list(data.get("environment", {}).get("python_requirements", []))
    name = d.value if d.op == "drop-requirement" else _table(d.value).get("name")
    hits = [i for i, r in enumerate(reqs) if name and requirement_name(r) == name]
    if not hits:
        return f"no requirement `{name}` to change"
    if d.op == "drop-requirement":
        reqs = [r for i, r in enumerate(reqs) if i not in hits]
    else:
        new = _table(d.value).get("with")
        if not isinstance(new, str) or not new:
            return "a replace-requirement decision needs `with`"
        reqs = [
            new if i == hits[0] else r for i, r in enumerate(reqs) if i == hits[0] or i not in hits
        ]
    data.setdefault("environment", {})["python_requirements"] = reqs
    return None


def _table(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def apply_decisions(merged: MergeResult, decisions: tuple[Decision, ...]) -> MergeResult:
    """``merged`` with ``decisions`` applied (see the module docstring)."""
    if not decisions:
        return merged
    manifest = merged.manifest
    derived = dict(manifest.derived)
    said: list[str] = []
    warnings: list[str] = []
    for d in decisions:
        data = manifest_data(manifest)
        why_not = _applied(data, d)
        if why_not is not None:
            warnings.append(f"probe decision on `{d.target}` ({d.repair}) not applied: {why_not}")
            continue
        data["derived"] = {}
        try:
            candidate = Manifest.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            warnings.append(
                f"probe decision on `{d.target}` ({d.repair}) not applied: "
                f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
            )
            continue
        source = f"probe: {d.repair}" + (f": {d.evidence}" if d.evidence else "")
        top = tuple(d.target.split("."))
        new_data = manifest_data(candidate)
        for key in [k for k in derived if k == d.target or k.startswith(d.target + ".")]:
            del derived[key]
        sub = _subtree(new_data, top)
        leaves = flatten(sub, top) if isinstance(sub, dict) else {d.target: sub}
        for dotted, value in leaves.items():
            derived[dotted] = Derivation(sources=[source], digest=digest(value), confidence="high")
        manifest = candidate
        said.append(f"probe ({d.repair}): {d.why}")
    manifest = manifest.model_copy(update={"derived": dict(sorted(derived.items()))})
    notes = replace(
        merged.notes,
        decisions=[*merged.notes.decisions, *said],
        warnings=[*merged.notes.warnings, *warnings],
    )
    return replace(merged, manifest=manifest, notes=notes)


def _subtree(data: dict[str, Any], parts: tuple[str, ...]) -> Any:
    cur: Any = data
    for p in parts:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur
