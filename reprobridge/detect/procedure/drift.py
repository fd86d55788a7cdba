"""References of an experiment's code to names that later package releases removed.

Code written in 2022 calls ``jax.tree_multimap``; the environment a lock gives it today may
have a jax without it (removed in 0.3.16), and the run stops on an ``AttributeError`` a
person fixes by changing one name. The removed names, the release that removed each and
its replacement are data (``reprobridge/data/api_drift.toml``, each entry a
:class:`~reprobridge.detect.findings.Removal`); this detector reads the entry file of every
experiment found before it (a ``.py`` or ``.ipynb``, a notebook's code cells as one program,
parsed with the helpers the other procedure detectors share) and reports each reference to
such a name as an ``api_drift`` finding (:class:`~reprobridge.detect.findings.DriftValue`),
with its exact text and place and the table's entry. Whether a reference becomes an edit depends on the locked versions,
which only the lock knows: :mod:`reprobridge.recovery.drift` decides after ``rb init``
locks.

What counts (never executing anything; names resolve through the file's own imports, so
``np.float`` after ``import numpy as np`` is ``numpy.float`` and a local ``np`` is not):

* an attribute chain whose resolved name is a removed name (``np.float``,
  ``jax.tree_multimap``, ``sklearn.cross_validation`` inside
  ``sklearn.cross_validation.train_test_split``); its replacement is spelled through the
  same alias (``np.float_`` -> ``np.float64``, ``jax.tree_multimap`` ->
  ``jax.tree_util.tree_map``), or is a Python builtin (``np.float`` -> ``float``);
* ``from M import a, b`` where ``M`` is a removed module, or where every imported name is
  removed and replaced by the same name in one other module (``from scipy.misc import
  comb`` -> ``from scipy.special import comb``): the module's text is the edit;
* ``import M as x`` (or ``import M`` when the replacement shares ``M``'s top-level package)
  for a removed module ``M``: the module's text is the edit.

A reference no single dotted-name edit can fix (``from jax import tree_multimap``, a
replacement in a package the code does not import) is still reported, with an empty
``value``: the guide names it, nothing rewrites it. So is a reference in a repository
module the entry imports (its ``file`` is the module's path): a tier edits one file, the
one the command runs, so the guide names those for a person too.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import re
from collections.abc import Iterator
from functools import cache

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from reprobridge.data import API_DRIFT_FILE, load
from reprobridge.detect._notebook import json_line_of, parsed_code_cells
from reprobridge.detect._pyast import dotted, import_map_of, nodes_of, resolve
from reprobridge.detect._select import import_closure
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import DriftValue, Removal
from reprobridge.detect.procedure.bounds import SourceLines
from reprobridge.manifest.schema import DOTTED_NAME_PATTERN, edit_place

#: What a table name and a replacement must be: the manifest's edits write nothing else.
DOTTED_NAME = re.compile(DOTTED_NAME_PATTERN)


#: The fields of an ``api_drift.toml`` entry of each list, and those it may leave out.
_FIELDS = {
    "removed": {"distribution", "name", "removed_in", "replacement", "source"},
    "keyword": {"distribution", "name", "keyword", "removed_in", "source"},
    "assigned": {"distribution", "name", "attribute", "removed_in", "source"},
    "unpacked": {"distribution", "name", "count", "removed_in", "source"},
}
_OPTIONAL: dict[str, set[str]] = {
    "removed": {"method"},
    "keyword": set(),
    "assigned": set(),
    "unpacked": {"count_since"},
}
#: The field of each list that holds a bare name (no dots), beside the dotted ``name``.
_BARE = {"removed": "", "keyword": "keyword", "assigned": "attribute", "unpacked": ""}


def _entry(raw: object, where: str, kind: str) -> Removal:
    """One entry of the table's list ``kind``, checked (ValueError names what is wrong)."""
    fields, optional = _FIELDS[kind], _OPTIONAL[kind]
    if not isinstance(raw, dict) or not fields <= set(raw) <= fields | optional:
        raise ValueError(
            f"{where}: needs exactly {', '.join(sorted(fields))}"
            + (f" (and may say {', '.join(sorted(optional))})" if optional else "")
        )
    if not isinstance(raw.get("method", False), bool):
        raise ValueError(f"{where}: method must be true or false")
    counts: dict[str, int] = {}
    for k in ("count", "count_since"):
        n = raw.get(k)
        if k in raw and (isinstance(n, bool) or not isinstance(n, int) or n < 2):
            raise ValueError(f"{where}: {k} must be a whole number of names, 2 or more")
        counts[k] = n if isinstance(n, int) else 0
    if counts["count_since"] and counts["count_since"] == counts["count"]:
        raise ValueError(f"{where}: count_since must differ from count")
    optional_text = {"keyword", "attribute", "replacement"}
    entry = Removal(
        **{k: str(v) for k, v in raw.items() if k in fields - optional_text - set(counts)},
        **{k: str(raw.get(k, "")) for k in optional_text},
        method=raw.get("method", False),
        count=counts["count"],
        count_since=counts["count_since"],
    )
    if canonicalize_name(entry.distribution) != entry.distribution:
        raise ValueError(f"{where}: distribution {entry.distribution!r} is not canonical")
    bare = _BARE[kind]
    names = ("name", "replacement") if kind == "removed" else ("name", bare) if bare else ("name",)
    for field in names:
        if not DOTTED_NAME.match(getattr(entry, field)) or (
            field == bare and "." in getattr(entry, field)
        ):
            raise ValueError(
                f"{where}: {field} is not a {'name' if field == bare else 'dotted name'}"
            )
    try:
        Version(entry.removed_in)
    except InvalidVersion:
        raise ValueError(f"{where}: removed_in {entry.removed_in!r} is no version") from None
    if not entry.source.startswith("https://"):
        raise ValueError(f"{where}: source must be an https URL")
    owner, _, _ = entry.name.rpartition(".")
    if entry.method and (owner.count(".") < 1 or entry.replacement.rpartition(".")[0] != owner):
        # The edit renames the attribute on whatever object the code has: only a name of
        # the same class can replace it.
        raise ValueError(f"{where}: a method's replacement must be of the same class ({owner})")
    return entry


