"""Load, validate and save reprobridge.toml with tomlkit, keeping a person's edits.

Contracts:

* :func:`load_manifest` returns the validated model and the tomlkit document; every
  failure is a :class:`~reprobridge.errors.ManifestError` naming the file and the dotted
  field, with a "did you mean" hint for unknown keys.
* :func:`render_new_manifest` lays out a fresh document deterministically.
* :func:`refresh_document` merges a newly derived manifest into an existing document: a
  value rb derived before and nobody changed since is refreshed; a value a person edited,
  added or deleted is left as the person left it (the ``[derived]`` table holds a digest of
  what rb last wrote, which is how an edit is recognised). Comments and order survive.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from reprobridge.errors import (
    ManifestError,
    ManifestNotFoundError,
    SchemaVersionError,
    UnsafePathError,
)
from reprobridge.manifest import emit
from reprobridge.manifest.schema import SCHEMA_VERSION, Derivation, Manifest
from reprobridge.manifest.validation import first_problem

if TYPE_CHECKING:
    # tomlkit (~10 ms) is imported where a document is parsed, built or rewritten: a read
    # that only validates (`read_manifest`: rb audit, rb archive) parses with tomllib.
    from tomlkit.items import Table
    from tomlkit.toml_document import TOMLDocument

_MISSING = object()


def digest(value: Any) -> str:
    """A short, stable digest of a JSON-able value (how rb recognises its own values)."""
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


# -- loading -----------------------------------------------------------------------------


def parse_document(text: str, *, path: str) -> TOMLDocument:
    """Parse TOML text; ManifestError with the line and column on a syntax error."""
    import tomlkit
    import tomlkit.exceptions

    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ManifestError(
            f"not valid TOML: {exc}",
            path=path,
            hint="fix the syntax, or delete the file and run `rb init`",
        ) from exc
    except tomlkit.exceptions.TOMLKitError as exc:
        raise ManifestError(f"not valid TOML: {exc}", path=path) from exc


def load_manifest(path: Path) -> tuple[Manifest, TOMLDocument]:
    """Read and validate ``path``. Raises ManifestNotFoundError / ManifestError /
    SchemaVersionError, and UnsafePathError when ``path`` is a symlink.

    The tomlkit document keeps comments and layout, for rewriting the file; a caller that
    only needs the model uses :func:`read_manifest` (10-18x faster to parse).
    """
    text = _manifest_text(path)
    doc = parse_document(text, path=path.name)
    return validate_document(doc, path=path.name), doc


def read_manifest(path: Path) -> Manifest:
    """:func:`load_manifest` without the document: parsed by ``tomllib``; same errors."""
    return parse_manifest_text(_manifest_text(path), path=path.name)


def parse_manifest_text(text: str, *, path: str) -> Manifest:
    """Validate manifest text (parsed by ``tomllib``). On a syntax error tomlkit parses it
    again, so the message is the one :func:`load_manifest` gives (with line and column)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return validate_document(parse_document(text, path=path), path=path)
    return validate_document(data, path=path)


def _manifest_text(path: Path) -> str:
    shown = path.name
    if path.is_symlink():
        # The repository is untrusted: `reprobridge.toml -> /elsewhere` would make rb read,
        # audit and record a manifest (and its paths) that is not the repository's own.
        raise UnsafePathError(
            "is a symlink; rb reads the manifest only from a regular file in the repository",
            path=shown,
            hint="replace the link with the file itself",
        )
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ManifestNotFoundError(
            "not found", path=shown, hint="run `rb init` in the repository first"
        ) from None
    except OSError as exc:
        raise ManifestError(f"cannot be read: {exc.strerror}", path=shown) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"is not UTF-8 text (byte {exc.start})", path=shown) from exc
    return text


def validate_document(doc: TOMLDocument | dict[str, Any], *, path: str) -> Manifest:
    """Validate a parsed document against the schema; ManifestError names the field."""
    # A tomlkit document unwraps to plain values; tomllib's dict is plain already.
    unwrap = getattr(doc, "unwrap", None)
    data: dict[str, Any] = unwrap() if unwrap is not None else doc
    version = data.get("schema", _MISSING)
    if version is _MISSING:
        raise ManifestError("missing `schema = 1` at the top", path=path, field="schema")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"schema version {version!r} is not supported (this rb reads {SCHEMA_VERSION})",
            path=path,
            field="schema",
            hint="upgrade rb, or run `rb init` to rewrite the manifest",
        )
    bad = _first_non_finite(data, ())
    if bad is not None:
        raise ManifestError(
            "is not a finite number (nan and inf are not allowed)", path=path, field=bad
        )
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, path) from None


