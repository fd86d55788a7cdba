"""Pipfile (Pipenv): ``[packages]``, ``[requires] python_version`` and ``[[source]]`` indexes.

``"*"`` means any version; a table may carry ``version``, ``extras``, ``markers``, ``git``
(+ ``ref``) or a local ``path`` (skipped: installed from the tree). ``[dev-packages]`` are
development tools and are ignored. The first ``[[source]]`` is Pipenv's primary index.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from typing import Any

from reprobridge.detect._text import skip_path
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.declared.pyproject import toml_error
from reprobridge.detect.declared.requirements import (
    declared_requirement,
    index_finding,
    is_default_index,
)
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import IndexRole, PythonVersionValue
from reprobridge.errors import DetectionError, UnsafePathError

_MAJOR_MINOR_RE = re.compile(r"^(\d+)\.(\d+)")


def pipenv_python(
    requires: dict[str, Any],
    path: str,
    line_of: Callable[[str], int | None],
    detector: str,
    where: str,
) -> Finding | None:
    """The ``python_version`` finding of Pipenv's ``requires`` table (Pipfile ``[requires]``,
    Pipfile.lock ``_meta.requires``): ``python_full_version`` first, major.minor kept."""
    for key in ("python_full_version", "python_version"):
        match = _MAJOR_MINOR_RE.match(str(requires.get(key, "")))
        if match:
            return Finding(
                kind="python_version",
                key="python",
                value=PythonVersionValue(exact=f"{match.group(1)}.{match.group(2)}"),
                evidence=(Evidence(path, line_of(key)),),
                detector=detector,
                note=f"{where} {key}",
            )
    return None


def _pipfile_requirement(name: str, spec: Any) -> str | None:
    """The PEP 508 string of one ``[packages]`` entry (None: a local path)."""
    if isinstance(spec, str):
        return name if spec.strip() in ("", "*") else name + spec.strip()
    if not isinstance(spec, dict):
        return name
    if "path" in spec or ("file" in spec and not str(spec["file"]).startswith("http")):
        return None
    extras = spec.get("extras") or []
    head = name + (f"[{','.join(extras)}]" if extras else "")
    if "git" in spec:
        url = str(spec["git"])
        url = url if url.startswith("git+") else f"git+{url}"
        ref = spec.get("ref")
        body = f"{head} @ {url}" + (f"@{ref}" if ref else "")
    elif "file" in spec:
        body = f"{head} @ {spec['file']}"
    else:
        version = str(spec.get("version", "*")).strip()
        body = head + ("" if version == "*" else version)
    markers = spec.get("markers")
    return body + (f" ; {markers}" if markers else "")


class PipfileDetector(Detector):
    """Requirements, Python version and indexes of every ``Pipfile``.

    In the root Pipfile, invalid TOML or an invalid requirement raises DetectionError with
    the path and line; a broken Pipfile in a subdirectory is skipped with a warning.
    """

    name = "pipfile"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        scope = env_scope(ctx.index)
        for path in ctx.index.named("Pipfile"):
            if skip_path(path) or scope.ignores(path):
                continue
            if scope.declared(path):
                findings += self._one(ctx, path)
                continue
            try:
                findings += self._one(ctx, path)
            except (DetectionError, UnsafePathError) as exc:
                ctx.warn(f"skipped: {exc}", path)
        return findings

    def _one(self, ctx: DetectContext, path: str) -> list[Finding]:
        text = ctx.index.read_text(path)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise toml_error(exc, path) from exc
        lines = text.splitlines()
        findings: list[Finding] = []

        def line_of(pattern: str, section: str) -> int:
            start = next((i for i, ln in enumerate(lines) if ln.strip() == f"[{section}]"), 0)
            rx = re.compile(r"""^\s*["']?""" + re.escape(pattern) + r"""["']?\s*=""", re.I)
            for i in range(start, len(lines)):
                if rx.match(lines[i]):
                    return i + 1
            return start + 1

        for number, source in enumerate(data.get("source", []) or []):
            url = source.get("url") if isinstance(source, dict) else None
            if isinstance(url, str) and not is_default_index(url):
                role: IndexRole = "index" if number == 0 else "extra"
                # [[source]] tables have no key to find; the url line is unique enough.
                line = next((i + 1 for i, ln in enumerate(lines) if url in ln), 1)
                findings.append(index_finding(url, role, Evidence(path, line), self.name))

        requires = data.get("requires", {})
        if isinstance(requires, dict):
            found = pipenv_python(
                requires,
                path,
                lambda key: line_of(key, "requires"),
                self.name,
                "Pipfile [requires]",
            )
            findings += [found] if found else []

        packages = data.get("packages", {})
        if not isinstance(packages, dict):
            raise DetectionError("[packages] must be a table", path=path, field="packages")
        for name, spec in packages.items():
            line = line_of(name, "packages")
            text_req = _pipfile_requirement(name, spec)
            if text_req is None:
                continue
            findings.append(declared_requirement(text_req, path, line, self.name))
        return findings