@cache
def removals() -> dict[str, Removal]:
    """The table of removed names, by fully qualified name. ValueError names a malformed
    entry (a test runs this on the shipped file)."""
    out: dict[str, Removal] = {}
    for i, raw in enumerate(load(API_DRIFT_FILE).get("removed", [])):
        entry = _entry(raw, f"{API_DRIFT_FILE}: removed[{i}]", "removed")
        if entry.name in out:
            raise ValueError(f"{API_DRIFT_FILE}: removed[{i}]: {entry.name} is listed twice")
        out[entry.name] = entry
    by_attribute: dict[str, Removal] = {}
    for entry in (r for r in out.values() if r.method):
        first = by_attribute.setdefault(entry.name.rpartition(".")[2], entry)
        if _renamed(first) != _renamed(entry):
            raise ValueError(
                f"{API_DRIFT_FILE}: {first.name} and {entry.name} share a name but not its "
                "package, release and replacement: the name alone cannot say which one"
            )
    return out


def _renamed(r: Removal) -> tuple[str, str, str]:
    """What a method entry's edit depends on: the package, the release, the new name."""
    return r.distribution, r.removed_in, r.replacement.rpartition(".")[2]


@cache
def methods() -> dict[str, Removal]:
    """The method entries of the table by attribute name (``set_axis_bgcolor``); entries of
    several classes that share one (pandas' ``DataFrame``/``Series.iteritems``) rename it
    alike (:func:`removals` checks), and the first stands for them."""
    out: dict[str, Removal] = {}
    for r in removals().values():
        if r.method:
            out.setdefault(r.name.rpartition(".")[2], r)
    return out


@cache
def keywords() -> dict[str, list[Removal]]:
    """The table's ``[[keyword]]`` entries by function (``seaborn.scatterplot``): keywords
    whose call fails since a release, with nothing that replaces them."""
    return _by_name("keyword")


