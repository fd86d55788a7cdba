"""pip requirements files: ``requirements*.txt``, ``requirements/*.txt`` and what they include.

The line format is pip's: comments (``#`` at the start or after whitespace), ``\\``
continuations, options (``-r``/``--requirement`` includes, ``-c`` constraints, index URLs,
``-e``), per-requirement options (``--hash``) and PEP 508 requirement strings. Every
requirement is validated with :class:`packaging.requirements.Requirement`; a line that is not
one is a :class:`~reprobridge.errors.DetectionError` naming the file and the line, because a
declared dependency file that pip itself would reject cannot be reproduced from.

:class:`RequirementsParser` is shared with the detectors of files that embed requirement
lines or point at a requirements file (conda's ``pip:`` section, setup.py, pyproject).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from reprobridge.detect._text import continued_lines, skip_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import IndexRole, IndexValue, PythonVersionValue, RequirementValue
from reprobridge.errors import DetectionError, UnsafePathError

# pip's own comment rule (req_file.COMMENT_RE): ``#`` at line start or after whitespace, so
# ``git+https://...#egg=name`` keeps its fragment.
_COMMENT_RE = re.compile(r"(^|\s+)#.*$")
_EGG_RE = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_VCS_OR_URL_RE = re.compile(r"^(?:git|hg|svn|bzr)\+|^[a-z][a-z0-9+.-]*://", re.I)
_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".tgz", ".zip", ".tar.bz2")
_DEFAULT_INDEXES = ("https://pypi.org/simple", "https://pypi.python.org/simple")

#: Options whose value is the next token (or ``--opt=value`` / ``-rvalue``).
_VALUE_OPTIONS = {
    "-r": "requirement",
    "--requirement": "requirement",
    "-c": "constraint",
    "--constraint": "constraint",
    "-e": "editable",
    "--editable": "editable",
    "-i": "index",
    "--index-url": "index",
    "--extra-index-url": "extra",
    "-f": "find-links",
    "--find-links": "find-links",
    "--trusted-host": "ignore",
    "--only-binary": "ignore",
    "--no-binary": "ignore",
    "--use-feature": "ignore",
    "--global-option": "ignore",
    "--config-settings": "ignore",
}


def is_requirements_file(path: str) -> bool:
    """True for the files this detector reads on its own (not only through an include)."""
    parts = path.split("/")
    name = parts[-1]
    if not name.endswith(".txt") or skip_path(path):
        return False
    return "requirements" in name.lower() or (len(parts) > 1 and parts[-2] == "requirements")


def is_default_index(url: str) -> bool:
    """True for PyPI itself, which needs no ``python_index`` finding."""
    return url.rstrip("/").lower() in _DEFAULT_INDEXES


def requirement_finding(
    req: Requirement,
    evidence: Evidence,
    detector: str,
    *,
    confidence: Confidence = "high",
    note: str = "",
    declared: bool = True,
    optional: bool = False,
    importers: tuple[str, ...] | None = None,
) -> Finding:
    """The ``python_requirement`` finding of one validated requirement."""
    return Finding(
        kind="python_requirement",
        key=canonicalize_name(req.name),
        value=RequirementValue(str(req), declared, importers=importers, optional=optional),
        evidence=(evidence,),
        detector=detector,
        confidence=confidence,
        note=note,
    )


def python_spec_finding(spec: str, evidence: Evidence, detector: str, note: str) -> Finding:
    """A ``python_version`` finding from a PEP 440 specifier such as ``>=3.8``.

    Raises ValueError (InvalidSpecifier) when ``spec`` is not a valid specifier set.
    """
    spec = str(SpecifierSet(spec))
    return Finding(
        kind="python_version",
        key="python",
        value=PythonVersionValue(specifier=spec),
        evidence=(evidence,),
        detector=detector,
        note=note,
    )


def index_finding(
    url: str, role: IndexRole, evidence: Evidence, detector: str, note: str = ""
) -> Finding:
    """A ``python_index`` finding (``role`` is "index" or "extra")."""
    return Finding(
        kind="python_index",
        key=url,
        value=IndexValue(url, role),
        evidence=(evidence,),
        detector=detector,
        note=note,
    )


def parse_requirement(text: str, *, path: str, line: int) -> Requirement:
    """Validate one PEP 508 string; DetectionError (path, ``line N``) when it is not one."""
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "invalid"
        raise DetectionError(
            f"not a valid requirement {text!r}: {reason}", path=path, field=f"line {line}"
        ) from exc


class RequirementOptions(TypedDict, total=False):
    """What :func:`declared_requirement` passes on to :func:`requirement_finding` (which
    gives each its default)."""

    confidence: Confidence
    note: str
    optional: bool
    importers: tuple[str, ...] | None


def declared_requirement(
    text: str, path: str, line: int, detector: str, **options: Unpack[RequirementOptions]
) -> Finding:
    """The ``python_requirement`` finding (:func:`requirement_finding`, with ``options``) of
    a PEP 508 string declared at ``path`` line ``line``; DetectionError (path, ``line N``)
    when it is not one."""
    req = parse_requirement(text, path=path, line=line)
    return requirement_finding(req, Evidence(path, line), detector, **options)


def declared_python(
    spec: str, path: str, line: int, detector: str, note: str, *, key: str
) -> Finding:
    """The ``python_version`` finding of a specifier declared as ``key`` at ``path`` line
    ``line``; DetectionError (path, ``line N``, naming ``key``) when it is not a PEP 440
    specifier set."""
    try:
        return python_spec_finding(spec, Evidence(path, line), detector, note)
    except InvalidSpecifier as exc:
        raise DetectionError(
            f"{key} {spec!r} is not a Python version specifier", path=path, field=f"line {line}"
        ) from exc


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, joined line) after continuations and comments."""

    def lines() -> Iterator[tuple[int, str]]:
        for number, raw in enumerate(text.splitlines(), start=1):
            stripped = _COMMENT_RE.sub("", raw)
            # A comment ends the logical line even when it ends with a backslash (pip does
            # so): the blank keeps the backslash from continuing it.
            yield number, stripped if stripped == raw else stripped + " "

    joined = (
        (start, " ".join(" ".join(parts).split())) for start, parts in continued_lines(lines())
    )
    return [(start, line) for start, line in joined if line]


