"""Option parsing shared by several verbs (defined once, as pip-tools does)."""

from __future__ import annotations

import click


def parse_overrides(items: tuple[str, ...]) -> dict[str, str]:
    """``--override-input NAME=URL`` values as a mapping; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise click.BadParameter(
                f"expected NAME=URL, got {item!r}", param_hint="--override-input"
            )
        out[name] = url
    return out