@cache
def assigned() -> dict[str, list[Removal]]:
    """The table's ``[[assigned]]`` entries by class (``pytorch_lightning.LightningModule``):
    attributes a release made read-only, so that a subclass's ``self.hparams = ...``
    fails, with nothing that replaces it."""
    return _by_name("assigned")


@cache
def unpacked() -> dict[str, list[Removal]]:
    """The table's ``[[unpacked]]`` entries by method name (``step``): methods whose result
    a release changed to another number of values, so that unpacking it as before fails.
    Matched by the method's name alone, like a method entry (:func:`methods`)."""
    out: dict[str, list[Removal]] = {}
    for entries in _by_name("unpacked").values():
        for entry in entries:
            out.setdefault(entry.name.rpartition(".")[2], []).append(entry)
    return out


def _by_name(kind: str) -> dict[str, list[Removal]]:
    """The table's list ``kind`` (``keyword``, ``assigned``) by its dotted ``name``; an
    entry listed twice (the same name and bare name) is a ValueError."""
    out: dict[str, list[Removal]] = {}
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(load(API_DRIFT_FILE).get(kind, [])):
        where = f"{API_DRIFT_FILE}: {kind}[{i}]"
        entry = _entry(raw, where, kind)
        pair = (entry.name, getattr(entry, _BARE[kind]) if _BARE[kind] else "")
        if pair in seen:
            raise ValueError(f"{where}: {' '.join(filter(None, pair))} is listed twice")
        seen.add(pair)
        out.setdefault(entry.name, []).append(entry)
    return out


def _spelled(name: str, imports: dict[str, str], replacement: str) -> str:
    """The replacement of ``name`` (an attribute chain as the code spells it) spelled through
    the code's own alias, or "" when it cannot be (another top-level package)."""
    head = name.split(".")[0]
    module = imports[head]
    if replacement == module or replacement.startswith(module + "."):
        return head + replacement[len(module) :]
    if "." not in replacement and callable(getattr(builtins, replacement, None)):
        return replacement
    return ""


def _find(line: str, pattern: str) -> tuple[int, str] | None:
    """(column, text) of the first group of ``pattern`` in ``line``, or None."""
    match = re.search(pattern, line)
    return (match.start(1), match.group(1)) if match else None


def _method_hit(
    src: SourceLines, node: ast.Attribute, packages: set[str]
) -> tuple[int, int, str, str, Removal, str] | None:
    """The reference ``node`` makes to a method entry (``ax.set_axis_bgcolor``, on an object
    the code has, not a module it imports) when the file imports that entry's package:
    (line, column, was, value, removal, code) of the attribute's own name, which the edit
    renames in place."""
    removal = methods().get(node.attr)
    if removal is None or removal.name.split(".")[0] not in packages:
        return None
    line, end = node.end_lineno, node.end_col_offset
    if line is None or end is None or not 0 < line <= len(src.lines):
        return None
    raw = src.lines[line - 1].encode("utf-8")
    start = end - len(node.attr)
    if raw[start:end] != node.attr.encode("ascii"):
        return None  # the name written some other way (a line continuation inside it)
    column = len(raw[:start].decode("utf-8", "replace"))
    value = removal.replacement.rpartition(".")[2]
    return line, column, node.attr, value, removal, src.lines[line - 1].strip()[:200]


def _dict_keys(tree: ast.Module) -> set[str]:
    """The keys the code spells for a dict it may pass as ``**kwargs``: a dict display's
    string keys, ``dict(key=...)``'s keywords, ``d["key"] = ...``'s subscripts."""
    keys = {
        k.value
        for d in nodes_of(tree, ast.Dict)
        for k in d.keys
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }
    keys |= {
        kw.arg
        for c in nodes_of(tree, ast.Call)
        if isinstance(c.func, ast.Name) and c.func.id == "dict"
        for kw in c.keywords
        if kw.arg
    }
    keys |= {
        s.slice.value
        for s in nodes_of(tree, ast.Subscript)
        if isinstance(s.ctx, ast.Store)
        and isinstance(s.slice, ast.Constant)
        and isinstance(s.slice.value, str)
    }
    return keys


