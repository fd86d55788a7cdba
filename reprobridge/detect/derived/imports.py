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
import shlex
import sys

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from reprobridge.detect._notebook import json_line_of, notebook_code, notebook_shell_lines
from reprobridge.detect._pkgmap import (
    CALL_DISTS,
    GOOGLE_SUBPACKAGES,
    IMPORT_TO_DIST,
    NOT_ON_PYPI,
    PROVIDER_PREFIXES,
    PROVIDERS,
    PY2_STDLIB,
    SUBMODULE_DISTS,
    THIRD_PARTY,
    submodule_dists,
)
from reprobridge.detect._text import is_support_path, skip_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding
from reprobridge.detect.derived._guards import ImportSite, import_sites
from reprobridge.detect.findings import OptionalImportValue, RequirementValue
from reprobridge.detect.index import scan_imports

NOTE = "imported but not declared in any dependency file"
#: A ``try`` statement: without one, no import of a file is guarded.
_TRY_RE = re.compile(r"^[ \t]*try[ \t]*:", re.M)
OPTIONAL_NOTE = (
    "imported only inside a try whose except catches a failed import: the code runs "
    "without it, so it is not a requirement"
)
#: Files re-read at most per undeclared import name, to confirm the scan's match.
_MAX_CONFIRM = 5
#: Import names the tables know as third-party: never taken for a nested repo module.
_KNOWN = (
    frozenset(IMPORT_TO_DIST)
    | frozenset(PROVIDERS)
    | frozenset(NOT_ON_PYPI)
    | THIRD_PARTY
    | {"google"}
)
_STDLIB = frozenset(sys.stdlib_module_names) | PY2_STDLIB | {"__future__", "__main__"}
_GOOGLE_RE = re.compile(r"^[ \t]*(?:from|import)[ \t]+google\.(\w+)", re.M)
_DOTTED_RE = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<frm>[A-Za-z_][\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#;]+)"
    r"|import[ \t]+(?P<mods>[A-Za-z_][\w., \t]*))",
    re.M,
)
#: pip options that take a value (``-r file``, ``-i URL``): the value is not a requirement.
_PIP_VALUE_OPTIONS = frozenset(
    {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
     "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root",
     "--src", "--upgrade-strategy", "--platform", "--python-version", "--only-binary",
     "--no-binary", "--trusted-host", "--cache-dir", "--log", "--progress-bar"}
)  # fmt: skip
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
        #: Names at the repository's root (or under src/): what ``import X`` finds there.
        self.top_level: set[str] = set()
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
                self.top_level.add(p[0] if len(p) > 1 else module)
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
        if name in THIRD_PARTY:
            # A nested folder named like the library it wraps (autograd/scipy/) does not
            # shadow it: only a module at the root, or beside a script, would.
            return name in self.top_level or name in self.by_dir.get(parent, set())
        return name in self.global_names or name in self.by_dir.get(parent, set())


def _declared(name: str, dist: str, declared: set[str]) -> bool:
    candidates = {dist, canonicalize_name(name), *PROVIDERS.get(name, ())}
    if candidates & declared:
        return True
    prefixes = PROVIDER_PREFIXES.get(name, ())
    return any(d.startswith(prefixes) for d in declared) if prefixes else False


