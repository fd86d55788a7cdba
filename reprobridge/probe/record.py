"""``repro/probe.toml``: what the probe learned by running, as decisions a person can undo.

The probe (:mod:`reprobridge.probe.loop`) runs the draft's experiments and turns what the runs
showed into :class:`Decision` records. They are an input of `rb init` like the paper: every
`rb init` (and `rb check`, which renders as `rb init` would) applies them to the draft, so the
artifacts stay in sync with the file without running anything again, and deleting a
decision from the file undoes it at the next `rb init`.

Contract: :func:`load_decisions` returns ``()`` when the file is absent and raises
:class:`~reprobridge.errors.ManifestError` naming the file and the field for a file that
does not parse or validate; :func:`render_decisions` is deterministic (decisions sorted by
target, then repair), so the same decisions give the same bytes.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, ValidationError

from reprobridge.constants import PROBE_FILE
from reprobridge.errors import ManifestError
from reprobridge.manifest.schema import StrictModel

__all__ = ["PROBE_FILE", "Decision", "ProbeFile", "load_decisions", "render_decisions"]

#: A TOML value a decision may set: what the manifest keys the repairs touch hold.
Value = bool | int | float | str | list[str] | dict[str, str | dict[str, str]]

Line = Annotated[str, StringConstraints(max_length=400)]


class Decision(StrictModel):
    """One thing the probe decided from a run, and the log line that made it decide.

    ``op`` says how ``value`` applies to ``target`` (a dotted manifest key):
    ``set`` replaces the value; ``add`` appends ``value`` to the list at ``target`` (when
    absent); ``drop-requirement`` removes the requirement named ``value`` from
    ``environment.python_requirements``; ``replace-requirement`` replaces the requirement
    whose name is ``value``'s ``name`` with ``value``'s ``with``.
    """

    repair: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{1,40}$")] = Field(
        description="The repair rule that made the decision."
    )
    target: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="The manifest key the decision sets, dotted."
    )
    op: Literal["set", "add", "drop-requirement", "replace-requirement"] = "set"
    value: Value = Field(description="The value (for requirement ops: the name, or a table).")
    why: Line = Field(description="One sentence: what the run showed and what was changed.")
    evidence: Line = Field("", description="The log line that showed it (redacted, cut).")


class ProbeFile(StrictModel):
    """The whole file."""

    schema_: Literal[1] = Field(1, alias="schema")
    decisions: list[Decision] = Field(default_factory=list)


def load_decisions(root: Path) -> tuple[Decision, ...]:
    """The decisions recorded in ``root``'s probe file (``()`` without one)."""
    path = root / PROBE_FILE
    if path.is_symlink():
        raise ManifestError(f"{PROBE_FILE}: is a symbolic link; rb reads only its own file")
    if not path.is_file():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{PROBE_FILE}: cannot be read: {exc}") from exc
    try:
        return tuple(ProbeFile.model_validate(data).decisions)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(
            f"{PROBE_FILE}: {where}: {first['msg']}",
            hint="fix or delete the entry; `rb init` probes again to re-derive it",
        ) from exc


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in sorted(value.items()))
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"not a TOML value: {value!r}")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _toml_string(key)


def _toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def render_decisions(decisions: tuple[Decision, ...] | list[Decision]) -> str:
    """The probe file's text for ``decisions`` (sorted; the same decisions, the same bytes)."""
    lines = [
        "# Generated by rb init's probe: what running the experiments showed, and what was",
        "# changed because of it. `rb init` applies every decision here to what it recovers;",
        "# delete a [[decisions]] entry to undo it (and run `rb init --no-probe`).",
        "schema = 1",
    ]
    for d in sorted(decisions, key=lambda d: (d.target, d.repair, d.op, _toml_value(d.value))):
        lines += [
            "",
            "[[decisions]]",
            f"repair = {_toml_string(d.repair)}",
            f"target = {_toml_string(d.target)}",
        ]
        if d.op != "set":
            lines.append(f"op = {_toml_string(d.op)}")
        lines += [
            f"value = {_toml_value(d.value)}",
            f"why = {_toml_string(d.why)}",
        ]
        if d.evidence:
            lines.append(f"evidence = {_toml_string(d.evidence)}")
    return "\n".join(lines) + "\n"