def _bases(cls: ast.ClassDef, imports: dict[str, str]) -> list[str]:
    """The resolved names of ``cls``'s base classes that the file's imports give
    (``class M(pl.LightningModule)`` -> ``pytorch_lightning.LightningModule``)."""
    bases = [dotted(b) for b in cls.bases]
    return [resolve(b, imports) for b in bases if b and b.split(".")[0] in imports]


def _callees(tree: ast.Module, imports: dict[str, str]) -> Iterator[tuple[ast.Call, str]]:
    """(call, the resolved name it calls) for each call of ``tree`` to a name its imports
    give (``sns.scatterplot(...)`` -> ``seaborn.scatterplot``; ``Base.__init__(self, ...)``
    -> ``pkg.Base``), and for ``super().__init__(...)`` inside a class, once per base class
    the imports give (the call runs that base's constructor)."""
    for node in nodes_of(tree, ast.Call):
        name = dotted(node.func)
        if name is not None and name.split(".")[0] in imports:
            yield node, resolve(name, imports).removesuffix(".__init__")
    for cls in nodes_of(tree, ast.ClassDef):
        names = _bases(cls, imports)
        if not names:
            continue
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__init__"
                and isinstance(node.func.value, ast.Call)
                and isinstance(node.func.value.func, ast.Name)
                and node.func.value.func.id == "super"
            ):
                for name in names:
                    yield node, name


def _keyword_hits(
    src: SourceLines, tree: ast.Module, imports: dict[str, str]
) -> list[tuple[int, int, str, str, Removal, str]]:
    """The calls of ``tree`` to a ``[[keyword]]`` entry's function or class (see
    :func:`_callees`) that pass its keyword: by name (``cmap=...``: the keyword is placed),
    or through ``**kwargs`` where the file spells the keyword as a dict key (the ``**``
    argument is placed). No edit fixes one (``value`` is "")."""
    table = keywords()
    hits: list[tuple[int, int, str, str, Removal, str]] = []
    keys: set[str] | None = None
    for node, name in _callees(tree, imports):
        for entry in table.get(name, []):
            for kw in node.keywords:
                if kw.arg is None and keys is None:
                    keys = _dict_keys(tree)
                if kw.arg == entry.keyword or (kw.arg is None and keys and entry.keyword in keys):
                    line = src.lines[kw.lineno - 1] if 0 < kw.lineno <= len(src.lines) else ""
                    column = len(line.encode("utf-8")[: kw.col_offset].decode("utf-8", "replace"))
                    was = kw.arg or f"**{dotted(kw.value) or '...'}"
                    hits.append((kw.lineno, column, was, "", entry, line.strip()[:200]))
                    break
    return hits


def _assigned_hits(
    src: SourceLines, tree: ast.Module, imports: dict[str, str]
) -> list[tuple[int, int, str, str, Removal, str]]:
    """``self.<attribute> = ...`` (plain, annotated or augmented) in the methods of a class
    whose base, resolved through the file's imports, has an ``[[assigned]]`` entry for that
    attribute; the attribute's name is placed. No edit fixes one (``value`` is "")."""
    table = assigned()
    hits: list[tuple[int, int, str, str, Removal, str]] = []
    for cls in nodes_of(tree, ast.ClassDef):
        entries = {e.attribute: e for b in _bases(cls, imports) for e in table.get(b, [])}
        if not entries:
            continue
        for node in ast.walk(cls):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign | ast.AugAssign)
                else []
            )
            for target in targets:
                if not (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr in entries
                ):
                    continue
                span = src.span(target)
                if span is None:
                    continue
                column, was, line = span
                hits.append((target.lineno, column, was, "", entries[target.attr], line))
    return hits


