"""The agent's tools as the Messages API sees them: names, descriptions and JSON schemas,
and the check of a tool call's input against its schema (required fields, simple types)."""

from __future__ import annotations

import copy
from typing import Any

from reprobridge.agent.workspace import ToolError

_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_files",
        "description": "List files under a directory of the repository copy (recursive, capped).",
        "input_schema": {
            "type": "object",
            "properties": {"path": {**_STR, "description": "Directory; default '.'"}},
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file, optionally only lines start_line..end_line (1-based).",
        "input_schema": {
            "type": "object",
            "properties": {"path": _STR, "start_line": _INT, "end_line": _INT},
            "required": ["path"],
        },
    },
    {
        "name": "search",
        "description": "Search text files for a regular expression; returns path:line: text.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": _STR, "path": _STR},
            "required": ["pattern"],
        },
    },
    {
        "name": "run_command",
        "description": (
            "Run a bash command in a sandbox on a writable copy of the repository: no network "
            "unless the user allowed it, empty environment, read-only system, time-limited, "
            "output capped. Use it to try imports or a short smoke run."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"command": _STR, "timeout_s": _INT},
            "required": ["command"],
        },
    },
    {
        "name": "write_file",
        "description": (
            "Create or replace a text file in the repository copy. Becomes a patch the user "
            "reviews; give the reason. Not allowed: .git/, CI configs, .envrc, rb's files."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"path": _STR, "content": _STR, "reason": _STR},
            "required": ["path", "content", "reason"],
        },
    },
    {
        "name": "apply_patch",
        "description": "Apply a unified diff (git format, a/ b/ prefixes) to the copy; give the reason.",
        "input_schema": {
            "type": "object",
            "properties": {"patch": _STR, "reason": _STR},
            "required": ["patch", "reason"],
        },
    },
    {
        "name": "propose_manifest",
        "description": (
            "Set one value of reprobridge.toml by dotted path (e.g. "
            "environment.python_requirements, experiments.train.command). The value is JSON. "
            "Validated against the manifest schema. Numbers you observed or read go to a "
            "metric's `claimed`, never to `target` or thresholds."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"path": _STR, "value": {}, "reason": _STR},
            "required": ["path", "value", "reason"],
        },
    },
    {
        "name": "diagnose",
        "description": (
            "Classify what a run of an experiment printed (its output and exit code, e.g. "
            "from run_command) the way `rb init`'s probe does, and get the repairs the probe "
            "would decide (GPU need, working directory, missing data, rejected flags, missing "
            "modules, metrics the run printed). Apply them with propose_manifest."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"experiment": _STR, "output": _STR, "exit_code": {"type": "integer"}},
            "required": ["experiment", "output", "exit_code"],
        },
    },
    {
        "name": "finish",
        "description": "Stop and summarise what you found, changed and could not resolve.",
        "input_schema": {
            "type": "object",
            "properties": {"summary": _STR},
            "required": ["summary"],
        },
    },
]

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "object": dict,
    "array": list,
    "boolean": bool,
}


def check_input(name: str, data: object) -> dict[str, Any]:
    """``data`` checked against tool ``name``'s schema (required fields and simple types)."""
    schema = next((t["input_schema"] for t in TOOLS if t["name"] == name), None)
    if schema is None:
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(tool_names())}")
    if not isinstance(data, dict):
        raise ToolError("tool input must be a JSON object")
    for key in schema.get("required", []):
        if key not in data:
            raise ToolError(f"{name}: missing required field {key!r}")
    for key, value in data.items():
        spec = schema["properties"].get(key)
        if spec is None:
            raise ToolError(f"{name}: unknown field {key!r}")
        want = spec.get("type")
        if want and (
            not isinstance(value, _TYPES[want]) or (want == "integer" and isinstance(value, bool))
        ):
            raise ToolError(f"{name}: field {key!r} must be a {want}")
    return data


def tool_names() -> list[str]:
    return [t["name"] for t in TOOLS]


def tools_for_api() -> list[dict[str, Any]]:
    """The tool definitions as the Messages API takes them."""
    return copy.deepcopy(TOOLS)
