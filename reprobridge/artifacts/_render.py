"""``@name@`` placeholder rendering shared by the artifact renderers.

The nixpkgs ``substituteAll`` convention: a placeholder is ``@`` + an identifier + ``@``.
Unlike :class:`string.Template`, ``$`` and ``${...}`` (Nix antiquotation, shell expansion)
mean nothing here, and a render with a placeholder left over is an error rather than
silently shipping a broken file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

from reprobridge.errors import RenderError

#: What counts as a placeholder. Identifiers only, so ``user@example.org`` or an ``@`` in
#: a Nix string is not mistaken for one.
PLACEHOLDER = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)@")


def load_template(name: str) -> str:
    """The text of ``reprobridge/templates/<name>`` (package data).

    Raises :class:`RenderError` when the file is not shipped with the package.
    """
    try:
        return resources.files("reprobridge").joinpath("templates", name).read_text("utf-8")
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise RenderError(
            f"template {name!r} is missing from the installed package",
            hint="reinstall reprobridge; templates are package data",
        ) from exc


def fill(template: str, values: Mapping[str, str], *, name: str) -> str:
    """Replace every ``@key@`` of ``values`` in ``template``, in one pass.

    One pass means a value that itself contains ``@x@`` is not expanded again. Raises
    :class:`RenderError` when a placeholder of the template has no value, or a value has
    no placeholder (a renamed placeholder would otherwise be skipped without notice).
    """
    found = set(PLACEHOLDER.findall(template))
    missing = sorted(found - set(values))
    if missing:
        raise RenderError(
            f"{name}: no value for placeholder @{missing[0]}@", hint="this is a bug in rb"
        )
    unused = sorted(set(values) - found)
    if unused:
        raise RenderError(f"{name}: the template has no placeholder @{unused[0]}@")

    def _sub(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return PLACEHOLDER.sub(_sub, template)