def _unpacked_hits(
    src: SourceLines, tree: ast.Module, packages: set[str]
) -> list[tuple[tuple[int, int, str, str, Removal, str], bool]]:
    """``a, b, c, d = env.step(action)``: the result of a call to an ``[[unpacked]]`` entry's
    method (by its name, on any object) unpacked into exactly the entry's ``count`` names,
    in a file that imports the entry's package; the names are placed. No edit fixes one.
    Each hit comes with whether it is *current*: unpacked into ``count_since`` names, as
    code written for the release does."""
    table = unpacked()
    hits: list[tuple[tuple[int, int, str, str, Removal, str], bool]] = []
    for node in nodes_of(tree, ast.Assign):
        call = node.value
        if not (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple | ast.List)
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
        ):
            continue
        target = node.targets[0]
        if any(isinstance(e, ast.Starred) for e in target.elts):
            continue
        for entry in table.get(call.func.attr, []):
            if entry.name.split(".")[0] not in packages:
                continue
            if len(target.elts) in (entry.count, entry.count_since):
                span = src.span(target)
                if span is not None:
                    hit = (target.lineno, span[0], span[1], "", entry, span[2])
                    hits.append((hit, len(target.elts) == entry.count_since))
                break
    return hits


def references(
    code: str, tree: ast.Module, imports: dict[str, str], entry: str, file: str, cell: int | None
) -> Iterator[DriftValue]:
    """Every reference of ``tree`` (parsed from ``code``, the text of ``file`` or of its
    notebook cell ``cell``) to a removed name, in source order, as ``entry``'s findings'
    values; ``imports`` is the file's import map (a notebook's: all its cells')."""
    table = removals()
    src = SourceLines(code)
    # (line, column, was, value, removal, code): the rest of a DriftValue, in its order.
    found: list[tuple[int, int, str, str, Removal, str]] = []
    # The top-level modules the file imports: a method entry counts only in a file that
    # imports its package (`.set_axis_bgcolor(` means matplotlib's where matplotlib is).
    packages = {module.split(".")[0] for module in imports.values()}
    # A name the file defines or assigns as an attribute is its own, not the library's.
    own = {n.attr for n in nodes_of(tree, ast.Attribute) if not isinstance(n.ctx, ast.Load)}
    own |= {n.name for n in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef)}
    for node in nodes_of(tree, ast.Attribute):
        name = dotted(node)
        if name is None or name.split(".")[0] not in imports:
            hit = _method_hit(src, node, packages) if node.attr not in own else None
            if hit is not None:
                found.append(hit)
            continue
        head, _, rest = name.partition(".")
        removal = table.get(f"{imports[head]}.{rest}")
        span = src.span(node) if removal is not None else None
        if removal is None or span is None or span[1] != name:
            continue  # split over lines, or with spaces or comments inside: left alone
        column, was, line = span
        value = _spelled(name, imports, removal.replacement)
        found.append((node.lineno, column, was, value, removal, line))
    found += _keyword_hits(src, tree, imports)
    found += _assigned_hits(src, tree, imports)
    for node in nodes_of(tree, ast.ImportFrom):
        if node.level or not node.module or not 0 < node.lineno <= len(src.lines):
            continue
        text = src.lines[node.lineno - 1]
        module_removal = table.get(node.module)
        named = [table.get(f"{node.module}.{a.name}") for a in node.names]
        if module_removal is not None:
            value = module_removal.replacement
            removal = module_removal
        elif (hits := [r for r in named if r is not None]) and len(hits) == len(named):
            # Every imported name moved to one module under its own name: only then does
            # changing the module's text alone fix the statement.
            moved = {r.replacement.rpartition(".")[0] for r in hits}
            same_leaf = all(
                r.replacement.rpartition(".")[2] == a.name
                for r, a in zip(hits, node.names, strict=True)
            )
            value = moved.pop() if len(moved) == 1 and same_leaf and "" not in moved else ""
            removal = hits[0]
        elif hits:
            removal, value = hits[0], ""
        else:
            continue
        at = _find(text, r"\bfrom\s+(" + re.escape(node.module) + r")\s+import\b")
        if at is None:
            continue
        found.append((node.lineno, at[0], at[1], value, removal, text.strip()[:200]))
    for node in nodes_of(tree, ast.Import):
        if not 0 < node.lineno <= len(src.lines):
            continue
        text = src.lines[node.lineno - 1]
        for alias in node.names:
            removal = table.get(alias.name)
            if removal is None:
                continue
            top = alias.name.split(".")[0]
            keeps_binding = alias.asname is not None or removal.replacement.split(".")[0] == top
            at = _find(text, r"\bimport\b.*?(?<![\w.])(" + re.escape(alias.name) + r")(?![\w.])")
            if at is None:
                continue
            value = removal.replacement if keeps_binding else ""
            found.append((node.lineno, at[0], at[1], value, removal, text.strip()[:200]))
    # The unpacked calls come with whether each is current (written for the release).
    marked = [*((hit, False) for hit in found), *_unpacked_hits(src, tree, packages)]
    for hit, current in sorted(marked, key=lambda h: h[0][:2]):
        yield DriftValue(entry, file, cell, *hit, current=current)


