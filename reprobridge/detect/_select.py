"""Which Python files the procedure detectors (params, datasets, outputs) parse.

Parameters, seeds, outputs and metrics belong to the experiments, so the files that matter
are, in order of relevance:

1. the entries of earlier ``experiment`` findings (README, shell, Makefile, entry points);
2. every other file with a ``__main__`` guard (or a package's ``__main__.py``);
3. the repository modules those files import, one level deep (metrics are often printed
   by a ``train()`` in another module), resolved from the import lines the way Python
   would find them: relative to the file, from the root, from ``src/`` and from the
   script's own directory;
4. files a detector always wants (``extra``: config modules for params, say).

A repository without any entry point (a library, a fixture of one file) falls back to
every Python file. A detector then keeps the files whose bytes match its cheap pattern
(a write call, a CLI declaration...), in that order, and parses at most
:data:`MAX_PARSED` of them: when the cap cuts, it says so with ``ctx.warn``. Tests,
vendored and build directories are never selected.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import PurePosixPath

from reprobridge.detect._notebook import notebook_code
from reprobridge.detect._text import is_test_path, skip_path
from reprobridge.detect.base import DetectContext
from reprobridge.detect.index import RepoIndex, import_statements

#: Files one procedure detector parses at most.
MAX_PARSED = 200

_MEMO = "procedure_files"


def _usable(path: str, index: RepoIndex) -> bool:
    return (
        path.endswith(".py") and not skip_path(path) and not is_test_path(path, index.try_read_text)
    )


def resolve_import(
    index_paths: AbstractSet[str], importer: str, module: str, names: tuple[str, ...]
) -> set[str]:
    """Repository files an import of ``module`` (``from module import names``) loads."""
    level = len(module) - len(module.lstrip("."))
    dotted = module[level:]
    parts = [p for p in dotted.split(".") if p]
    parent = PurePosixPath(importer).parent
    bases: list[PurePosixPath] = []
    if level:
        base = parent
        for _ in range(level - 1):
            base = base.parent
        bases.append(base)
    else:
        bases += [PurePosixPath("."), PurePosixPath("src"), parent]
    found: set[str] = set()
    for base in bases:
        stem = base.joinpath(*parts) if parts else base
        for cand in (f"{stem}.py", f"{stem}/__init__.py", *(f"{stem}/{n}.py" for n in names)):
            norm = cand[2:] if cand.startswith("./") else cand
            if norm in index_paths:
                found.add(norm)
    return found


#: ``index.memo`` key: (which repository paths imports resolve against) -> the
#: :class:`_ImportGraph` over them.
_GRAPHS = "_select.import_graphs"
#: The key of the graph over the scannable Python files (``index.py_scan()``).
_SCANNED = "scanned"


class _ImportGraph:
    """The repository files each file's imports load, and each entry's closure, against
    one set of paths: computed once per file and once per (entry, limit), for every
    detector and every entry that shares the file."""

    def __init__(self, paths: AbstractSet[str]) -> None:
        self.paths = paths
        self.edges: dict[str, list[str]] = {}
        self.closures: dict[tuple[str, int], list[str]] = {}

    def targets(self, path: str, code: str) -> list[str]:
        """The files ``path``'s imports load (``code`` its text), in statement order."""
        found = self.edges.get(path)
        if found is None:
            found = self.edges[path] = [
                hit
                for frm, names in import_statements(code.encode("utf-8", "surrogateescape"))
                for module, imported in (
                    [(n, ()) for n in names] if frm is None else [(frm, tuple(names))]
                )
                for hit in sorted(resolve_import(self.paths, path, module, imported))
            ]
        return found


def _graph(ctx: DetectContext, py_paths: AbstractSet[str] | None) -> _ImportGraph:
    memo = ctx.index.memo.setdefault(_GRAPHS, {})
    assert isinstance(memo, dict)
    # The scanned files' graph is keyed by name: building a key from the file set on each
    # call made every closure cost as much as the repository has files.
    key: object = _SCANNED if py_paths is None else frozenset(py_paths)
    graph = memo.get(key)
    if graph is None:
        paths = ctx.index.py_scan().keys() if py_paths is None else key
        assert isinstance(paths, AbstractSet)
        graph = memo[key] = _ImportGraph(paths)
    assert isinstance(graph, _ImportGraph)
    return graph