def _first_non_finite(value: Any, loc: tuple[str, ...]) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return ".".join(loc)
    if isinstance(value, dict):
        for k, v in value.items():
            found = _first_non_finite(v, (*loc, str(k)))
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_non_finite(v, (*loc, str(i)))
            if found:
                return found
    return None


def _validation_error(exc: ValidationError, path: str) -> ManifestError:
    problem = first_problem(exc, Manifest)
    hint = None
    if problem.unknown_key:
        hint = (
            f"known keys here: {', '.join(sorted(problem.known))}"
            if problem.known and problem.close is None
            else "see `rb schema` or docs/manifest-reference.md"
        )
    return ManifestError(problem.message, path=path, field=problem.field, hint=hint)


# -- rendering a new document ------------------------------------------------------------

HEADER = (
    "ReproBridge manifest: what reproducing this repository needs, and how it is judged.\n"
    "Written by `rb init` ({version}); edit freely: re-running `rb init` refreshes the values\n"
    "it derived and keeps every value you changed (see [derived] at the end for provenance).\n"
    "Reference: https://github.com/reprobridge/reprobridge/blob/main/docs/manifest-reference.md"
)

#: Dotted-path depth patterns whose tables are written as [headers]; other dicts inline.
_TABLE_PATHS = (
    ("project",),
    ("environment",),
    ("datasets", "*"),
    ("experiments", "*"),
    ("experiments", "*", "metrics", "*"),
    ("experiments", "*", "tiers", "*"),
    ("experiments", "*", "tiers", "*", "metrics", "*"),
    ("derived",),
)
#: Tables that only hold tables: written implicitly ([experiments.x] without [experiments]).
_SUPER_PATHS = (
    ("datasets",),
    ("experiments",),
    ("experiments", "*", "metrics"),
    ("experiments", "*", "tiers"),
    ("experiments", "*", "tiers", "*", "metrics"),
)


def _matches(patterns: tuple[tuple[str, ...], ...], loc: tuple[str, ...]) -> bool:
    return any(
        len(p) == len(loc) and all(a == "*" or a == b for a, b in zip(p, loc, strict=True))
        for p in patterns
    )


def _is_table_path(loc: tuple[str, ...]) -> bool:
    return _matches(_TABLE_PATHS, loc) or _matches(_SUPER_PATHS, loc)


def _is_super_path(loc: tuple[str, ...]) -> bool:
    return _matches(_SUPER_PATHS, loc)


#: How :func:`render_new_manifest` lays out tables: the layout of :func:`_to_item`.
_LAYOUT = emit.Layout(_is_table_path, _is_super_path, aot=("claims",))


def manifest_data(manifest: Manifest) -> dict[str, Any]:
    """The manifest as plain TOML-able data: None dropped, empty containers dropped."""
    data = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
    return _prune(data)  # type: ignore[no-any-return]


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def fill_table(table: Table, entries: list[tuple[str, Any]]) -> None:
    """Add ``entries`` to a fresh ``table`` in order: the same document as calling
    ``table.add(key, value)`` for each, in time linear in the number of entries.

    Why not plain ``add``: outside parsing, tomlkit's ``Container.append`` looks for the
    last key before the first sub-table (``_get_last_index_before_table``) by scanning the
    whole body on every call, so ``add`` is quadratic in keys; the ``[derived]`` table has a
    key per derived value, which made ``rb init`` take seconds on big repositories. tomlkit
    has no public linear append. In parsing mode (public ``Container.parsing``) it skips
    that scan and the layout fix-ups that go with it, which only matter when a value is a
    table or array of tables, or a raw dict or list that may become one (``add`` moves
    plain keys above sub-tables and puts a blank line before each sub-table), or when the
    previous value lacks a trailing newline (fresh items always have one). So: parsing
    mode when the table is empty and every value is plain, ``add`` otherwise.
    ``test_fill_table_matches_add`` pins the equivalence against a tomlkit
    upgrade. Duplicate keys still raise, as with ``add``.
    """
    container = table.value
    if container.body or not all(_plain_value(v) for _, v in entries):
        for key, value in entries:
            table.add(key, value)
        return
    container.parsing(True)
    try:
        for key, value in entries:
            table.append(key, value)
    finally:
        container.parsing(False)


def _plain_value(value: Any) -> bool:
    """A value ``add`` appends as is: a tomlkit item that is not a table (or array of
    tables), or a scalar. A raw dict or list may become a table, so it takes ``add``."""
    import tomlkit

    items = tomlkit.items
    if isinstance(value, items.Item):
        return not isinstance(value, (items.Table, items.AoT))
    return isinstance(value, (str, int, float))  # bool is an int