def _split_option(tokens: list[str]) -> tuple[str, str | None, list[str]]:
    """(option name, value or None, remaining tokens) of a line starting with ``-``."""
    head = tokens[0]
    if head.startswith("--") and "=" in head:
        name, _, value = head.partition("=")
        return name, value, tokens[1:]
    if head in _VALUE_OPTIONS:
        return head, (tokens[1] if len(tokens) > 1 else None), tokens[2:]
    if not head.startswith("--") and len(head) > 2 and head[:2] in _VALUE_OPTIONS:
        return head[:2], head[2:], tokens[1:]  # -rfile, -ehttps://...
    return head, None, tokens[1:]


def _url_name(url: str) -> str | None:
    """The distribution name of a VCS/archive URL: ``#egg=`` or the last path part."""
    egg = _EGG_RE.search(url)
    if egg:
        return egg.group(1)
    tail = url.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    tail = tail.split("@", 1)[0]
    for suffix in (".git", *_ARCHIVE_SUFFIXES):
        tail = tail.removesuffix(suffix)
    if tail.endswith(".whl") or not tail:
        return None
    # An archive is name-version; a repository is the name.
    name = re.split(r"-(?=\d)", tail, maxsplit=1)[0]
    return name if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) else None


def _drop_egg(url: str) -> str:
    """``url`` without its ``egg=`` fragment parameter (PEP 508 names the package instead)."""
    base, sep, fragment = url.partition("#")
    if not sep:
        return url
    kept = [p for p in fragment.split("&") if p and not p.startswith("egg=")]
    return base + ("#" + "&".join(kept) if kept else "")


def _looks_local(text: str) -> bool:
    if text.startswith((".", "/", "~", "file:")):
        return True
    first = text.split(";", 1)[0].strip()
    # "pkg/sub" or "wheels/x.whl": a path, not a PEP 508 name (which never contains "/").
    return "@" not in first and ("/" in first or first.endswith(_ARCHIVE_SUFFIXES))


