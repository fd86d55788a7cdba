"""rb schema and docs/manifest-reference.md: stable output, and the committed doc is current."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from reprobridge.manifest import reference
from reprobridge.manifest.schema import Manifest

DOC = Path(__file__).resolve().parents[2] / "docs" / "manifest-reference.md"


def test_committed_reference_is_up_to_date():
    fresh = reference.render_reference(reference.manifest_json_schema())
    assert DOC.read_text(encoding="utf-8") == fresh, (
        f"{DOC} is stale: run `{reference.REGENERATE}` and commit the result"
    )


def test_reference_is_deterministic_and_covers_every_model():
    schema = reference.manifest_json_schema()
    text = reference.render_reference(schema)
    assert text == reference.render_reference(reference.manifest_json_schema())
    for name in schema["$defs"]:
        assert f"\n## {name}\n" in text
    # every top-level key of the manifest appears as a row
    for key in Manifest.model_json_schema(by_alias=True)["properties"]:
        assert f"| `{key}` |" in text


def test_factory_defaults_are_in_the_schema():
    schema = reference.manifest_json_schema()
    experiment = schema["$defs"]["Experiment"]["properties"]
    assert experiment["seeds"]["default"] == [0]
    assert experiment["params"]["default"] == {}
    assert schema["properties"]["schema"]["default"] == 1


def test_render_type_shapes():
    assert reference.render_type({"type": "array", "items": {"type": "string"}}) == "list of string"
    assert reference.render_type({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "integer"
    assert reference.render_type({"$ref": "#/$defs/Metric"}) == "[Metric](#metric)"
    assert reference.render_type({"type": "integer", "minimum": 0}) == "integer, >= 0"
    assert reference.render_type({"enum": ["a", "b"]}) == '"a" or "b"'


def test_check_mode(tmp_path):
    out = tmp_path / "ref.md"
    assert reference.main(["--check", str(out)]) == 1
    assert reference.main([str(out)]) == 0
    assert reference.main(["--check", str(out)]) == 0


def test_rb_schema_prints_stable_json():
    from reprobridge.cli import cli

    runner = CliRunner()
    first = runner.invoke(cli, ["schema"])
    second = runner.invoke(cli, ["schema"])
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    schema = json.loads(first.output)
    assert schema["title"] == "Manifest"
    assert "schema" in schema["properties"]  # by alias, not `schema_`
    assert first.output == json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