def _to_item(value: Any, loc: tuple[str, ...]) -> Any:
    import tomlkit

    if isinstance(value, dict):
        if _is_table_path(loc):
            table = tomlkit.table(is_super_table=_is_super_path(loc))
            fill_table(table, [(k, _to_item(v, (*loc, k))) for k, v in value.items()])
            return table
        inline = tomlkit.inline_table()
        for k, v in value.items():
            inline.append(k, _to_item(v, (*loc, k)))
        return inline
    if isinstance(value, list):
        if loc == ("claims",):
            aot = tomlkit.aot()
            for entry in value:
                t = tomlkit.table()
                for k, v in entry.items():
                    t.add(k, _to_item(v, (*loc, "*", k)))
                aot.append(t)
            return aot
        arr = tomlkit.array()
        for v in value:
            arr.append(_to_item(v, (*loc, "*")))
        if sum(len(json.dumps(v)) for v in value) > 60:
            arr.multiline(True)
        return arr
    return value


#: The top-level tables in the order they are written, and the comment above [derived].
_TOP_KEYS = ("project", "environment", "datasets", "experiments", "claims", "derived")
_DERIVED_COMMENT = (
    "Provenance of derived values (managed by rb init; do not edit).",
    "A value whose digest no longer matches was edited by you and is kept.",
)


def render_new_manifest(manifest: Manifest, *, version: str) -> str:
    """A fresh reprobridge.toml for ``manifest`` (deterministic bytes).

    Written by :mod:`reprobridge.manifest.emit`, byte for byte the document tomlkit
    would build from :func:`_to_item` (which a re-run's refresh still uses), without
    building tomlkit items: they were most of a small repository's manifest cost."""
    return render_data(manifest_data(manifest), version=version)


def render_data(data: dict[str, Any], *, version: str) -> str:
    """:func:`render_new_manifest` of the manifest's plain data (:func:`manifest_data`)."""
    data = dict(data)
    if "derived" in data:
        data["derived"] = dict(sorted(data["derived"].items()))
    out = [f"# {line}\n" for line in HEADER.format(version=version).splitlines()]
    out.append("\n")
    out.append(f"schema = {SCHEMA_VERSION}\n")
    for key in _TOP_KEYS:
        if key in data:
            if key == "derived":
                out.append("\n")
                out += [f"# {line}\n" for line in _DERIVED_COMMENT]
            _LAYOUT.block(out, key, data[key], (key,), emit.key(key), blank=True)
    return "".join(out)


def render_with_tomlkit(data: dict[str, Any], *, version: str) -> str:
    """:func:`render_data` the way rb wrote a new manifest before :mod:`emit` (a tomlkit
    document built from :func:`_to_item`). Not used to write files: the reference the
    emitter's tests and ``benchmarks/manifest_render.py`` compare its bytes with."""
    import tomlkit

    data = dict(data)
    if "derived" in data:
        data["derived"] = dict(sorted(data["derived"].items()))
    doc = tomlkit.document()
    for line in HEADER.format(version=version).splitlines():
        doc.add(tomlkit.comment(line))
    doc.add(tomlkit.nl())
    doc.add("schema", SCHEMA_VERSION)
    for key in _TOP_KEYS:
        if key in data:
            if key == "derived":
                doc.add(tomlkit.nl())
                for line in _DERIVED_COMMENT:
                    doc.add(tomlkit.comment(line))
            doc.add(key, _to_item(data[key], (key,)))
    return tomlkit.dumps(doc)


# -- refreshing an existing document -----------------------------------------------------


@dataclass
class RefreshReport:
    """What :func:`refresh_document` did, for the user and for ``--json``."""

    updated: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept_edits: list[str] = field(default_factory=list)
    kept_deletions: list[str] = field(default_factory=list)
    #: Derived values kept as they were because their source was not read again.
    kept_unread: list[str] = field(default_factory=list)


