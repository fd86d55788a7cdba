"""The repository's own lock: ``uv.lock``, ``poetry.lock`` or ``Pipfile.lock``.

A committed lock is the authors' environment, so its versions win over a resolution rb would
make. Read from the environment's configuration directory (the root, or ``binder/``; see
:mod:`~reprobridge.detect.envscope`), never executed:

* every package from a registry (not the project itself, a path, a URL or a VCS checkout)
  with one version becomes a ``python_pin`` finding ``{"version": "1.24.4", "lock": path}``
  keyed on its canonical name; the merge pins the requirements it names and keeps the rest as
  constraints (a package locked at several versions, for different Pythons, is left out);
* a ``Pipfile.lock`` is a declaration too (repo2docker installs from it): without a
  ``Pipfile`` next to it, its ``default`` packages are the requirements; its
  ``_meta.requires.python_version`` is the Python (Pipenv's Python wins over runtime.txt).
  ``develop`` packages are development tools and are skipped.

A lock that does not parse is a ``DetectionError`` naming it (a declared source).
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from packaging.utils import canonicalize_name

from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.declared.pipfile import pipenv_python
from reprobridge.detect.declared.pyproject import toml_error
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import PinValue, RequirementValue
from reprobridge.errors import DetectionError

LOCK_FILES = ("uv.lock", "poetry.lock", "Pipfile.lock")
_VERSION_RE = re.compile(r"^==\s*([0-9][A-Za-z0-9.+!_-]*)$")


class LockfilesDetector(Detector):
    """``python_pin`` (and Pipfile.lock's requirements/Python) findings; see module doc."""

    name = "lockfiles"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        scope = env_scope(ctx.index)
        base = f"{scope.config_dir}/" if scope.config_dir else ""
        findings: list[Finding] = []
        for name in LOCK_FILES:
            path = base + name
            if path not in ctx.index or scope.ignores(path):
                continue
            text = ctx.index.read_text(path)
            if name == "Pipfile.lock":
                findings += self._pipfile_lock(ctx, path, text, (base + "Pipfile") in ctx.index)
            else:
                findings += self._toml_lock(path, text)
        return findings

    def _toml_lock(self, path: str, text: str) -> list[Finding]:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise toml_error(exc, path) from exc
        versions: dict[str, set[str]] = {}
        spelled: dict[str, str] = {}
        for pkg in data.get("package", []) or []:
            if not isinstance(pkg, dict) or not isinstance(pkg.get("name"), str):
                continue
            if not _from_registry(pkg.get("source")):
                continue
            name = canonicalize_name(pkg["name"])
            spelled.setdefault(name, pkg["name"])
            versions.setdefault(name, set()).add(str(pkg.get("version")))
        lines = [line.strip() for line in text.splitlines()]
        return [
            self._pin(path, name, next(iter(vs)), _exact_line(lines, f'name = "{spelled[name]}"'))
            for name, vs in sorted(versions.items())
            if len(vs) == 1 and next(iter(vs)) not in ("", "None")
        ]

    def _pipfile_lock(
        self, ctx: DetectContext, path: str, text: str, has_pipfile: bool
    ) -> list[Finding]:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DetectionError(f"not valid JSON ({exc})", path=path) from None
        if not isinstance(data, dict):
            raise DetectionError("not a Pipfile.lock (no JSON object)", path=path)
        lines = text.splitlines()
        findings: list[Finding] = []
        meta = _table(data, "_meta")
        requires = _table(meta, "requires")
        found = pipenv_python(
            requires,
            path,
            lambda key: _line(lines, f'"{key}"'),
            self.name,
            "Pipfile.lock _meta.requires",
        )
        findings += [found] if found else []
        default = _table(data, "default")
        for raw_name, spec in sorted(default.items()):
            if not isinstance(spec, dict):
                continue
            match = _VERSION_RE.match(str(spec.get("version", "")).strip())
            if match is None:
                continue  # a git, path or URL entry: nothing to pin
            name = canonicalize_name(raw_name)
            line = _line(lines, f'"{raw_name}"')
            findings.append(self._pin(path, name, match.group(1), line))
            if not has_pipfile:
                marker = spec.get("markers")
                req = f"{name}=={match.group(1)}" + (f"; {marker}" if marker else "")
                findings.append(
                    Finding(
                        kind="python_requirement",
                        key=name,
                        value=RequirementValue(req, declared=True),
                        evidence=(Evidence(path, line),),
                        detector=self.name,
                        note="Pipfile.lock [default]",
                    )
                )
        return findings

    def _pin(self, path: str, name: str, version: str, line: int | None) -> Finding:
        return Finding(
            kind="python_pin",
            key=name,
            value=PinValue(version, path),
            evidence=(Evidence(path, line),),
            detector=self.name,
        )


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _from_registry(source: Any) -> bool:
    """uv: ``source = {registry = URL}``; Poetry: no ``source`` or a ``legacy`` index."""
    if source is None:
        return True  # poetry.lock: PyPI entries carry no source table
    if not isinstance(source, dict):
        return False
    return "registry" in source or source.get("type") in ("legacy", "pypi")


def _exact_line(lines: list[str], line: str) -> int | None:
    return next((i + 1 for i, text in enumerate(lines) if text == line), None)


def _line(lines: list[str], needle: str) -> int | None:
    return next((i + 1 for i, line in enumerate(lines) if needle in line), None)
