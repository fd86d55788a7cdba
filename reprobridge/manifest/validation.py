"""pydantic's first validation error in rb's words, for the files rb reads with pydantic
models (the manifest, the bench suite).

Contract: a misspelt key also makes the real one "missing", so an unknown key is reported
first, with the nearest known key as ``did you mean``; ``Value error, `` prefixes are
dropped; a missing field reads ``is required but missing``. Which keys exist at a place is
found by walking the models' annotations (through ``Annotated``, unions, lists and the
values of dicts), by field name or alias.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["FirstProblem", "fields_at", "first_problem"]


@dataclass(frozen=True)
class FirstProblem:
    """The error to report: ``message`` about ``field`` (dotted; None: the whole file).
    For an unknown key, ``known`` holds the keys known there and ``close`` the nearest
    of them (None when none is near)."""

    message: str
    field: str | None
    unknown_key: bool = False
    known: tuple[str, ...] = ()
    close: str | None = None


def first_problem(exc: ValidationError, root: type[BaseModel]) -> FirstProblem:
    """The one error of ``exc`` (raised validating ``root``) to show, in rb's words."""
    err = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    loc = tuple(str(p) for p in err["loc"])
    where = ".".join(loc) or None
    if err["type"] == "extra_forbidden":
        import difflib  # only to word an error: not on the path of a valid manifest

        known = fields_at(root, loc[:-1])
        matches = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        close = matches[0] if matches else None
        msg = "unknown key" + (f" (did you mean {close!r}?)" if close else "")
        return FirstProblem(msg, where, True, tuple(known), close)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "is required but missing"
    return FirstProblem(msg, where)


def fields_at(root: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    """Field names (aliases) of the model reached by ``loc`` from ``root``, if any."""
    current: Any = root
    for part in loc:
        current = _step(current, part)
        if current is None:
            return []
    model = _as_model(current)
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _as_model(tp: Any) -> type[BaseModel] | None:
    for candidate in _unwrap(tp):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _unwrap(tp: Any) -> Iterator[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        yield from _unwrap(typing.get_args(tp)[0])
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            yield from _unwrap(arg)
    else:
        yield tp


def _step(tp: Any, part: str) -> Any:
    model = _as_model(tp)
    if model is not None:
        for name, f in model.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
        return None
    for candidate in _unwrap(tp):
        origin = typing.get_origin(candidate)
        if origin is dict:
            return typing.get_args(candidate)[1]
        if origin is list:
            return typing.get_args(candidate)[0]
    return None