class _Code:
    """The Python the detector reads: ``.py`` files and the code cells of notebooks.

    Notebook code (magics and shell escapes blanked) is kept per path; its line numbers are
    mapped back to the notebook's JSON for evidence.
    """

    def __init__(self, ctx: DetectContext) -> None:
        self._ctx = ctx
        self._nb: dict[str, str] = {}
        self._nb_raw: dict[str, list[str]] = {}
        self._sites: dict[str, list[ImportSite] | None] = {}
        for path in ctx.index.with_suffix(".ipynb"):
            if skip_path(path):
                continue
            text = ctx.index.try_read_text(path)
            code = notebook_code(text) if text is not None else None
            if code is not None and text is not None:
                self._nb[path] = code
                self._nb_raw[path] = text.splitlines()

    def sites(self, path: str) -> list[ImportSite] | None:
        """The imports of ``path`` with their guards (:func:`import_sites`), parsed once per
        file; None when it does not parse. A file with no ``try`` has no guarded import
        and is not parsed (every import in it is reported unguarded)."""
        if path not in self._sites:
            text = self.text(path)
            if text is None:
                self._sites[path] = None
            elif _TRY_RE.search(text) is None:
                self._sites[path] = []
            else:
                self._sites[path] = import_sites(text)
        return self._sites[path]

    def notebooks(self) -> list[str]:
        return sorted(self._nb)

    def imports(self) -> list[tuple[str, frozenset[str]]]:
        """(path, top-level names) of every file to consider, sorted by path. setup.py's
        imports (setuptools, torch for CUDAExtension) are build requirements of the package,
        which the setup.py detector and the build backend deal with."""
        out = [
            (path, scan.imports)
            for path, scan in self._ctx.index.py_scan().items()
            if not skip_path(path) and path.rsplit("/", 1)[-1] != "setup.py"
        ]
        out += [(path, scan_imports(code.encode())) for path, code in self._nb.items()]
        return sorted(out)

    def text(self, path: str) -> str | None:
        if path in self._nb:
            return self._nb[path]
        return self._ctx.index.try_read_text(path)

    def code_line(self, path: str, line: int) -> int | None:
        """The line of the file itself for 1-based ``line`` of :meth:`text`."""
        if path not in self._nb:
            return line
        text = self._nb[path]
        offset = 0
        for _ in range(line - 1):
            offset = text.find("\n", offset) + 1
            if offset == 0:
                return None
        return self.line(path, offset)

    def line(self, path: str, offset: int) -> int | None:
        """The 1-based line of character ``offset`` of :meth:`text` in the file itself."""
        text = self.text(path) or ""
        if path not in self._nb:
            return text.count("\n", 0, offset) + 1
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        needle = text[start : end if end >= 0 else len(text)].strip()
        return json_line_of(self._nb_raw[path], needle) if needle else None


def _dotted_imports(text: str) -> list[tuple[str, tuple[str, ...], int]]:
    """(module, names, character offset) of every absolute import in ``text``."""
    out: list[tuple[str, tuple[str, ...], int]] = []
    for match in _DOTTED_RE.finditer(text):
        if match.group("frm"):
            names = tuple(
                w.strip().split(" ")[0]
                for w in match.group("names").strip("() \\").split(",")
                if w.strip()
            )
            out.append((match.group("frm"), names, match.start()))
        else:
            for word in match.group("mods").split(","):
                module = word.strip().split(" ")[0]
                if module:
                    out.append((module, (), match.start()))
    return out


