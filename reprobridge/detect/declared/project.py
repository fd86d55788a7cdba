"""Facts about the project itself: name, license, and the paper it cites.

Sources, all at the repository root, each field from the first source that has it:

* ``name`` — ``pyproject.toml`` ``[project].name`` (or ``[tool.poetry].name``), then
  ``setup.cfg`` ``[metadata] name``, then ``setup.py``'s ``setup(name="...")`` (a literal,
  or a module-level constant it names; read with ``ast``, never run). None found: nothing
  (the merge falls back to the directory name).
* ``license`` — ``LICENSE``/``LICENCE``/``COPYING`` (``.txt``/``.md``/``.rst``): its text
  is matched to an SPDX id (MIT, Apache-2.0, BSD-3-Clause, GPL-3.0, ...); then pyproject's
  ``license`` (a string, or ``{text = ...}``), then setup.cfg/setup.py ``license``.
* ``title``, ``doi``, ``url``, ``authors`` — ``CITATION.cff`` (its ``preferred-citation``,
  which is the paper, before its top level, which is the software); then README badges
  and links: ``arxiv.org/abs/<id>`` gives ``url``, a ``doi.org/<doi>`` link or a Zenodo DOI
  badge gives ``doi``.

Every finding is ``project`` [field] with ``{"value": str}``; ``authors`` also has
``"values"``: the list. These files are incidental to reproduction, so a malformed one is a
warning (``ctx.warn``), never an error; the pyproject/setup detectors report those.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from reprobridge.detect._pyast import callee
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ProjectValue

if TYPE_CHECKING:
    import configparser

#: ``add(field, value, path, line, confidence="high", note="")`` — records a field once.
_Add = Callable[..., None]

_LICENSE_FILES = tuple(
    f"{stem}{ext}"
    for stem in ("LICENSE", "LICENCE", "COPYING", "License", "license")
    for ext in ("", ".txt", ".md", ".rst")
)
_README_FILES = ("README.md", "README.rst", "README.txt", "README", "readme.md", "Readme.md")

# (SPDX id, all of these patterns, none of these) — checked in order, first match wins.
_LICENSES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("AGPL-3.0", (r"GNU AFFERO GENERAL PUBLIC LICENSE",), ()),
    ("LGPL-3.0", (r"GNU LESSER GENERAL PUBLIC LICENSE", r"Version 3"), ()),
    ("LGPL-2.1", (r"GNU LESSER GENERAL PUBLIC LICENSE", r"Version 2\.1"), ()),
    ("GPL-3.0", (r"GNU GENERAL PUBLIC LICENSE", r"Version 3"), ()),
    ("GPL-2.0", (r"GNU GENERAL PUBLIC LICENSE", r"Version 2"), ()),
    ("Apache-2.0", (r"Apache License", r"Version 2\.0"), ()),
    ("MPL-2.0", (r"Mozilla Public License,? (?:Version|v\.?) ?2\.0",), ()),
    ("MIT", (r"Permission is hereby granted, free of charge",), ()),
    ("MIT", (r"^\W*MIT License",), ()),
    (
        "BSD-3-Clause",
        (r"Redistribution and use in source and binary forms", r"Neither the name"),
        (),
    ),
    ("BSD-2-Clause", (r"Redistribution and use in source and binary forms",), ()),
    ("Unlicense", (r"free and unencumbered software released into the public domain",), ()),
    ("CC-BY-NC-SA-4.0", (r"Attribution-NonCommercial-ShareAlike 4\.0",), ()),
    ("CC-BY-NC-4.0", (r"Attribution-NonCommercial 4\.0",), ()),
    ("CC-BY-SA-4.0", (r"Attribution-ShareAlike 4\.0",), ()),
    ("CC-BY-4.0", (r"Creative Commons", r"Attribution 4\.0"), (r"NonCommercial", r"NoDerivatives")),
    ("CC0-1.0", (r"CC0 1\.0",), ()),
    ("ISC", (r"^\W*ISC License",), ()),
)
_ARXIV_RE = re.compile(
    r"arxiv\.org/(?:abs|pdf)/(\d{4}\.\d{4,5}|[a-z-]+(?:\.[A-Z]{2})?/\d{7})", re.I
)
_DOI_RE = re.compile(r"(?:doi\.org/|DOI/)(10\.\d{4,9}/[^\s)\]\"'<>]+)", re.I)


def classify_license(text: str) -> str | None:
    """The SPDX id of a license text (its first 60 lines are enough), or None."""
    head = "\n".join(text.splitlines()[:60])
    flat = " ".join(head.split())
    for spdx, required, excluded in _LICENSES:
        if all(
            re.search(p, flat, re.I | re.M) or re.search(p, head, re.I | re.M) for p in required
        ) and not any(re.search(p, flat, re.I) for p in excluded):
            return spdx
    return None


def _line_of(text: str, pattern: str, start: int = 0) -> int | None:
    """1-based line of the first line at or after ``start`` (0-based) matching ``pattern``."""
    for number, line in enumerate(text.splitlines()[start:], start=start + 1):
        if re.search(pattern, line):
            return number
    return None


class ProjectDetector(Detector):
    """Name, license and citation facts of the repository; see the module docstring."""

    name = "project"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        found: dict[str, Finding] = {}

        def add(
            field: str,
            value: str | list[str],
            path: str,
            line: int | None,
            confidence: Confidence = "high",
            note: str = "",
        ) -> None:
            if field in found:
                return  # an earlier (better) source already gave it
            if isinstance(value, list):
                payload = ProjectValue("; ".join(value), tuple(value))
            else:
                payload = ProjectValue(value)
            found[field] = Finding(
                kind="project",
                key=field,
                value=payload,
                evidence=(Evidence(path, line),),
                detector=self.name,
                confidence=confidence,
                note=note,
            )

        pyproject = self._pyproject(ctx)
        self._name(ctx, pyproject, add)
        self._license(ctx, pyproject, add)
        self._citation(ctx, add)
        self._readme(ctx, add)
        order = ("name", "title", "authors", "doi", "url", "license")
        return [found[k] for k in order if k in found]

    # -- sources ------------------------------------------------------------------------
    @staticmethod
    def _pyproject(ctx: DetectContext) -> tuple[dict[str, Any], str] | None:
        if "pyproject.toml" not in ctx.index:
            return None
        text = ctx.index.try_read_text("pyproject.toml")
        if text is None:
            return None
        try:
            return tomllib.loads(text), text
        except tomllib.TOMLDecodeError as exc:
            ctx.warn(f"not valid TOML, project name not read from it: {exc}", "pyproject.toml")
            return None

    def _name(
        self, ctx: DetectContext, pyproject: tuple[dict[str, Any], str] | None, add: _Add
    ) -> None:
        if pyproject is not None:
            data, text = pyproject
            for table, header in (
                (data.get("project"), r"^\[project\]"),
                (_poetry(data), r"^\[tool\.poetry\]"),
            ):
                name = table.get("name") if isinstance(table, dict) else None
                if isinstance(name, str) and name.strip():
                    start = (_line_of(text, header) or 1) - 1
                    add(
                        "name",
                        name.strip(),
                        "pyproject.toml",
                        _line_of(text, r"^\s*name\s*=", start),
                    )
                    return
        cfg = _setup_cfg(ctx)
        if cfg is not None:
            parser, text = cfg
            name = parser.get("metadata", "name", fallback="").strip()
            if name:
                add("name", name, "setup.cfg", _line_of(text, r"^\s*name\s*="))
                return
        setup = _setup_py_kwargs(ctx)
        if "name" in setup:
            value, line = setup["name"]
            add("name", value, "setup.py", line)

    def _license(
        self, ctx: DetectContext, pyproject: tuple[dict[str, Any], str] | None, add: _Add
    ) -> None:
        for path in _LICENSE_FILES:
            if path not in ctx.index:
                continue
            text = ctx.index.try_read_text(path)
            spdx = classify_license(text) if text is not None else None
            if spdx is not None:
                add("license", spdx, path, 1)
                return
            ctx.warn("license text not recognised; no license recorded from it", path)
        if pyproject is not None:
            data, text = pyproject
            lic = (
                data.get("project", {}).get("license")
                if isinstance(data.get("project"), dict)
                else None
            )
            if isinstance(lic, dict):
                lic = lic.get("text")
            if isinstance(lic, str) and lic.strip() and len(lic) < 100:
                add("license", lic.strip(), "pyproject.toml", _line_of(text, r"^\s*license\s*="))
                return
        cfg = _setup_cfg(ctx)
        if cfg is not None:
            lic = cfg[0].get("metadata", "license", fallback="").strip()
            if lic and len(lic) < 100:
                add("license", lic, "setup.cfg", _line_of(cfg[1], r"^\s*license\s*="))
                return
        setup = _setup_py_kwargs(ctx)
        if "license" in setup:
            add("license", setup["license"][0], "setup.py", setup["license"][1])

    def _citation(self, ctx: DetectContext, add: _Add) -> None:
        path = "CITATION.cff"
        if path not in ctx.index:
            return
        text = ctx.index.try_read_text(path)
        if text is None:
            ctx.warn("cannot be read as text; skipped", path)
            return
        import yaml  # loaded only when there is a CITATION.cff to read

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            ctx.warn(f"not valid YAML, skipped: {' '.join(str(exc).split())}", path)
            return
        if not isinstance(data, dict):
            ctx.warn("not a CITATION.cff mapping, skipped", path)
            return
        preferred = data.get("preferred-citation")
        # The preferred citation is the paper; the top level describes the software.
        sources = (
            [(preferred, _line_of(text, r"^preferred-citation\s*:") or 0)]
            if isinstance(preferred, dict)
            else []
        )
        sources.append((data, 0))
        for block, start in sources:
            indent = r"\s+" if start else ""
            title = block.get("title")
            if isinstance(title, str) and title.strip():
                add(
                    "title",
                    " ".join(title.split()),
                    path,
                    _line_of(text, rf"^{indent}title\s*:", start),
                )
            authors = _authors(block.get("authors"))
            if authors:
                add("authors", authors, path, _line_of(text, rf"^{indent}authors\s*:", start))
            doi = block.get("doi") or _identifier(block.get("identifiers"), "doi")
            if isinstance(doi, str) and doi.strip():
                add(
                    "doi",
                    _bare_doi(doi),
                    path,
                    _line_of(text, r"\bdoi\s*:|value\s*:\s*['\"]?10\.", start),
                )
            for key in ("url", "repository-code", "repository"):
                url = block.get(key)
                if isinstance(url, str) and url.strip():
                    add("url", url.strip(), path, _line_of(text, rf"^{indent}{key}\s*:", start))
                    break

    def _readme(self, ctx: DetectContext, add: _Add) -> None:
        for path in _README_FILES:
            if path not in ctx.index:
                continue
            text = ctx.index.try_read_text(path)
            if text is None:
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                arxiv = _ARXIV_RE.search(line)
                if arxiv:
                    add("url", f"https://arxiv.org/abs/{arxiv.group(1)}", path, number, "medium")
                doi = _DOI_RE.search(line)
                if doi:
                    add("doi", _bare_doi(doi.group(1)), path, number, "medium")
            return


# -- helpers ------------------------------------------------------------------------------


def _poetry(data: dict[str, Any]) -> Any:
    tool = data.get("tool")
    return tool.get("poetry") if isinstance(tool, dict) else None


def _setup_cfg(ctx: DetectContext) -> tuple[configparser.ConfigParser, str] | None:
    if "setup.cfg" not in ctx.index:
        return None
    import configparser  # loaded only when there is a setup.cfg

    text = ctx.index.try_read_text("setup.cfg")
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        ctx.warn(
            f"not a valid setup.cfg, project facts not read from it: {exc.message}", "setup.cfg"
        )
        return None
    return parser, text


def _setup_py_kwargs(ctx: DetectContext) -> dict[str, tuple[str, int]]:
    """String ``name``/``license`` keywords of ``setup(...)`` in setup.py, with their line."""
    if "setup.py" not in ctx.index:
        return {}
    tree = ctx.index.parse_python("setup.py")
    if tree is None:
        return {}
    constants: dict[str, str] = {}
    for stmt in tree.body:  # NAME = "x" at module level, for setup(name=NAME)
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            constants[stmt.targets[0].id] = stmt.value.value
    found: dict[str, tuple[str, int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if callee(node) != "setup":
            continue
        for kw in node.keywords:
            if kw.arg not in {"name", "license"}:
                continue
            value: str | None = None
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                value = kw.value.value
            elif isinstance(kw.value, ast.Name):
                value = constants.get(kw.value.id)
            if value and value.strip() and len(value) < 100:
                found.setdefault(kw.arg, (value.strip(), kw.value.lineno))
    return found


def _authors(raw: Any) -> list[str]:
    names: list[str] = []
    if not isinstance(raw, list):
        return names
    for person in raw:
        if not isinstance(person, dict):
            continue
        if isinstance(person.get("name"), str):  # an entity (a team, a lab)
            names.append(person["name"].strip())
            continue
        parts = [
            str(person[k]).strip()
            for k in ("given-names", "name-particle", "family-names", "name-suffix")
            if person.get(k)
        ]
        if parts:
            names.append(" ".join(parts))
    return names


def _identifier(raw: Any, kind: str) -> str | None:
    if isinstance(raw, list):
        for item in raw:
            if (
                isinstance(item, dict)
                and item.get("type") == kind
                and isinstance(item.get("value"), str)
            ):
                return str(item["value"])
    return None


def _bare_doi(doi: str) -> str:
    """``10.x/y`` from a DOI, a ``https://doi.org/`` URL or a Zenodo badge path."""
    doi = re.sub(r"^(?:https?://)?(?:dx\.)?doi\.org/|^doi:\s*", "", doi.strip(), flags=re.I)
    return re.sub(r"\.svg$", "", doi).rstrip(".,;")
