"""Run bounds in a JSON or YAML config file that an experiment's command passes.

``python main_experiment.py config.json`` with ``"epochs": 30`` in config.json is bounded
by the file, not by a flag or the script's code. :func:`config_bounds` reads the file's text
(never executing anything: JSON by a scanner over the text, YAML by pyyaml's safe
``compose``, whose nodes carry their positions) and reports each key whose name bounds a
run (:func:`~reprobridge.detect.runbounds.config_smoke_value`: ``epochs``, ``max_steps``,
``num_reps``, also nested, ``train: {epochs: 30}``; not ``eval: {steps: 100}``) holding a
positive whole-number literal, with the literal's exact line and column, as the file's
lines are counted by ``repro/derive.py`` (which applies the edit to a copy).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator

from reprobridge.artifacts.derive import script_lines
from reprobridge.detect.procedure._literal import LiteralBound
from reprobridge.detect.runbounds import config_smoke_value

#: Suffixes of the config files a command word may name.
CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
_INT = re.compile(r"[1-9][0-9]{0,14}")
_JSON_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?[0-9][0-9.eE+-]*)|(?P<punct>[{}\[\]:,])'
    r"|(?P<word>true|false|null))",
    re.DOTALL,
)


class _Lines:
    """Offsets of ``text`` as (line from 1, column in characters), lines as derive.py
    counts them."""

    def __init__(self, text: str) -> None:
        self.lines = script_lines(text)
        self.starts: list[int] = []
        at = 0
        for line in self.lines:
            self.starts.append(at)
            at += len(line)

    def bound(self, offset: int, was: str, path: list[str]) -> LiteralBound | None:
        line = max(bisect.bisect_right(self.starts, offset) - 1, 0)
        column = offset - self.starts[line]
        text = self.lines[line]
        if text[column : column + len(was)] != was or not _INT.fullmatch(was):
            return None
        return LiteralBound(
            line + 1, column, was, int(was), ".".join(path), "assign", text.strip()[:200]
        )


def _json_bounds(text: str) -> Iterator[LiteralBound]:
    try:
        json.loads(text)  # only a valid file: the scanner below trusts its shape
    except (ValueError, RecursionError):
        return
    lines = _Lines(text)
    # One entry per open container: whether a key opened it (and `path` holds that key).
    stack: list[bool] = []
    path: list[str] = []
    key: str | None = None
    after_colon = False
    at = 0
    while (m := _JSON_TOKEN.match(text, at)) is not None:
        at = m.end()
        token = m.group(m.lastgroup or "")
        if token in ("{", "["):
            opened_by_key = after_colon and key is not None
            stack.append(opened_by_key)
            if opened_by_key:
                path = [*path, str(key)]
            after_colon, key = False, None
        elif token in ("}", "]"):
            if stack and stack.pop():
                path = path[:-1]
            after_colon, key = False, None
        elif token == ":":
            after_colon = True
        elif token == ",":
            after_colon, key = False, None
        elif m.lastgroup == "str" and not after_colon:
            key = json.loads(token)
        elif m.lastgroup == "num" and after_colon and key is not None:
            full = [*path, key]
            if config_smoke_value(full) is not None:
                found = lines.bound(m.start("num"), token, full)
                if found is not None:
                    yield found
            after_colon = False
        else:
            after_colon = False


def _yaml_bounds(text: str) -> Iterator[LiteralBound]:
    # Loaded only when a command names a YAML config (~20 ms of a small `rb init`; the
    # bounds detector imports this module on every run).
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return
    lines = _Lines(text)
    seen: set[int] = set()
    todo: list[tuple[yaml.Node, list[str]]] = [(root, [])] if root is not None else []
    while todo:
        node, path = todo.pop(0)
        if id(node) in seen:  # an alias: one node under several keys, visited once
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    todo.append((v, [*path, str(k.value)]))
        elif isinstance(node, yaml.SequenceNode):
            todo += [(item, path) for item in node.value]
        elif (
            isinstance(node, yaml.ScalarNode)
            and node.tag == "tag:yaml.org,2002:int"
            and node.style is None
            and config_smoke_value(path) is not None
        ):
            mark = node.start_mark
            offset = lines.starts[mark.line] + mark.column if mark.line < len(lines.starts) else -1
            found = lines.bound(offset, str(node.value), path) if offset >= 0 else None
            if found is not None:
                yield found


def config_bounds(path: str, text: str) -> list[LiteralBound]:
    """The run-bounding integer literals of the config file ``path`` (its ``text``), in
    source order; none for another suffix or a file that does not parse."""
    if path.endswith(".json"):
        found = list(_json_bounds(text))
    elif path.endswith((".yaml", ".yml")):
        found = list(_yaml_bounds(text))
    else:
        return []
    return sorted(found, key=lambda b: (b.line, b.column))