def _code(ctx: DetectContext, path: str) -> str | None:
    code = ctx.index.try_read_text(path)
    if code is not None and path.endswith(".ipynb"):
        code = notebook_code(code)
    return code


def import_closure(
    ctx: DetectContext, entry: str, py_paths: AbstractSet[str] | None = None, limit: int = 60
) -> Iterator[tuple[str, str]]:
    """(path, code) of ``entry`` (a script, or a notebook's code cells) and then of the
    repository modules it imports, transitively, breadth first, at most ``limit`` files;
    a file that cannot be read is skipped. Imports resolve against ``py_paths`` (default:
    the scannable Python files, ``index.py_scan()``). A caller may stop early (it is a
    generator).

    Each file's imports are resolved once per index and set of paths, and each entry's
    closure is walked once per limit (several detectors, and many entries sharing
    modules, walk the same files); only the texts are read again (the index's cache)."""
    graph = _graph(ctx, py_paths)
    walked = graph.closures.get((entry, limit))
    if walked is None:
        walked = []
        queue, seen = [entry], {entry}
        while queue and len(seen) <= limit:
            path = queue.pop(0)
            code = _code(ctx, path)
            if code is None:
                continue
            walked.append(path)
            for found in graph.targets(path, code):
                if found not in seen:
                    seen.add(found)
                    queue.append(found)
        graph.closures[(entry, limit)] = walked
    for path in walked:
        code = _code(ctx, path)
        if code is not None:
            yield path, code


def ranked_files(ctx: DetectContext) -> tuple[list[str], bool]:
    """(usable Python files in order of relevance, whether entry points were found).

    Without any entry point the list is every usable Python file, sorted.
    """
    index = ctx.index
    experiments = ctx.experiment_entries(".py")
    memo_key = tuple(experiments)
    cached = index.memo.get(_MEMO)
    if isinstance(cached, tuple) and cached[0] == memo_key:
        return list(cached[1]), bool(cached[2])
    scan = index.py_scan()
    # An experiment's own file is read whatever its name: the README ran it.
    entries = [p for p in experiments if p in scan and not skip_path(p)]
    mains = sorted(
        p
        for p, info in scan.items()
        if ("__main__" in info.markers or p.endswith("/__main__.py") or p == "__main__.py")
        and _usable(p, index)
    )
    first = list(dict.fromkeys([*entries, *mains]))
    if not first:
        ranked = sorted(p for p in scan if _usable(p, index))
        has_entries = False
    else:
        py_paths = set(scan)
        imported: set[str] = set()
        for path in first:
            for module, names in index.imported_modules(path):
                imported |= resolve_import(py_paths, path, module, names)
        seen = set(first)
        ranked = first + sorted(p for p in imported if p not in seen and _usable(p, index))
        has_entries = True
    index.memo[_MEMO] = (memo_key, tuple(ranked), has_entries)
    return ranked, has_entries


def procedure_files(
    ctx: DetectContext,
    pattern: re.Pattern[bytes],
    detector: str,
    *,
    extra: Iterable[str] = (),
    matched: frozenset[str] | set[str] = frozenset(),
    cap: int = MAX_PARSED,
) -> list[str]:
    """The files ``detector`` should parse: relevant (see module docstring), matching
    ``pattern`` (or listed in ``matched``), at most ``cap``, in order of relevance."""
    ranked, _ = ranked_files(ctx)
    order = list(dict.fromkeys([*ranked, *(p for p in sorted(extra) if _usable(p, ctx.index))]))
    chosen: list[str] = []
    for path, data in ctx.index.py_bytes(order):
        if path not in matched and not pattern.search(data):
            continue
        if len(chosen) == cap:
            ctx.warn(
                f"{detector}: analysed only the {cap} most relevant Python files of more that "
                "qualify (entry points first, then the modules they import)"
            )
            break
        chosen.append(path)
    return chosen
