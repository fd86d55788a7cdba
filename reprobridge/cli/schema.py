"""`rb schema`: print the JSON Schema of reprobridge.toml (stable: sorted keys).

Editors point their TOML language server at this output; docs/manifest-reference.md is
rendered from the same schema.
"""

from __future__ import annotations

import click

from reprobridge.cli.options import common_options


@click.command("schema")
@common_options
def schema_command(as_json: bool) -> None:
    """Print the JSON Schema of reprobridge.toml (always JSON; --json is accepted for
    uniformity)."""
    from reprobridge.manifest.reference import dumps_schema, manifest_json_schema

    click.echo(dumps_schema(manifest_json_schema()), nl=False)