@dataclass
class RequirementsParser:
    """Parse requirement files and lines into findings for one detector.

    Includes are followed relative to the including file, once each (cycle-safe), and only
    to files inside the repository; an include that leaves the repository, is a URL or is
    missing is warned about and skipped. Constraint files (``-c``) are parsed but add no
    requirement: a requirement they pin gets a note. ``visited`` may be shared so a file is
    reported once even when several roots include it.
    """

    ctx: DetectContext
    detector: str
    confidence: Confidence = "high"
    note: str = ""
    #: The files being parsed are optional sets (see :class:`RequirementValue`).
    optional: bool = False
    findings: list[Finding] = field(default_factory=list)
    visited: set[str] = field(default_factory=set)
    constraints: dict[str, tuple[str, Evidence]] = field(default_factory=dict)

    def parse_file(self, path: str, *, constraint: bool = False) -> None:
        """Parse ``path`` (and its includes) unless already visited.

        Raises DetectionError / UnsafePathError (from the index) for a file that is binary,
        too large or a symlink out of the repository, and DetectionError for a bad line.
        """
        if path in self.visited:
            return
        self.visited.add(path)
        text = self.ctx.index.read_text(path)
        self.parse_lines(path, logical_lines(text), constraint=constraint)

    def parse_file_or_warn(self, path: str) -> None:
        """:meth:`parse_file`, but a broken file is warned about and contributes nothing."""
        saved = (len(self.findings), set(self.visited), dict(self.constraints))
        try:
            self.parse_file(path)
        except (DetectionError, UnsafePathError) as exc:
            del self.findings[saved[0] :]
            self.visited, self.constraints = saved[1], saved[2]
            self.visited.add(path)
            self.ctx.warn(f"skipped: {exc}", path)

    def parse_lines(
        self, path: str, lines: Iterable[tuple[int, str]], *, constraint: bool = False
    ) -> None:
        """Parse logical requirement lines found in ``path`` (evidence is ``path:line``)."""
        for number, line in lines:
            self._line(path, number, line, constraint)

    def _include(self, path: str, number: int, target: str, *, constraint: bool) -> None:
        kind = "constraints" if constraint else "requirements"
        if _VCS_OR_URL_RE.match(target):
            self.ctx.warn(f"line {number}: {kind} from a URL ({target}) are not read", path)
            return
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            self.ctx.warn(f"line {number}: {kind} file {target} is outside the repository", path)
            return
        if resolved not in self.ctx.index:
            self.ctx.warn(f"line {number}: {kind} file {target} is not in the repository", path)
            return
        self.parse_file(resolved, constraint=constraint)

    def _line(self, path: str, number: int, line: str, constraint: bool) -> None:
        evidence = Evidence(path, number)
        tokens = line.split()
        if tokens[0].startswith("-"):
            name, value, _rest = _split_option(tokens)
            role = _VALUE_OPTIONS.get(name)
            if role in ("requirement", "constraint"):
                if value is None:
                    raise DetectionError(f"{name} needs a file", path=path, field=f"line {number}")
                self._include(path, number, value, constraint=constraint or role == "constraint")
            elif role in ("index", "extra", "find-links") and value and not constraint:
                if role == "find-links" and not _VCS_OR_URL_RE.match(value):
                    self.ctx.warn(f"line {number}: local find-links {value} skipped", path)
                elif not is_default_index(value):
                    note = "pip --find-links page" if role == "find-links" else ""
                    self.findings.append(
                        index_finding(
                            value,
                            "index" if role == "index" else "extra",
                            evidence,
                            self.detector,
                            note,
                        )
                    )
            elif role == "editable" and value:
                self._requirement(path, number, value, constraint, editable=True)
            # Other options (--pre, --no-index, --trusted-host, ...) do not change what is
            # installed for reproduction purposes.
            return
        # pip splits per-requirement options (--hash, --global-option) off at the first
        # token that starts with "-" (req_file.break_args_options).
        args: list[str] = []
        for tok in tokens:
            if tok.startswith("-"):
                break
            args.append(tok)
        self._requirement(path, number, " ".join(args), constraint, editable=False)

    def _requirement(
        self, path: str, number: int, text: str, constraint: bool, *, editable: bool
    ) -> None:
        evidence = Evidence(path, number)
        if text.startswith("file:"):
            return  # a local path written as a URL: installed from the tree
        if _VCS_OR_URL_RE.match(text):
            url = text.split(";", 1)[0].strip()
            marker = text.split(";", 1)[1].strip() if ";" in text else ""
            name = _url_name(url)
            if name is None:
                self.ctx.warn(f"line {number}: no package name in {url}; skipped", path)
                return
            text = f"{name} @ {_drop_egg(url)}" + (f" ; {marker}" if marker else "")
        elif editable or _looks_local(text):
            # The repository itself (-e .) or a vendored path: installed from the tree, not
            # a dependency to pin.
            return
        req = parse_requirement(text, path=path, line=number)
        key = canonicalize_name(req.name)
        if constraint:
            self.constraints.setdefault(key, (str(req), evidence))
            return
        if key == "python":
            # Some repositories list "python>=3.8" among their requirements; pip would
            # reject it at install time, but the intent is a Python version.
            if not req.specifier:
                return
            self.findings.append(
                python_spec_finding(
                    str(req.specifier), evidence, self.detector, "listed as a requirement"
                )
            )
            return
        self.findings.append(
            requirement_finding(
                req,
                evidence,
                self.detector,
                confidence=self.confidence,
                note=self.note,
                optional=self.optional,
            )
        )

    def result(self) -> list[Finding]:
        """The findings, with constrained requirements annotated (constraints never added)."""
        out: list[Finding] = []
        for f in self.findings:
            pin = self.constraints.get(f.key) if f.kind == "python_requirement" else None
            if pin is None:
                out.append(f)
                continue
            note = f"constrained to {pin[0]} by {pin[1]}"
            out.append(
                Finding(
                    f.kind,
                    f.key,
                    f.value,
                    f.evidence,
                    f.detector,
                    f.confidence,
                    "; ".join(n for n in (f.note, note) if n),
                )
            )
        return out


