"""Whether an experiment reads data the repository does not contain (fetched at run time).

The audit runs offline, so an experiment whose data comes from a download (a library
dataset with ``download=True``, ``load_dataset``, ``fetch_covtype``, a URL the code
fetches), from a path the repository lacks (COCO under ``data/``), or from a file that no
step before it writes (``torch.load("traindata.pt")``) cannot run as cloned; the merge
ranks it below one that needs nothing and the guide says why.

Per earlier ``experiment`` finding, the entry and the repository modules it imports
(transitively, :func:`~reprobridge.detect._select.import_closure`, at most
:data:`MAX_FILES`) are the experiment's code. What in that code *runs* is the entry itself,
the module level of what it imports, and the functions something in that code calls by
name: ``load_covtype_dataset()`` in one notebook makes that helper's ``fetch_covtype`` a
download of that notebook and not of its neighbour that only imports the package.

* A ``dataset`` finding with evidence in code that runs counts unless it is generated
  (``make_moons``, random arrays), bundled with its library (scikit-learn's
  ``load_iris``), or a path present in the repository relative to a folder a command of
  the entry runs from (a relative path is read from there; the root's own code folders
  are not data).
* A download call in code that runs (the rules are data: ``reprobridge/data/io_calls.toml``,
  read by :mod:`~reprobridge.detect.procedure._io_calls`) counts where no dataset finding names one.
* A file the entry reads by a literal relative path (``np.load``, ``torch.load``, ``open``
  in a reading mode...) counts when it is in none of the entry's folder, the root or the
  command's workdir, and the entry does not write it itself. When a script beside the entry
  writes exactly that path, the read is an ``input`` finding instead (key: the entry, value
  ``entry``, ``path``, ``producer``; evidence the read and the write): the merge runs the
  producer first when a README or shell script orders the two, and otherwise reports it
  the way it reports a download.

One ``fetch`` finding per entry that needs any of these, keyed on the entry, medium
confidence, ``value.datasets`` what is fetched (dataset ids with what they are, the
download call, or the missing file), evidence the first one's line in that code.
"""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass
from pathlib import PurePosixPath

from reprobridge.detect._notebook import json_line_of
from reprobridge.detect._select import import_closure
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import DatasetValue, ExperimentValue, FetchValue, InputValue
from reprobridge.detect.procedure._io_calls import (
    IoCall,
    Spans,
    called_names,
    function_in,
    function_spans,
    io_calls,
)

#: Files read per experiment at most (the entry and what it imports).
MAX_FILES = 60
#: Sibling scripts parsed per missing file at most, looking for the one that writes it.
MAX_PRODUCERS = 40


class FetchDetector(Detector):
    """``fetch`` findings for experiments whose data is not in the repository, and
    ``input`` findings for files a script beside the experiment writes."""

    name = "fetch"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        datasets = ctx.of(DatasetValue)
        # Every file and folder, once: a relative path is present when it is one of them.
        present = {f.path for f in ctx.index} | ctx.index.dirs()
        by_folder: dict[str, list[str]] = {}
        for p in sorted(ctx.index.py_scan()):
            by_folder.setdefault(str(PurePosixPath(p).parent), []).append(p)
        workdirs: dict[str, set[str]] = {}
        for f in ctx.of(ExperimentValue):
            entry = f.value.entry
            if entry.endswith((".py", ".ipynb")):
                workdirs.setdefault(entry, set()).add(f.value.workdir)
        facts = _Facts(ctx)
        findings: list[Finding] = []
        for entry in sorted(workdirs):
            closure = dict(import_closure(ctx, entry, None, MAX_FILES))
            called: set[str] = set()
            for p, code in closure.items():
                called |= facts.of(p, code).called

            def runs(path: str, line: int) -> bool:
                return facts.runs(path, closure[path], line, entry, called)  # noqa: B023

            own = {str(p) for p in PurePosixPath(entry).parents}
            hits: list[tuple[str, Evidence]] = []
            for d in datasets:
                ev = next(
                    (e for e in d.evidence if e.path in closure and runs(e.path, e.line or 0)),
                    None,
                )
                if ev is None or not _fetched(d, present, own, workdirs[entry]):
                    continue
                what = d.value.name or d.value.url or d.value.path
                hits.append((f"{d.key} ({what})", ev))
            calls = {p: facts.of(p, code).calls for p, code in closure.items()}
            if not hits:
                hits = [
                    (f"a download: {c.call} ({c.what})", _evidence(ctx, p, closure[p], c.line))
                    for p, cs in calls.items()
                    for c in cs
                    if c.kind == "download" and runs(p, c.line)
                ][:3]
            inputs = _missing_reads(entry, calls.get(entry, []), present, workdirs[entry])
            for path, read in inputs:
                read_ev = _evidence(ctx, entry, closure[entry], read.line)
                producer = _producer(ctx, entry, path, by_folder, facts)
                if producer is None:
                    hits.append((f"{path} (read by {read.call}, not in the repository)", read_ev))
                    continue
                findings.append(
                    Finding(
                        kind="input",
                        key=entry,
                        value=InputValue(entry, path, producer[0]),
                        evidence=(read_ev, producer[1]),
                        detector=self.name,
                        confidence="medium",
                        note=f"{path} is written by {producer[0]}",
                    )
                )
            if hits:
                findings.append(
                    Finding(
                        kind="fetch",
                        key=entry,
                        value=FetchValue(entry, tuple(h[0] for h in hits)),
                        evidence=(hits[0][1],),
                        detector=self.name,
                        confidence="medium",
                        note="its data is not in the repository: the offline audit lacks it",
                    )
                )
        return findings


