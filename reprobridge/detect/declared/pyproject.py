"""pyproject.toml: PEP 621 ``[project]``, Poetry, PDM and uv dependency declarations.

* PEP 621: ``dependencies``, ``requires-python``; ``dynamic = ["dependencies"]`` with
  ``[tool.setuptools.dynamic] dependencies = {file = [...]}`` defers to those files.
* Poetry: ``[tool.poetry.dependencies]`` with caret/tilde constraints converted to PEP 440
  (``^1.2`` -> ``>=1.2,<2.0``, ``~1.2`` -> ``>=1.2,<1.3``); the ``python`` key is the Python
  version; optional dependencies, groups and ``dev-dependencies`` are not installed by default
  and are skipped; ``[[tool.poetry.source]]`` gives indexes.
* PDM: legacy ``[tool.pdm] dependencies``/``python_requires`` and ``[[tool.pdm.source]]``;
  ``dev-dependencies`` are ignored.
* uv: ``[[tool.uv.index]]``, ``index-url``/``extra-index-url``.

Line numbers come from a cheap scan of the text (tomllib keeps none): a dependency's line is
the first line at or after its table's header that mentions it.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from packaging.utils import canonicalize_name

from reprobridge.detect.base import Confidence, DeclaredFileDetector, DetectContext, Finding
from reprobridge.detect.declared.requirements import DeclaredFile
from reprobridge.detect.findings import IndexRole
from reprobridge.errors import DetectionError

_TOML_LINE_RE = re.compile(r"line (\d+)")
_VERSION_RE = re.compile(r"^\d+(?:\.\d+)*$")


def toml_error(exc: tomllib.TOMLDecodeError, path: str) -> DetectionError:
    """A DetectionError naming ``path`` and the line tomllib reports."""
    match = _TOML_LINE_RE.search(str(exc))
    return DetectionError(
        f"is not valid TOML: {str(exc).splitlines()[0]}",
        path=path,
        field=f"line {match.group(1)}" if match else None,
    )


def _bump(parts: list[int], index: int) -> list[int]:
    """``parts`` with ``parts[index]`` incremented and everything after it zeroed."""
    return [*parts[:index], parts[index] + 1] + [0] * (len(parts) - index - 1)


def _fmt(parts: list[int]) -> str:
    return ".".join(str(p) for p in parts)


def poetry_constraint(constraint: str) -> str:
    """A Poetry version constraint as a PEP 440 specifier set ("" for any version).

    ``^1.2.3`` -> ``>=1.2.3,<2.0.0``; ``^0.2`` -> ``>=0.2,<0.3``; ``~1.2`` -> ``>=1.2,<1.3``;
    ``1.2.3`` -> ``==1.2.3``; ``1.2.*`` -> ``==1.2.*``; ``>=1.2 <2`` -> ``>=1.2,<2``. An ``||``
    union is widened to one range from its first lower bound to its last upper bound.
    """
    constraint = constraint.strip()
    if constraint in ("", "*"):
        return ""
    if "||" in constraint:
        parts = [poetry_constraint(p) for p in constraint.split("||")]
        lowers = [s for s in parts[0].split(",") if s.startswith(">")]
        uppers = [s for s in parts[-1].split(",") if s.startswith("<")]
        return ",".join(lowers + uppers)
    # ">= 1.2" -> ">=1.2", so that a space only ever separates two constraints.
    constraint = re.sub(r"([<>=!~^]=?)\s+", r"\1", constraint)
    out: list[str] = []
    for piece in re.split(r"\s*,\s*|\s+(?=[<>=!~^\d])", constraint):
        piece = piece.replace(" ", "")
        if not piece:
            continue
        if piece[0] in "^~" and not piece.startswith("~="):
            version = piece[1:]
            if not _VERSION_RE.match(version):
                out.append(piece)  # let validation report it
                continue
            nums = [int(n) for n in version.split(".")]
            if piece[0] == "^":
                # The first non-zero component may not change (^0.0.3 -> <0.0.4).
                index = next((i for i, n in enumerate(nums) if n != 0), len(nums) - 1)
            else:
                index = 1 if len(nums) > 1 else 0
            upper = _bump(nums + [0] * max(0, 2 - len(nums)), index)
            out += [f">={version}", f"<{_fmt(upper)}"]
        elif piece[0].isdigit():
            out.append(f"=={piece}")
        else:
            out.append(piece)
    return ",".join(out)


class _Lines:
    """Cheap line lookup in a TOML text: the line of ``name`` below a table header."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def find(self, header: str, name: str | None = None) -> int:
        start = 0
        pattern = re.compile(r"^\s*\[+\s*" + re.escape(header) + r"\s*\]+")
        for i, line in enumerate(self.lines):
            if pattern.match(line):
                start = i
                break
        else:
            # The table may be written inline (project = {...}) or as dotted keys.
            return 1
        if name is None:
            return start + 1
        quoted = re.compile(r"""(^|[\s"'\[{,])""" + re.escape(name) + r"""\b""", re.I)
        for i in range(start, len(self.lines)):
            if quoted.search(self.lines[i]):
                return i + 1
        return start + 1


