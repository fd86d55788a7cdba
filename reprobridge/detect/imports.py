"""Imports that no dependency file declares.

Starts from the index's cheap scan (``RepoIndex.py_scan``: top-level import names per file).
An import is the repository's own (not a dependency) when a module or package of that name
exists at the root, under ``src/``, next to the importing file (a script's directory is first
on ``sys.path``), as a package directory anywhere (code that extends ``sys.path``), as an
extension name in a setup.py, or, for a name the tables do not know as third-party, as any
module of the repository. Standard-library and Python 2 standard-library names, relative
imports and private (``_x``) names are excluded, and so are setup.py files (their imports
are build requirements).

What is left is mapped to a distribution (``cv2`` -> ``opencv-python``, see
:mod:`~reprobridge.detect._pkgmap`); one that no earlier ``python_requirement`` declares
(under any distribution providing that import) is confirmed by re-reading at most a few of
the files importing it (the scan also matches docstrings; no file is parsed), then reported with
``declared=False``, confidence medium, and the first ``file:line`` that imports it. Files of
declared imports are never parsed.
"""

from __future__ import annotations

import re
import sys

from packaging.utils import canonicalize_name

from reprobridge.detect._pkgmap import (
    GOOGLE_SUBPACKAGES,
    IMPORT_TO_DIST,
    NOT_ON_PYPI,
    PROVIDER_PREFIXES,
    PROVIDERS,
    PY2_STDLIB,
)
from reprobridge.detect._text import skip_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding

NOTE = "imported but not declared in any dependency file"
#: Files re-read at most per undeclared import name, to confirm the scan's match.
_MAX_CONFIRM = 5
#: Import names the tables know as third-party: never taken for a nested repo module.
_KNOWN = frozenset(IMPORT_TO_DIST) | frozenset(PROVIDERS) | frozenset(NOT_ON_PYPI) | {"google"}
_STDLIB = frozenset(sys.stdlib_module_names) | PY2_STDLIB | {"__future__", "__main__"}
_GOOGLE_RE = re.compile(r"^[ \t]*(?:from|import)[ \t]+google\.(\w+)", re.M)
_EXTENSION_RE = re.compile(r"""Extension\(\s*(?:name\s*=\s*)?["']([A-Za-z_][\w.]*)["']""")


def _import_line_re(name: str) -> re.Pattern[str]:
    n = re.escape(name)
    return re.compile(
        rf"^[ \t]*(?:from[ \t]+{n}(?:[ \t.]|$)|import[ \t]+(?:[\w., \t]*,[ \t]*)?{n}(?:[ \t.,]|$))",
        re.M,
    )


class _OwnModules:
    """Which top-level names the repository itself provides, per importing directory."""

    def __init__(self, ctx: DetectContext) -> None:
        self.global_names: set[str] = set()
        self.by_dir: dict[str, set[str]] = {}
        #: Every module and package name at any depth (for names no table knows).
        self.anywhere: set[str] = set()
        for entry in ctx.index:
            if entry.suffix not in (".py", ".pyx", ".so", ".pyd", ".pyi"):
                continue
            parts = entry.path.split("/")  # index paths are normalized POSIX paths
            name = parts[-1]
            module = name.split(".", 1)[0]
            self.anywhere.update([module, *parts[:-1]])
            parent = "/".join(parts[:-1])
            self.by_dir.setdefault(parent, set()).add(module)
            if len(parts) > 1:
                self.by_dir.setdefault("/".join(parts[:-2]), set()).add(parts[-2])
            roots = [parts]
            if parts[0] == "src" and len(parts) > 1:
                roots.append(parts[1:])
            for p in roots:
                self.global_names.add(p[0] if len(p) > 1 else module)
            if name == "__init__.py" and len(parts) > 1:
                self.global_names.add(parts[-2])
        # Extension modules built by setup.py (CUDAExtension("fused_ops", ...)) import by a
        # name that exists only after the build.
        for path in ctx.index.named("setup.py"):
            text = ctx.index.try_read_text(path) or ""
            for match in _EXTENSION_RE.finditer(text):
                self.global_names.add(match.group(1).split(".")[0])

    def provides(self, name: str, importer: str) -> bool:
        """True when ``importer`` would find ``name`` in the repository itself."""
        parent = importer.rpartition("/")[0]
        return name in self.global_names or name in self.by_dir.get(parent, set())


def _declared(name: str, dist: str, declared: set[str]) -> bool:
    candidates = {dist, canonicalize_name(name), *PROVIDERS.get(name, ())}
    if candidates & declared:
        return True
    prefixes = PROVIDER_PREFIXES.get(name, ())
    return any(d.startswith(prefixes) for d in declared) if prefixes else False