def flatten(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    """Leaves of nested tables as dotted paths; lists (and inline-ish dicts) are leaves."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        loc = (*prefix, str(key))
        if isinstance(value, dict) and value and loc != ("derived",):
            out.update(flatten(value, loc))
        else:
            out[".".join(loc)] = value
    return out


def _get(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts:
        if not isinstance(cur, dict) or p not in cur:
            return _MISSING
        cur = cur[p]
    return cur


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _set(doc: TOMLDocument, parts: list[str], value: Any) -> None:
    import tomlkit

    cur: Any = doc
    for i, p in enumerate(parts[:-1]):
        if p not in cur:
            loc = tuple(parts[: i + 1])
            cur.add(
                p,
                tomlkit.table()
                if _is_table_path(loc)
                or (isinstance(cur, (tomlkit.items.Table, tomlkit.TOMLDocument)) and len(loc) < 3)
                else tomlkit.inline_table(),
            )
        cur = cur[p]
    leaf = parts[-1]
    item = _to_item(value, tuple(parts))
    if isinstance(cur, tomlkit.items.InlineTable) or leaf in cur:
        cur[leaf] = item
    else:
        cur.add(leaf, item)


def _delete(doc: TOMLDocument, parts: list[str]) -> None:
    chain: list[Any] = [doc]
    for p in parts[:-1]:
        nxt = chain[-1].get(p)
        if not isinstance(nxt, dict):
            return
        chain.append(nxt)
    chain[-1].pop(parts[-1], None)
    # Drop tables this left empty, innermost first.
    for depth in range(len(parts) - 1, 0, -1):
        parent, key = chain[depth - 1], parts[depth - 1]
        if isinstance(parent.get(key), dict) and not parent[key]:
            parent.pop(key)


def refresh_document(
    doc: TOMLDocument,
    new: Manifest,
    *,
    path: str,
    keep: Callable[[list[str]], bool] | None = None,
) -> tuple[TOMLDocument, RefreshReport]:
    """Merge ``new`` (freshly derived, with its ``derived`` provenance) into ``doc``.

    See the module docstring for the rule. ``keep`` marks derived values whose source
    was not read this time (given a value's recorded provenance sources: a paper that is
    not available): each stays as it is in ``doc``, with its recorded provenance, whatever
    ``new`` says (listed in ``report.kept_unread``). The returned document is validated; a
    merge that leaves it invalid (e.g. your edited command uses a parameter rb no longer
    derives) raises ManifestError naming the field.
    """
    import tomlkit

    report = RefreshReport()
    old_derived_raw = _plain(doc.get("derived", {})) or {}
    old_derived = {
        k: v for k, v in old_derived_raw.items() if isinstance(v, dict) and "digest" in v
    }
    new_data = manifest_data(new)
    new_derived: dict[str, Derivation] = dict(new.derived)
    leaves = flatten({k: v for k, v in new_data.items() if k not in {"derived", "schema"}})
    result_derived: dict[str, dict[str, Any]] = {}
    unread = {
        k for k, v in old_derived.items() if keep is not None and keep(list(v.get("sources", [])))
    }
    for dotted in sorted(unread):
        current = _plain(_get(doc, dotted.split(".")))
        if current is not _MISSING and digest(current) == old_derived[dotted]["digest"]:
            result_derived[dotted] = dict(old_derived[dotted])
            report.kept_unread.append(dotted)

    for dotted, value in leaves.items():
        if dotted in unread:
            continue
        parts = dotted.split(".")
        current = _plain(_get(doc, parts))
        prov = new_derived.get(dotted)
        entry = (
            prov.model_dump(mode="json", exclude_defaults=False)
            if prov is not None
            else {"sources": ["rb default"], "digest": digest(value), "confidence": "low"}
        )
        entry["digest"] = digest(value)
        if dotted in old_derived:
            if current is _MISSING:
                report.kept_deletions.append(dotted)
                continue
            if digest(current) != old_derived[dotted]["digest"]:
                report.kept_edits.append(dotted)
                continue
            if current != value:
                _set(doc, parts, value)
                report.updated.append(dotted)
            result_derived[dotted] = entry
        elif current is _MISSING:
            if _ancestor_deleted(doc, parts, old_derived):
                report.kept_deletions.append(dotted)
                continue
            _set(doc, parts, value)
            report.added.append(dotted)
            result_derived[dotted] = entry
        elif current != value:
            report.kept_edits.append(dotted)
    for dotted, old in old_derived.items():
        if dotted in leaves or dotted in unread:
            continue
        parts = dotted.split(".")
        current = _plain(_get(doc, parts))
        if current is not _MISSING and digest(current) == old["digest"]:
            _delete(doc, parts)
            report.removed.append(dotted)
    derived_table = tomlkit.table()
    fill_table(
        derived_table,
        [(key, _to_item(result_derived[key], ("derived", key))) for key in sorted(result_derived)],
    )
    if "derived" in doc:
        doc["derived"] = derived_table
    else:
        doc.add("derived", derived_table)
    validate_document(doc, path=path)
    return doc, report


def _ancestor_deleted(doc: TOMLDocument, parts: list[str], old_derived: dict[str, Any]) -> bool:
    """True when a whole table rb once wrote (e.g. one experiment) was deleted by a person."""
    for depth in range(1, len(parts)):
        prefix = ".".join(parts[:depth]) + "."
        if _get(doc, parts[:depth]) is _MISSING and any(k.startswith(prefix) for k in old_derived):
            return True
    return False


__all__ = [
    "RefreshReport",
    "digest",
    "flatten",
    "load_manifest",
    "parse_document",
    "parse_manifest_text",
    "read_manifest",
    "refresh_document",
    "render_new_manifest",
    "validate_document",
]