class RequirementsDetector(Detector):
    """Every ``*requirements*.txt`` and ``requirements/*.txt``, with the files they include.

    Findings: ``python_requirement`` (declared), ``python_index`` for ``--index-url`` (role
    "index"), ``--extra-index-url`` and URL ``--find-links`` (role "extra"), and
    ``python_version`` when a file lists ``python`` itself. A file reached through an
    include is reported once, with its own ``file:line``.

    Files at the root (or in a root ``requirements/`` directory) are the declared sources:
    high confidence (medium for dev/test/docs files), and a broken one raises. Files in
    other subdirectories (examples, vendored projects) give medium-confidence findings and
    are skipped with a warning when broken, so that a stale example cannot stop recovery.
    """

    name = "requirements"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        parser = RequirementsParser(ctx, self.name)
        scope = env_scope(ctx.index)
        roots = [
            e.path for e in ctx.index if is_requirements_file(e.path) and not scope.ignores(e.path)
        ]
        base = f"{scope.config_dir}/" if scope.config_dir else ""
        top = [
            p
            for p in roots
            if scope.declared(p)
            or (p.startswith(base + "requirements/") and p.count("/") == base.count("/") + 1)
        ]
        variants = optional_variants(roots)
        # Main files first, so that a dev, variant or nested file they include keeps "high".
        phases: list[tuple[list[str], Confidence, str, bool]] = [
            ([p for p in top if not is_auxiliary(p) and p not in variants], "high", "", False),
            (
                [p for p in top if is_auxiliary(p)],
                "medium",
                "from a development/test/docs requirements file",
                True,
            ),
            (
                [p for p in top if p in variants and not is_auxiliary(p)],
                "medium",
                "from an optional requirements file beside the base one",
                True,
            ),
            (
                [p for p in roots if p not in top],
                "medium",
                "from a requirements file in a subdirectory",
                False,
            ),
        ]
        for paths, confidence, note, optional in phases:
            parser.confidence, parser.note, parser.optional = confidence, note, optional
            for path in paths:
                if path in top:
                    parser.parse_file(path)
                else:
                    parser.parse_file_or_warn(path)
        return parser.result()


_AUX_RE = re.compile(
    r"(?:^|[-_./])(?:dev|develop|test|tests|testing|docs?|lint|style|ci)(?:[-_.]|$)"
)


#: Names of the base file of a folder of requirement files (``requirements/base.txt``).
_BASE_NAMES = frozenset(
    {"requirements.txt", "base.txt", "main.txt", "common.txt", "core.txt", "prod.txt",
     "production.txt", "run.txt", "runtime.txt", "install.txt", "default.txt"}
)  # fmt: skip