class ImportsDetector(Detector):
    """Flags third-party imports that no dependency file declares (see module docstring)."""

    name = "imports"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        declared = {f.key for f in ctx.of_kind("python_requirement")}
        own = _OwnModules(ctx)
        importers: dict[str, list[str]] = {}  # import name -> files importing it, sorted
        for path, scan in sorted(ctx.index.py_scan().items()):
            # setup.py's imports (setuptools, torch for CUDAExtension) are build requirements
            # of the package, which the setup.py detector and the build backend deal with.
            if skip_path(path) or path.rsplit("/", 1)[-1] == "setup.py":
                continue
            for name in scan.imports:
                if not (
                    name == "."
                    or name.startswith("_")
                    or name in _STDLIB
                    or own.provides(name, path)
                ):
                    importers.setdefault(name, []).append(path)
        found: dict[str, Finding] = {}
        for name, paths in sorted(importers.items()):
            simple = canonicalize_name(IMPORT_TO_DIST.get(name, name))
            if name != "google" and _declared(name, simple, declared):
                continue
            if name not in _KNOWN and name in own.anywhere:
                continue  # an unknown name that is some module of the repo: sys.path tricks
            hit = self._confirm(ctx, paths, name)
            if hit is None:
                continue  # only in docstrings or strings: the scan's regex over-matched
            path, line = hit
            if name == "google":
                targets = self._google(ctx, path)
            else:
                targets = [(name, IMPORT_TO_DIST.get(name, name))]
            for import_name, dist in targets:
                key = canonicalize_name(dist)
                if key in found or _declared(name, key, declared):
                    continue
                requirement = NOT_ON_PYPI.get(import_name, key)
                from_source = import_name in NOT_ON_PYPI
                confidence: Confidence = "low" if from_source else "medium"
                note = NOTE + (
                    "; its PyPI namesake is another project, so it is installed from source"
                    if from_source
                    else ""
                )
                evidence = (
                    Evidence(path, line)
                    if line is not None and "." not in import_name
                    else self._evidence(ctx, path, import_name)
                )
                found[key] = Finding(
                    kind="python_requirement",
                    key=canonicalize_name(requirement.split(" @ ")[0]),
                    value={"requirement": requirement, "declared": False},
                    evidence=(evidence,),
                    detector=self.name,
                    confidence=confidence,
                    note=note,
                )
        return [found[k] for k in sorted(found)]

    @staticmethod
    def _confirm(ctx: DetectContext, paths: list[str], name: str) -> tuple[str, int | None] | None:
        """The first (file, line) whose code really imports ``name``, reading few files.

        The index's scan is a line search, so ``import it`` inside a docstring counts too;
        the files of otherwise-undeclared names are re-read (never parsed) and an import
        line counts only outside triple-quoted strings (an even number of each triple quote
        before it: cheap, and right for docstrings and code templates alike).
        """
        pattern = _import_line_re(name)
        for path in paths[:_MAX_CONFIRM]:
            text = ctx.index.try_read_text(path)
            if text is None:
                continue
            for match in pattern.finditer(text):
                start = match.start()
                if text.count('"""', 0, start) % 2 or text.count("'''", 0, start) % 2:
                    continue
                return path, text.count("\n", 0, start) + 1
        return None

    @staticmethod
    def _google(ctx: DetectContext, path: str) -> list[tuple[str, str]]:
        """Distributions behind ``import google.X`` (a namespace of many projects)."""
        text = ctx.index.try_read_text(path) or ""
        out: list[tuple[str, str]] = []
        for sub in dict.fromkeys(m.group(1) for m in _GOOGLE_RE.finditer(text)):
            dist = GOOGLE_SUBPACKAGES.get(sub, f"google-{sub}" if sub != "cloud" else None)
            if dist is not None:
                out.append((f"google.{sub}", dist))
        if "from google.cloud import" in text or "import google.cloud." in text:
            for m in re.finditer(r"google\.cloud(?:\.|\s+import\s+)(\w+)", text):
                out.append((f"google.cloud.{m.group(1)}", f"google-cloud-{m.group(1)}"))
        return list(dict.fromkeys(out))

    @staticmethod
    def _evidence(ctx: DetectContext, path: str, import_name: str) -> Evidence:
        text = ctx.index.try_read_text(path)
        parts = import_name.split(".")
        # "google.cloud.storage" may be written "from google.cloud import storage": try the
        # full dotted name first, then its parents.
        for end in range(len(parts), 0, -1):
            match = _import_line_re(".".join(parts[:end])).search(text or "")
            if text is not None and match:
                return Evidence(path, text.count("\n", 0, match.start()) + 1)
        return Evidence(path)