#: Repository modules per entry whose references are reported too (breadth first from the
#: entry): enough for a script's own helpers, bounded for a monorepo.
MODULE_LIMIT = 50


class DriftDetector(Detector):
    """``api_drift`` findings in the entry files of the experiments found so far, and in the
    repository modules each imports (:data:`MODULE_LIMIT`): those are reported under the
    entry (``file`` names the module), so the guide can say what no edit of the entry
    fixes."""

    name = "drift"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        # Each module's references, found once with no entry and given each entry that
        # imports it: entries share their modules (a package, many notebooks).
        found: dict[str, list[DriftValue]] = {}
        for entry in ctx.experiment_entries(".py", ".ipynb"):
            text = ctx.index.try_read_text(entry)
            if text is None:
                continue
            if entry.endswith(".ipynb"):
                findings += self._notebook(entry, text)
            # The entry (a script) and the repository modules it imports; a notebook's
            # own cells were read above.
            for path, _ in import_closure(ctx, entry, None, MODULE_LIMIT + 1):
                if path.endswith(".py"):
                    findings += [
                        self._finding(dataclasses.replace(v, entry=entry), v.line)
                        for v in self._references(ctx, path, found)
                    ]
        return findings

    @staticmethod
    def _references(
        ctx: DetectContext, path: str, found: dict[str, list[DriftValue]]
    ) -> list[DriftValue]:
        """The references of the Python file ``path`` (``entry`` left empty), found once
        per detector run; none when it does not read or parse."""
        if path not in found:
            text = ctx.index.try_read_text(path)
            tree = ctx.index.parse_python(path) if text is not None else None
            found[path] = (
                list(references(text, tree, import_map_of([tree]), "", path, None))
                if text and tree
                else []
            )
        return found[path]

    def _notebook(self, entry: str, text: str) -> list[Finding]:
        parsed = parsed_code_cells(text)
        # The cells are one program: an import in one cell binds the name in the next.
        imports = import_map_of([tree for _, _, tree in parsed])
        raw_lines = text.splitlines()
        return [
            self._finding(v, json_line_of(raw_lines, v.code))
            for number, code, tree in parsed
            for v in references(code, tree, imports, entry, entry, number)
        ]

    def _finding(self, v: DriftValue, line: int | None) -> Finding[DriftValue]:
        removal = v.removal
        at = f"{v.file}::{'' if v.cell is None else f'{v.cell}:'}{v.line}:{v.column}"
        return Finding(
            kind="api_drift",
            key=at if v.file == v.entry else f"{v.entry}->{at}",
            value=v,
            evidence=(Evidence(v.file, line),),
            detector=self.name,
            confidence="high",
            note=f"{v.file} {edit_place(v.cell, v.line)}: `{v.was}` ({removal.distribution} "
            f"{removal.removed_in}: {removal.what})",
        )