@dataclass(frozen=True)
class _FileFacts:
    """What the detector needs of one file, whichever entry's closure holds it: whether it
    parses, the names its calls call, its I/O calls, and where its functions are."""

    parsed: bool
    called: frozenset[str]
    calls: list[IoCall]
    spans: Spans


class _Facts:
    """:class:`_FileFacts` per file, computed once per detector run (entries share their
    modules: one parse and one walk of each instead of one per entry)."""

    def __init__(self, ctx: DetectContext) -> None:
        self.ctx = ctx
        self.files: dict[str, _FileFacts] = {}

    def of(self, path: str, code: str) -> _FileFacts:
        """``path``'s facts (``code``: its text, a notebook's code cells; unused for a
        ``.py`` file, which the index parses)."""
        facts = self.files.get(path)
        if facts is None:
            tree = _parse(self.ctx, path, code)
            if tree is None:
                facts = _FileFacts(False, frozenset(), [], ())
            else:
                facts = _FileFacts(
                    True, frozenset(called_names(tree)), io_calls(tree), function_spans(tree)
                )
            self.files[path] = facts
        return facts

    def runs(self, path: str, code: str, line: int, entry: str, called: set[str]) -> bool:
        """Whether the code at ``path:line`` runs when ``entry`` does: anything in the
        entry; elsewhere, module-level code and the functions some code of the closure
        calls by name (``called``), never a module's ``__main__`` block."""
        facts = self.of(path, code)
        if not facts.parsed or path == entry:
            return True
        function = function_in(facts.spans, line)
        return function is None or function in called


def _parse(ctx: DetectContext, path: str, code: str) -> ast.Module | None:
    if path.endswith(".py"):
        return ctx.index.parse_python(path)
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _lexical(path: str) -> str:
    """``path`` normalised lexically (:func:`posixpath.normpath`), a leading ``..`` kept:
    unlike :func:`~reprobridge.detect._text.normalize_path`, which stops at the root, a
    read above the entry's folder must stay visibly outside the repository."""
    return posixpath.normpath(path.strip())


def _missing_reads(
    entry: str, calls: list[IoCall], present: set[str], workdirs: set[str]
) -> list[tuple[str, IoCall]]:
    """(path, first read) of each relative file ``entry`` reads that is in none of its
    folder, the root and its commands' workdirs, and that it does not write itself."""
    written = {_lexical(c.path) for c in calls if c.kind == "write"}
    folder = str(PurePosixPath(entry).parent)
    out: dict[str, IoCall] = {}
    for c in calls:
        if c.kind != "read" or c.path.startswith(("/", "~", "$")) or "{" in c.path:
            continue
        path = _lexical(c.path)
        if path.startswith("..") or path in written or path in out:
            continue
        bases = {folder, ".", *workdirs}
        if any(_lexical(posixpath.join(b, path)) in present for b in bases):
            continue
        out[path] = c
    return list(out.items())


def _producer(
    ctx: DetectContext, entry: str, path: str, by_folder: dict[str, list[str]], facts: _Facts
) -> tuple[str, Evidence] | None:
    """The script beside ``entry`` that writes ``path`` (the same literal), and where;
    ``by_folder``: the scannable Python files of each folder, sorted."""
    folder = str(PurePosixPath(entry).parent)
    needle = PurePosixPath(path).name.encode()
    siblings = [p for p in by_folder.get(folder, []) if p != entry]
    for sib, data in ctx.index.py_bytes(siblings[:MAX_PRODUCERS]):
        if needle not in data:
            continue
        for c in facts.of(sib, "").calls:
            if c.kind == "write" and _lexical(c.path) == path:
                return sib, Evidence(sib, c.line)
    return None


def _fetched(
    d: Finding[DatasetValue], present: set[str], own: set[str], workdirs: set[str]
) -> bool:
    """Whether dataset ``d`` is obtained at run time rather than read from the repository.

    A relative path is read from where the command runs: it is present when it is under
    one of the entry's commands' ``workdirs`` (the root's own code folders aside: they are
    not data). Not under the entry's folder when no command runs there: MorvanZhou's
    ``tutorial-contents/401_CNN.py`` run from the root reads the root's ``./mnist/``, which
    is missing, whatever ``tutorial-contents/mnist`` holds."""
    if d.value.generated or "bundled" in d.note:
        return False
    path = d.value.path or ""
    if path:
        for workdir in sorted(workdirs):
            here = posixpath.normpath(posixpath.join(workdir, path))
            if here in present and (workdir != "." or here not in own):
                return False
    return bool(d.value.name or d.value.url or path)


def _evidence(ctx: DetectContext, path: str, code: str, line: int) -> Evidence:
    """The evidence of ``line`` of ``code`` (a notebook's: the line of its JSON)."""
    if not path.endswith(".ipynb"):
        return Evidence(path, line)
    lines = code.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    raw = (ctx.index.try_read_text(path) or "").splitlines()
    return Evidence(path, json_line_of(raw, text) if text else None)