def _pip_install_requirements(line: str) -> list[Requirement]:
    """The requirements a ``pip install ...`` line names (options, paths and URLs skipped)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return []
    if words[:1] == ["python"] or words[:1] == ["python3"]:
        words = words[2:] if words[1:2] == ["-m"] else words[1:]
    if words[:2] != ["pip", "install"] and words[:2] != ["pip3", "install"]:
        return []
    out: list[Requirement] = []
    skip_next = False
    for word in words[2:]:
        if skip_next:
            skip_next = False
            continue
        if word.startswith("-"):
            skip_next = word in _PIP_VALUE_OPTIONS
            continue
        if "/" in word or word.startswith(".") or ":" in word.split(";")[0]:
            continue  # a path, a local project or a URL: not a PyPI requirement
        try:
            out.append(Requirement(word))
        except InvalidRequirement:
            continue
    return out


def _optional(
    key: str, requirement: str, import_name: str, guards: list[Evidence]
) -> Finding[OptionalImportValue]:
    """The ``optional_import`` finding of ``requirement`` (see :mod:`.findings`)."""
    return Finding(
        kind="optional_import",
        key=key,
        value=OptionalImportValue(requirement, import_name),
        evidence=tuple(sorted(set(guards))),
        detector="imports",
        confidence="medium",
        note=OPTIONAL_NOTE,
    )


class ImportsDetector(Detector):
    """Flags third-party imports that no dependency file declares (see module docstring)."""

    name = "imports"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        code = _Code(ctx)
        found: dict[str, Finding] = {}
        #: Imports guarded everywhere (``try: import x except ImportError``): optional.
        optional: dict[str, Finding] = {}
        for finding in self._notebook_installs(ctx, code):
            found.setdefault(finding.key, finding)
        declared = {f.key for f in ctx.of(RequirementValue)} | set(found)
        own = _OwnModules(ctx)
        importers: dict[str, list[str]] = {}  # import name -> files importing it, sorted
        for path, names in code.imports():
            for name in names:
                if not (
                    name == "."
                    or name.startswith("_")
                    or name in _STDLIB
                    or own.provides(name, path)
                ):
                    importers.setdefault(name, []).append(path)
        for name, all_paths in sorted(importers.items()):
            simple = canonicalize_name(IMPORT_TO_DIST.get(name, name))
            if name != "google" and _declared(name, simple, declared):
                continue
            if name not in _KNOWN and name in own.anywhere:
                continue  # an unknown name that is some module of the repo: sys.path tricks
            # Tests, docs and benchmarks are not what the experiments run: an import seen only
            # there (a test importing torch) would pull a framework the experiments never use.
            # It is still reported, marked support_only: the merge keeps it only when an
            # experiment runs from that folder (a benchmarks/ folder of experiments).
            paths = [p for p in all_paths if not is_support_path(p, code.text)]
            support_only = not paths
            paths = paths or all_paths
            hit = self._confirm(code, paths, name)
            if hit is None:
                continue  # only in docstrings or strings: the scan's regex over-matched
            path, line = hit
            guards = self._all_guarded(code, paths, name)
            if name == "google":
                targets = self._google(code, path)
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
                    else self._evidence(code, path, import_name)
                )
                if guards is not None and not support_only:
                    optional.setdefault(key, _optional(key, requirement, import_name, guards))
                    continue
                found[key] = Finding(
                    kind="python_requirement",
                    key=canonicalize_name(requirement.split(" @ ")[0]),
                    value=RequirementValue(
                        requirement, False, importers=tuple(paths), support_only=support_only
                    ),
                    evidence=(evidence,),
                    detector=self.name,
                    confidence="low" if support_only else confidence,
                    note="imported only by tests, docs or benchmarks" if support_only else note,
                )
        for finding in self._submodules(code, importers, declared | set(found)):
            if finding.kind == "optional_import":
                optional.setdefault(finding.key, finding)
            else:
                found.setdefault(finding.key, finding)
        for finding in self._calls(code, importers, declared | set(found)):
            found.setdefault(finding.key, finding)
        kept = [optional[k] for k in sorted(optional) if k not in found]
        return [found[k] for k in sorted(found)] + kept

    @staticmethod
    def _all_guarded(code: _Code, paths: list[str], name: str) -> list[Evidence] | None:
        """The guarded imports of ``name`` when every import of it in ``paths`` is guarded
        (:mod:`~reprobridge.detect.derived._guards`), else None. Reading stops at the first file
        with an unguarded import (or that does not parse: then it counts as required)."""
        guards: list[Evidence] = []
        for path in paths:
            sites = code.sites(path)
            if not sites:
                return None  # unparsable, or no try at all: the imports are unguarded
            mine = [s for s in sites if s.top == name]
            if not mine or any(not s.guarded for s in mine):
                return None
            guards += [Evidence(path, code.code_line(path, s.line)) for s in mine]
        return guards or None

    def _submodules(
        self, code: _Code, importers: dict[str, list[str]], declared: set[str]
    ) -> list[Finding]:
        """Distributions that a submodule import needs beyond its package's
        (``torch.utils.tensorboard`` -> ``tensorboard``), from the data table's rules."""
        tops = {key.split(".", 1)[0] for key in SUBMODULE_DISTS}
        needles = {key.rsplit(".", 1)[1] for key in SUBMODULE_DISTS}
        out: dict[str, Finding] = {}
        paths = sorted(
            {p for top in tops for p in importers.get(top, ()) if not is_support_path(p, code.text)}
        )
        #: key -> (the dotted import, its guarded sites): optional unless also unguarded.
        guarded: dict[str, tuple[str, list[Evidence]]] = {}
        for path in paths:
            text = code.text(path)
            if text is None or not any(n in text for n in needles):
                continue
            safe = {s.line for s in code.sites(path) or () if s.guarded}
            for module, names, offset in _dotted_imports(text):
                for dotted in [module, *(f"{module}.{n}" for n in names)]:
                    for dist in submodule_dists(dotted):
                        key = canonicalize_name(dist)
                        if key in out or key in declared:
                            continue
                        where = Evidence(path, code.line(path, offset))
                        if text.count("\n", 0, offset) + 1 in safe:
                            guarded.setdefault(key, (dotted, []))[1].append(where)
                            continue
                        out[key] = Finding(
                            kind="python_requirement",
                            key=key,
                            value=RequirementValue(key, declared=False),
                            evidence=(where,),
                            detector=self.name,
                            confidence="medium",
                            note=f"{NOTE}; `{dotted}` needs it (package table rule)",
                        )
        for dist_key, (dotted, where_guarded) in guarded.items():
            if dist_key not in out:
                out[dist_key] = _optional(dist_key, dist_key, dotted, where_guarded)
        return [out[k] for k in sorted(out)]

    def _calls(
        self, code: _Code, importers: dict[str, list[str]], declared: set[str]
    ) -> list[Finding]:
        """Distributions a method call needs that the code never imports (gym's
        ``env.render()`` -> ``pygame``): ``.method(`` in a file that imports the package,
        from the data table's rules (test, docs and benchmark files left out)."""
        out: dict[str, Finding] = {}
        for rule, (dists, since) in sorted(CALL_DISTS.items()):
            top, _, method = rule.partition(":")
            call = re.compile(rf"\.{re.escape(method)}[ \t]*\(")
            hits: list[tuple[str, int]] = []
            for path in sorted(importers.get(top, ())):
                text = None if is_support_path(path, code.text) else code.text(path)
                match = call.search(text) if text else None
                if match is not None:
                    hits.append((path, match.start()))
            if not hits:
                continue
            for key in map(canonicalize_name, dists):
                if key in out or key in declared:
                    continue
                path, offset = hits[0]
                out[key] = Finding(
                    kind="python_requirement",
                    key=key,
                    value=RequirementValue(
                        key,
                        False,
                        importers=tuple(p for p, _ in hits),
                        called=f"{top}'s .{method}()",
                        since=since,
                    ),
                    evidence=(Evidence(path, code.line(path, offset)),),
                    detector=self.name,
                    confidence="medium",
                    note=f"not imported: `{top}`'s `.{method}()` needs it (package table rule)",
                )
        return [out[k] for k in sorted(out)]

    def _notebook_installs(self, ctx: DetectContext, code: _Code) -> list[Finding]:
        """Requirements a notebook installs itself (``!pip install x==1``, ``%pip install``)."""
        out: list[Finding] = []
        for path in code.notebooks():
            text = ctx.index.try_read_text(path) or ""
            raw_lines = text.splitlines()
            for line in notebook_shell_lines(text):
                for requirement in _pip_install_requirements(line):
                    out.append(
                        Finding(
                            kind="python_requirement",
                            key=canonicalize_name(requirement.name),
                            value=RequirementValue(str(requirement), declared=True),
                            evidence=(Evidence(path, json_line_of(raw_lines, line)),),
                            detector=self.name,
                            confidence="medium",
                            note="installed by the notebook itself (a pip install cell)",
                        )
                    )
        return out

    @staticmethod
    def _confirm(code: _Code, paths: list[str], name: str) -> tuple[str, int | None] | None:
        """The first (file, line) whose code really imports ``name``, reading few files.

        The index's scan is a line search, so ``import it`` inside a docstring counts too;
        the files of otherwise-undeclared names are re-read (never parsed) and an import
        line counts only outside triple-quoted strings (an even number of each triple quote
        before it: cheap, and right for docstrings and code templates alike).
        """
        pattern = _import_line_re(name)
        for path in paths[:_MAX_CONFIRM]:
            text = code.text(path)
            if text is None:
                continue
            for match in pattern.finditer(text):
                start = match.start()
                if text.count('"""', 0, start) % 2 or text.count("'''", 0, start) % 2:
                    continue
                return path, code.line(path, start)
        return None

    @staticmethod
    def _google(code: _Code, path: str) -> list[tuple[str, str]]:
        """Distributions behind ``import google.X`` (a namespace of many projects)."""
        text = code.text(path) or ""
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
    def _evidence(code: _Code, path: str, import_name: str) -> Evidence:
        text = code.text(path)
        parts = import_name.split(".")
        # "google.cloud.storage" may be written "from google.cloud import storage": try the
        # full dotted name first, then its parents.
        for end in range(len(parts), 0, -1):
            match = _import_line_re(".".join(parts[:end])).search(text or "")
            if text is not None and match:
                return Evidence(path, code.line(path, match.start()))
        return Evidence(path)
