"""The JSON Schema of reprobridge.toml, and the Markdown reference rendered from it.

Contract: :func:`manifest_json_schema` is the schema ``rb schema`` prints (pydantic's, by
alias, plus the defaults of ``default_factory`` fields, which pydantic leaves out) and
:func:`render_reference` turns it into ``docs/manifest-reference.md``. Both are pure and
deterministic: the same models give the same bytes, so a test can compare the committed
document with a fresh rendering.

Regenerate the document with ``python -m reprobridge.manifest.reference`` (``--check``
exits 1 when the committed file is stale).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from reprobridge.manifest.schema import SCHEMA_VERSION, Manifest

#: Where the rendered reference lives in a source checkout.
DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "docs" / "manifest-reference.md"
REGENERATE = "python -m reprobridge.manifest.reference"


class _WithFactoryDefaults(GenerateJsonSchema):
    """pydantic's generator, but a ``default_factory`` that takes no data shows its default.

    Without this, ``seeds`` (default ``[0]``) and every table field would look required-less
    and default-less to an editor reading the schema.
    """

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return schema.get("default", NoDefault)


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of the manifest, keys as written in reprobridge.toml (by alias)."""
    return Manifest.model_json_schema(by_alias=True, schema_generator=_WithFactoryDefaults)


def dumps_schema(schema: dict[str, Any]) -> str:
    """Stable JSON text of a schema (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# -- Markdown -------------------------------------------------------------------------------


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    return name.lower()


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _constraints(node: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "pattern" in node:
        out.append(f"matches `{node['pattern']}`")
    for key, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("minLength", "length >="),
        ("maxLength", "length <="),
    ):
        if key in node:
            out.append(f"{sign} {node[key]}")
    return out


def render_type(node: dict[str, Any]) -> str:
    """A short human type for a JSON Schema node: ``list of string``, ``table of Metric``..."""
    if "$ref" in node:
        name = _ref_name(node["$ref"])
        return f"[{name}](#{_anchor(name)})"
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return " or ".join(json.dumps(v) for v in node["enum"])
    if "anyOf" in node:
        # TOML has no null: a nullable field is one that may be left out.
        parts = [render_type(n) for n in node["anyOf"] if n.get("type") != "null"]
        return " or ".join(parts) if parts else "null"
    kind = node.get("type")
    base: str
    if kind == "array":
        base = f"list of {render_type(node.get('items', {}))}"
    elif kind == "object":
        if "patternProperties" in node:
            [(pattern, value)] = node["patternProperties"].items()
            base = f"table of {render_type(value)} (keys match `{pattern}`)"
        elif isinstance(node.get("additionalProperties"), dict):
            keys = node.get("propertyNames", {})
            key_text = f" (keys: {render_type(keys)})" if keys else ""
            base = f"table of {render_type(node['additionalProperties'])}{key_text}"
        else:
            base = "table"
    elif isinstance(kind, str):
        base = kind
    else:
        base = "any"
    extra = _constraints(node)
    return f"{base}, {', '.join(extra)}" if extra else base


def _default(field: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in field:
        return ""
    value = field["default"]
    if value is None:
        return "absent"
    if "$ref" in field and isinstance(value, dict):
        # A whole sub-table of defaults is noise here; its own section lists them.
        return "its section's defaults"
    return f"`{json.dumps(value, sort_keys=True, ensure_ascii=False)}`"


def _model_order(schema: dict[str, Any]) -> list[str]:
    """Models in first-reference order from the top level (stable, reads top-down)."""
    defs: dict[str, Any] = schema.get("$defs", {})
    order: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = _ref_name(ref)
                if name not in order:
                    order.append(name)
                    visit(defs[name])
            for key, value in node.items():
                if key != "$defs":
                    visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(schema)
    return order + sorted(set(defs) - set(order))


def _section(name: str, model: dict[str, Any], heading: str) -> list[str]:
    lines = [f"## {heading}", ""]
    if model.get("description"):
        lines += [" ".join(model["description"].split()), ""]
    props: dict[str, Any] = model.get("properties", {})
    if not props:
        return [*lines, "No fields.", ""]
    required = set(model.get("required", []))
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for key, field in props.items():
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{key}`",
                    _cell(render_type(field)),
                    _cell(_default(field, key in required)),
                    _cell(field.get("description", "")),
                ]
            )
            + " |"
        )
    return [*lines, ""]


def render_reference(schema: dict[str, Any]) -> str:
    """The Markdown reference of ``schema``: the top level, then one section per model."""
    defs: dict[str, Any] = schema.get("$defs", {})
    lines = [
        f"<!-- Generated by `{REGENERATE}` from the pydantic models in",
        "     reprobridge/manifest/schema.py. Do not edit by hand. -->",
        "",
        "# reprobridge.toml reference",
        "",
        f"Schema version {SCHEMA_VERSION}. Keys are written as below; unknown keys are errors. "
        "A field shown as `absent` by default may be left out. `rb schema` prints the same "
        "information as JSON Schema.",
        "",
    ]
    lines += _section("Manifest", schema, "Top level (`Manifest`)")
    for name in _model_order(schema):
        lines += _section(name, defs[name], name)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the reference; 0 when up to date or written."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    output = Path(paths[0]) if paths else DEFAULT_OUTPUT
    text = render_reference(manifest_json_schema())
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            sys.stderr.write(f"{output} is out of date; run `{REGENERATE}`\n")
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