class PyprojectDetector(DeclaredFileDetector):
    """Dependencies, Python bound and package indexes declared in ``pyproject.toml``.

    The root pyproject.toml is a declared source: invalid TOML, an invalid requirement or
    Python specifier raises DetectionError with the path and the line. A nested one gives
    medium-confidence findings and is skipped with a warning when broken.
    """

    name = "pyproject"
    filename = "pyproject.toml"

    def _one(self, ctx: DetectContext, path: str, confidence: Confidence) -> list[Finding]:
        text = ctx.index.read_text(path)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise toml_error(exc, path) from exc
        run = _Run(ctx, self.name, path, _Lines(text), confidence)
        project = data.get("project")
        if isinstance(project, dict):
            run.pep621(project, data)
        tool: dict[str, Any] = data["tool"] if isinstance(data.get("tool"), dict) else {}
        if isinstance(tool.get("poetry"), dict):
            run.poetry(tool["poetry"])
        if isinstance(tool.get("pdm"), dict):
            run.pdm(tool["pdm"])
        if isinstance(tool.get("uv"), dict):
            run.uv(tool["uv"])
        return run.findings


class _Run(DeclaredFile):
    """The findings of one pyproject.toml, with its ``lines`` to find each value's line."""

    def __init__(
        self, ctx: DetectContext, detector: str, path: str, lines: _Lines, conf: Confidence
    ) -> None:
        super().__init__(ctx, detector, path, conf)
        self.lines = lines

    def strings(self, value: Any, what: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DetectionError(f"{what} must be a list of strings", path=self.path, field=what)
        return value

    # -- PEP 621 --------------------------------------------------------------------------
    def pep621(self, project: dict[str, Any], data: dict[str, Any]) -> None:
        if "requires-python" in project:
            spec = project["requires-python"]
            line = self.lines.find("project", "requires-python")
            self.python(str(spec), line, "pyproject [project] requires-python", "requires-python")
        for dep in self.strings(project.get("dependencies", []), "project.dependencies"):
            self.requirement(dep, self.lines.find("project", _dep_name(dep)))
        dynamic_fields = project.get("dynamic", [])
        if isinstance(dynamic_fields, list) and "dependencies" in dynamic_fields:
            dynamic = _table(data, "tool", "setuptools", "dynamic")
            spec = dynamic.get("dependencies", {})
            files = spec.get("file", []) if isinstance(spec, dict) else []
            line = self.lines.find("tool.setuptools.dynamic")
            for target in [files] if isinstance(files, str) else files:
                self.deferred(line, str(target), "dynamic dependencies")

    # -- Poetry ---------------------------------------------------------------------------
    def poetry(self, poetry: dict[str, Any]) -> None:
        deps = poetry.get("dependencies", {})
        header = "tool.poetry.dependencies"
        for name, spec in deps.items() if isinstance(deps, dict) else []:
            line = self.lines.find(header, name)
            if canonicalize_name(name) == "python":
                constraint = spec if isinstance(spec, str) else ""
                self.python(poetry_constraint(constraint), line, "Poetry python dependency", name)
                continue
            text = self._poetry_requirement(name, spec, line)
            if text:
                self.requirement(text, line)
        for source in poetry.get("source", []) or []:
            if isinstance(source, dict):
                primary = source.get("default") is True or source.get("priority") in (
                    "default",
                    "primary",
                )
                line = self.lines.find("tool.poetry.source", str(source.get("name", "")))
                self.index(source.get("url"), "index" if primary else "extra", line)

    def _poetry_requirement(self, name: str, spec: Any, line: int) -> str | None:
        if isinstance(spec, list):
            # Several constraints for different markers: the first stands for all.
            self.ctx.warn(
                f"line {line}: {name} has several constraints; using the first", self.path
            )
            spec = spec[0] if spec else "*"
        if isinstance(spec, str):
            return name + poetry_constraint(spec)
        if not isinstance(spec, dict):
            raise DetectionError(
                f"dependency {name} is neither a string nor a table",
                path=self.path,
                field=f"line {line}",
            )
        if spec.get("optional") is True or "path" in spec:
            return None  # an extra, or a local package installed from the tree
        extras = spec.get("extras") or []
        head = name + (f"[{','.join(extras)}]" if extras else "")
        if "git" in spec:
            ref = spec.get("rev") or spec.get("tag") or spec.get("branch")
            url = str(spec["git"])
            url = url if url.startswith("git+") else f"git+{url}"
            body = f"{head} @ {url}" + (f"@{ref}" if ref else "")
        elif "url" in spec:
            body = f"{head} @ {spec['url']}"
        else:
            body = head + poetry_constraint(str(spec.get("version", "*")))
        markers = spec.get("markers")
        return body + (f" ; {markers}" if markers else "")

    # -- PDM / uv -------------------------------------------------------------------------
    def pdm(self, pdm: dict[str, Any]) -> None:
        # Legacy PDM (before PEP 621 support) kept the project's metadata under tool.pdm.
        for dep in self.strings(pdm.get("dependencies", []), "tool.pdm.dependencies"):
            self.requirement(dep, self.lines.find("tool.pdm", _dep_name(dep)))
        for key in ("python_requires", "requires-python"):
            if key in pdm:
                line = self.lines.find("tool.pdm", key)
                self.python(str(pdm[key]), line, "PDM python_requires", key)
        for source in pdm.get("source", []) or []:
            if isinstance(source, dict):
                role: IndexRole = "index" if source.get("name") == "pypi" else "extra"
                line = self.lines.find("tool.pdm.source", str(source.get("name", "")))
                self.index(source.get("url"), role, line)

    def uv(self, uv: dict[str, Any]) -> None:
        for source in uv.get("index", []) or []:
            if isinstance(source, dict):
                uv_role: IndexRole = "index" if source.get("default") is True else "extra"
                line = self.lines.find("tool.uv.index", str(source.get("name", "")))
                self.index(source.get("url"), uv_role, line)
        if "index-url" in uv:
            self.index(uv["index-url"], "index", self.lines.find("tool.uv", "index-url"))
        extra = uv.get("extra-index-url", [])
        for url in [extra] if isinstance(extra, str) else extra:
            self.index(url, "extra", self.lines.find("tool.uv", "extra-index-url"))


def _table(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``data[k1][k2]...`` when every level is a table, else ``{}``."""
    for key in keys:
        value = data.get(key)
        if not isinstance(value, dict):
            return {}
        data = value
    return data


def _dep_name(dep: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", dep)
    return match.group(1) if match else dep