def optional_variants(paths: list[str]) -> set[str]:
    """The optional variants among requirement files: those in a folder that also holds a
    base file (``requirements.txt``, ``requirements/base.txt``), other than the base
    (``requirements-atari.txt``, ``requirements/gpu.txt``). A variant the base includes
    (``-r``) is read with the base, as part of it."""
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        by_folder.setdefault(path.rpartition("/")[0], []).append(path)
    out: set[str] = set()
    for files in by_folder.values():
        bases = {p for p in files if p.rpartition("/")[2].lower() in _BASE_NAMES}
        if bases:
            out |= set(files) - bases
    return out


def is_auxiliary(path: str) -> bool:
    """True for requirement files of development tools rather than of the code's run (also
    an extra's name: ``dev``, ``docs``, ``test``)."""
    return bool(_AUX_RE.search(path.lower().rsplit("/", 1)[-1].removesuffix(".txt")))


def optional_run_sets(paths: Iterable[str]) -> set[str]:
    """The requirement files among ``paths`` that are optional sets for running code
    (``requirements/requirements-atari.txt``): variants beside a base file
    (:func:`optional_variants`) that are not development tools' (:func:`is_auxiliary`)."""
    files = [p for p in paths if is_requirements_file(p)]
    return {p for p in optional_variants(files) if not is_auxiliary(p)}


def read_deferred(
    ctx: DetectContext, detector: str, source: Evidence, target: str, what: str
) -> list[Finding]:
    """Findings of a requirements file that ``source`` (setup.py, pyproject) reads at build time.

    ``target`` is relative to the directory of ``source.path``. A file the requirements
    detector reads anyway gives nothing here (no duplicates); a missing file or one outside
    the repository is warned about.
    """
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source.path), target))
    if resolved.startswith("../") or target.startswith("/") or resolved not in ctx.index:
        ctx.warn(f"{what} reads {target}, which is not in the repository", source.path)
        return []
    if is_requirements_file(resolved):
        return []
    parser = RequirementsParser(ctx, detector, note=f"{what} of {source} reads this file")
    parser.parse_file(resolved)
    return parser.result()


class DeclaredFile:
    """The findings of one file that declares a project (``pyproject.toml``, ``setup.cfg``,
    ``setup.py``), in the order they are added: each requirement, Python bound, index and
    requirements file it defers to carries the file's ``path``, the ``detector``'s name and,
    for requirements, the file's ``confidence`` (see
    :class:`~reprobridge.detect.base.DeclaredFileDetector`). Each method raises what the
    function it calls raises (DetectionError naming the path and the line)."""

    def __init__(
        self, ctx: DetectContext, detector: str, path: str, confidence: Confidence = "high"
    ) -> None:
        self.ctx = ctx
        self.detector = detector
        self.path = path
        self.confidence: Confidence = confidence
        self.findings: list[Finding] = []

    def requirement(self, text: str, line: int, note: str = "") -> None:
        """The PEP 508 string ``text`` at ``line`` (:func:`declared_requirement`)."""
        self.findings.append(
            declared_requirement(
                text, self.path, line, self.detector, confidence=self.confidence, note=note
            )
        )

    def python(self, spec: str, line: int, note: str, key: str) -> None:
        """The Python specifier ``spec`` declared as ``key`` at ``line``
        (:func:`declared_python`)."""
        self.findings.append(declared_python(spec, self.path, line, self.detector, note, key=key))

    def index(self, url: object, role: IndexRole, line: int) -> None:
        """The package index ``url`` at ``line``; nothing when it is not a non-empty string
        or is PyPI itself (:func:`is_default_index`)."""
        if isinstance(url, str) and url and not is_default_index(url):
            self.findings.append(index_finding(url, role, Evidence(self.path, line), self.detector))

    def deferred(self, line: int, target: str, what: str) -> None:
        """The requirements file ``target`` that ``what`` at ``line`` reads at build time
        (:func:`read_deferred`: relative to this file's folder)."""
        source = Evidence(self.path, line)
        self.findings += read_deferred(self.ctx, self.detector, source, target, what)
