"""The layers of docs/architecture.md hold: no module imports one of a higher layer.

Every import of rb's own modules counts, at the top of a module or inside a function (a
lazy import is still a dependency). A new top-level module or package must be given a
layer here, as docs/architecture.md gives it one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reprobridge"

#: docs/architecture.md, "Layers", from the bottom. Within layer 3 detect/ comes first:
#: the merge and the renderers read findings, never the other way round.
LAYERS: dict[str, float] = {
    **dict.fromkeys(
        ["__init__", "errors", "constants", "_log", "_fs", "_tarsafe", "stats", "_proc"], 1.0
    ),
    "_machine": 1.1,
    "sandbox": 1.2,
    **dict.fromkeys(["manifest", "data", "evidence"], 2.0),
    "detect": 3.0,
    **dict.fromkeys(["recovery", "artifacts", "agent", "probe"], 3.1),
    **dict.fromkeys(
        [
            "initializer",
            "audit",
            "archive",
            "report",
            "bench",
            "doctor",
            "settings",
            "_config_schema",
            "discovery",
            "examples",
        ],
        4.0,
    ),
    "cli": 5.0,
}

#: Imports that cross a layer on purpose, each with its reason.
ALLOWED = {
    # `python -m reprobridge` is the command line's entry point.
    ("__main__", "cli"),
    # repro/derive.py is shipped as a stdlib-only script, so it cannot import rb; the
    # detector counts a config file's lines with the script's own function, so that the
    # line and column it reports are where the shipped script applies the edit.
    ("detect.procedure.configbounds", "artifacts.derive"),
    # The probe's rules (classification, repairs, decisions) sit beside the merge, where
    # the agent uses them too; its loop runs each round as a trial audit.
    ("probe.loop", "audit.auditor"),
    ("probe.loop", "audit.fingerprint"),
}


def _owner(dotted: str) -> str:
    """The layer key of ``reprobridge.<dotted>``: its top-level module or package."""
    return dotted.split(".")[0] or "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, ``x.y`` of ``reprobridge.x.y``) for every import of rb's own modules."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "reprobridge":
                # `from reprobridge import _proc`: the names are modules (or __version__).
                names = [a.name for a in node.names]
                out += [(node.lineno, n) for n in names if (PACKAGE / n).exists()]
                out += [(node.lineno, n) for n in names if (PACKAGE / f"{n}.py").exists()]
                out += [(node.lineno, "__init__") for n in names if n == "__version__"]
            elif node.module.startswith("reprobridge."):
                out.append((node.lineno, node.module.removeprefix("reprobridge.")))
        elif isinstance(node, ast.Import):
            out += [
                (node.lineno, a.name.removeprefix("reprobridge."))
                for a in node.names
                if a.name.startswith("reprobridge.")
            ]
    return out


def _modules() -> list[tuple[str, Path]]:
    return [
        (".".join(p.relative_to(PACKAGE).with_suffix("").parts), p)
        for p in sorted(PACKAGE.rglob("*.py"))
    ]


def test_every_module_has_a_layer() -> None:
    missing = sorted({_owner(m) for m, _ in _modules()} - set(LAYERS) - {"__main__"})
    assert missing == [], f"give these a layer here and in docs/architecture.md: {missing}"


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_no_module_imports_a_higher_layer(module: str, path: Path) -> None:
    mine = _owner(module)
    if mine == "__main__":
        return
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports reprobridge.{target}"
        for line, target in _imports(path)
        if LAYERS[_owner(target)] > LAYERS[mine]
        and (module.removesuffix(".__init__"), target) not in ALLOWED
    ]
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser finds the imports the rule is about, lazy ones included."""
    src = tmp_path / "m.py"
    src.write_text(
        "from reprobridge import _proc, __version__\n"
        "def f():\n    from reprobridge.cli.options import json_option\n"
        "import reprobridge.audit.plan\n"
    )
    assert sorted(_imports(src)) == [
        (1, "__init__"),
        (1, "_proc"),
        (3, "cli.options"),
        (4, "audit.plan"),
    ]
