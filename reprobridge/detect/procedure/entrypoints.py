"""Python entry points that look like experiments (``train.py``, ``src/pkg/__main__.py``).

A file is an entry point when it has a module-level ``if __name__ == "__main__":`` block
(or is a package's ``__main__.py``, run as ``python -m pkg``; a leading ``src/`` is dropped
from the module path). It is reported as an experiment when its name says so (train, eval,
run, main, experiment, benchmark, finetune, ...) or it declares a command line (argparse,
click, typer, fire, hydra, absl, or its own parser reading ``sys.argv``, such as a
yacs/CfgNode-style ``--section.key=value`` merge): medium confidence with both, low with
one. A guarded file with neither is an experiment too (low confidence) when it sits at the
root or in an ``example(s)/``, ``projects/`` or ``scripts/`` folder and imports a numerical
library (``example/time_series_classification.py`` calling ``main()``); any other is
reported as a ``rejected`` candidate, with the reason.

A *script without a guard* is an entry point too when it does its work at import time —
a module-level loop, or a module-level call of a function it defines (``main()``) or of a
``fit``/``train`` method — and it is a script rather than a library module: not inside a
package (no ``__init__.py`` beside it) and imported by no other file of the repository.
Such a script (``bigram.py``, a ``train.py`` that just trains) is an experiment when its
name says so or it imports a numerical/ML library, with low confidence: the merge ranks
it with the other candidates.

A guarded file that imports relatively when it runs (``from .base import Sampler`` at
module level) is no script: ``python pkg/mod.py`` fails with "attempted relative import
with no known parent package". It is run as ``python -m pkg.mod`` from its package root
(the first folder above it without an ``__init__.py``: the experiment's workdir), or,
when its folders form no importable module path, reported as a ``rejected`` candidate.

Tests, ``setup.py``, docs and vendored directories are skipped; a ``test_*.py`` or
``*_test.py`` file outside a tests/ folder is a test only when it looks like one (test
functions, a ``TestCase``, a pytest/unittest import): research code names experiment
scripts so too.

A script in a folder whose code (not its docstrings) names a path through the folder above
it (``savefig('../images/f.png')``, ``sys.path.append('..')``) was written to run from its
own folder: its workdir is that folder and its command ``python name.py``.

The command is ``python path.py`` plus every *required* parameter the command line
declares, as ``--flag {name}`` (or ``{name}`` for a positional): the launcher fills the
placeholder from the experiment's ``params``, and the ``param`` findings of
:mod:`~reprobridge.detect.procedure.params` carry those names. Ids are the file stem, with the
directory prepended when the stem is generic (``main``) or already taken.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import PurePosixPath

from reprobridge.detect._pyast import call_name, import_map, main_guard, nodes_of
from reprobridge.detect._text import first_line, is_test_path, skip_path, slugify, unique_id
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding, rejected
from reprobridge.detect.findings import ExperimentKind, ExperimentValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure._cli_params import cli_params

_NAME_RE = re.compile(
    r"(?:^|[_\-.])(?:train\w*|eval\w*|evaluate|test_model|run\w*|main|experiment\w*|exp\d*|"
    r"bench\w*|benchmark\w*|finetune\w*|fine_tune|pretrain\w*|infer\w*|predict\w*|sample\w*|"
    r"generate\w*|reproduce\w*|fit|learn|launch\w*|sweep\w*)(?:$|[_\-.])",
    re.I,
)
_CLI_MODULES = frozenset(
    {
        "argparse",
        "click",
        "typer",
        "fire",
        "hydra",
        "absl",
        "jsonargparse",
        "configargparse",
        "tyro",
        "simple_parsing",
    }
)
#: Libraries whose import makes a script that runs at import time worth considering.
_NUMERIC_MODULES = frozenset(
    {
        "torch", "tensorflow", "jax", "flax", "optax", "keras", "sklearn", "numpy", "scipy",
        "pandas", "lightning", "pytorch_lightning", "transformers", "xgboost", "lightgbm",
        "catboost", "mxnet", "paddle", "tinygrad", "mlx", "equinox", "haiku", "torchvision",
        "datasets", "statsmodels", "gym", "gymnasium",
    }
)  # fmt: skip
#: Text that shows a hand-written command line (a parser over ``sys.argv``, or a config
#: object merged from it: ``cfg.merge_from_args(sys.argv[1:])``).
_ARGV_RE = re.compile(rb"sys\.argv|merge_from_args|merge_from_list|parse_args\(")
#: Module-level lines that may run work at import time: a loop, or a bare call.
#: Searched in ``b"\n" + data``: a literal newline first lets the engine skip to candidate
#: lines (3-4x faster than ``^`` with re.M on every Python file of a large repository).
_TOP_LEVEL_WORK_RE = re.compile(rb"\n(?:for |while |with |[A-Za-z_][\w.]*\()")
_GENERIC_STEMS = frozenset({"main", "run", "__main__", "cli", "app", "script"})
_SKIP_NAMES = frozenset({"setup.py", "conftest.py", "__init__.py", "noxfile.py", "fabfile.py"})
_SKIP_TOP = frozenset({"docs", "doc", "benchmarks_data"})


def looks_like_experiment_name(path: str) -> bool:
    """True when the file name suggests it runs an experiment (``train_cifar.py``)."""
    name = path.rpartition("/")[2]
    return bool(_NAME_RE.search(_stem(name))) or name == "__main__.py"


# String operations, not PurePosixPath: these run for every Python file of the repository.
def _stem(name: str) -> str:
    """``PurePosixPath(name).stem``."""
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


def _parent(path: str) -> str:
    """``str(PurePosixPath(path).parent)``."""
    return path.rpartition("/")[0] or "."


def module_of(path: str) -> str | None:
    """``pkg.sub`` for ``[src/]pkg/sub/__main__.py``, or None when not importable as a module."""
    parts = list(PurePosixPath(path).parts[:-1])
    if parts and parts[0] == "src":
        parts = parts[1:]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _names_parent_paths(tree: ast.Module) -> bool:
    """Whether the module's code (not its docstrings) has a string literal naming a path
    through the folder above its own: ``..`` or one starting ``../``."""
    # From the tree's cached node buckets (neither answer depends on the walk's order).
    docstrings = {
        id(node.body[0].value)
        for node in nodes_of(tree, ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return any(
        isinstance(node.value, str)
        and id(node) not in docstrings
        and (node.value in ("..", "../") or node.value.startswith(("../", "..\\")))
        for node in nodes_of(tree, ast.Constant)
    )


class EntryPointsDetector(Detector):
    """Experiment-like ``__main__`` scripts and packages (see module docstring)."""

    name = "entrypoints"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        index = ctx.index
        findings: list[Finding] = []
        taken: set[str] = set()
        # A package's __main__.py rarely contains the text "__main__": list it by name too.
        paths = set(index.python_files_with("__main__")) | set(index.named("__main__.py"))
        for path in sorted(paths):
            pure = PurePosixPath(path)
            if (
                skip_path(path)
                or is_test_path(path, index.try_read_text)
                or pure.name in _SKIP_NAMES
                or pure.parts[0] in _SKIP_TOP
            ):
                continue
            is_pkg_main = pure.name == "__main__.py"
            if not self._worth_parsing(index, path, is_pkg_main):
                continue
            if not (is_pkg_main or looks_like_experiment_name(path) or _runnable_place(path)):
                # Most guarded files are library modules with a demo block: when the bytes
                # name no CLI, the verdict (rejected) is known without parsing the file.
                data = next((d for _, d in index.py_bytes([path])), b"")
                plain = _PLAIN_GUARD_RE.search(data)
                if plain is not None and not _may_have_cli(data):
                    line = data.count(b"\n", 0, plain.start()) + 1
                    findings.append(_rejected(path, line, _NOT_AN_EXPERIMENT))
                    continue
            tree = index.parse_python(path)
            if tree is None:
                continue
            guard = main_guard(tree)
            if guard is None and not is_pkg_main:
                continue
            imports = import_map(tree)
            has_cli = _has_cli(index, path, imports)
            named = looks_like_experiment_name(path)
            if not (named or has_cli or _example_script(path, imports)):
                findings.append(_rejected(path, guard.lineno if guard else 1, _NOT_AN_EXPERIMENT))
                continue
            package = None
            relative = None if is_pkg_main else _relative_import_line(tree)
            if relative is not None:
                # `python pkg/mod.py` fails with "attempted relative import with no known
                # parent package": the file runs only as a module, from its package root.
                package = _package_module(index, path)
                if package is None:
                    findings.append(_rejected(path, relative, _RELATIVE_NOT_A_MODULE))
                    continue
            finding = self._finding(
                path, tree, imports, guard, named and has_cli, taken, package=package
            )
            if finding is not None:
                findings.append(finding)
        findings += self._unguarded_scripts(index, paths, taken)
        return findings

    def _unguarded_scripts(
        self, index: RepoIndex, guarded: set[str], taken: set[str]
    ) -> list[Finding]:
        """Scripts that do their work at import time (see the module docstring)."""
        scan = index.py_scan()
        imported: set[str] = set()
        for info in scan.values():
            imported |= info.imports
        packages = {_parent(p) for p in index.named("__init__.py")}
        found: list[Finding] = []
        for path in sorted(scan):
            name = path.rpartition("/")[2]
            if (
                path in guarded
                or name in _SKIP_NAMES
                or path.split("/", 1)[0] in _SKIP_TOP
                or _parent(path) in packages
                or _stem(name) in imported
                or skip_path(path)
                or is_test_path(path, index.try_read_text)
            ):
                continue
            info = scan[path]
            named = looks_like_experiment_name(path)
            if not (named or info.imports & _NUMERIC_MODULES):
                continue
            data = next((d for _, d in index.py_bytes([path])), b"")
            if not _TOP_LEVEL_WORK_RE.search(b"\n" + data):
                continue
            tree = index.parse_python(path)
            if tree is None:
                continue
            work = _import_time_work(tree)
            if work is None:
                continue
            imports = import_map(tree)
            finding = self._finding(path, tree, imports, None, False, taken)
            if finding is None:
                continue
            note = f"no __main__ guard: runs at import time ({work[1]})"
            found.append(
                Finding(
                    kind=finding.kind,
                    key=finding.key,
                    value=finding.value,
                    evidence=(Evidence(path, work[0]),),
                    detector=self.name,
                    confidence="low",
                    note="; ".join(n for n in (note, finding.note) if n),
                )
            )
        return found

    @staticmethod
    def _worth_parsing(index: RepoIndex, path: str, is_pkg_main: bool) -> bool:
        """Whether ``path`` may be kept, decided from its bytes and the index's scan.

        Necessary conditions only (the AST decides): a module-level ``if`` line naming
        ``__main__`` (or a package ``__main__.py``).
        """
        data = next((d for _, d in index.py_bytes([path])), None)
        if data is None:
            return False
        if not is_pkg_main:
            guard = False
            pos = data.find(b"__main__")
            while pos != -1 and not guard:
                guard = data.startswith(b"if", data.rfind(b"\n", 0, pos) + 1)
                pos = data.find(b"__main__", pos + 8)
            if not guard:
                return False
        # A guarded file without a name or a command line is still parsed: it is reported
        # as a rejected candidate, with the reason.
        return True

    def _finding(
        self,
        path: str,
        tree: ast.Module,
        imports: dict[str, str],
        guard: ast.If | None,
        both: bool,
        taken: set[str],
        package: tuple[str, str] | None = None,
    ) -> Finding | None:
        """The experiment finding for ``path``; ``package`` = (module, package root) runs a
        file with relative imports as ``python -m module`` from that root."""
        pure = PurePosixPath(path)
        workdir = "."
        notes: list[str] = []
        kind: ExperimentKind
        if package is not None:
            dotted, workdir = package
            command, kind = f"python -m {dotted}", "module"
            stem = pure.stem
            notes.append(
                "relative imports: run as a module from its package root"
                + ("" if workdir == "." else f" ({workdir})")
            )
        elif pure.name == "__main__.py":
            module = module_of(path)
            if module is None:
                return None
            command, kind = f"python -m {module}", "module"
            stem = module.rsplit(".", 1)[-1]
        elif str(pure.parent) != "." and _names_parent_paths(tree):
            # `savefig('../images/f.png')`, `sys.path.append('..')`: written to run from its
            # own folder, where `..` is the folder above it, not above the repository.
            workdir = str(pure.parent)
            command, kind = f"python {shlex.quote(pure.name)}", "script"
            stem = pure.stem
            notes.append(f"names paths above its folder (../): runs from {workdir}")
        else:
            command, kind = f"python {shlex.quote(path)}", "script"
            stem = pure.stem
        required = [p for p in cli_params(tree, imports) if p.required]
        for param in required:
            command += f" {param.flag} {{{param.name}}}" if param.flag else f" {{{param.name}}}"
        if required:
            notes.append("fill required parameters: " + ", ".join(p.name for p in required))
        if kind == "module" and pure.parts[0] == "src":
            notes.append("src layout: the package must be installed (pip install -e .)")
        parent = pure.parent.name
        base = slugify(stem)
        if base is None or base in taken or stem in _GENERIC_STEMS:
            base = slugify(f"{parent}-{stem}" if parent else stem) or base or "entrypoint"
        exp_id = unique_id(base, taken)
        docstring = ast.get_docstring(tree) or _parser_description(tree, imports)
        line = guard.lineno if guard is not None else 1
        return Finding(
            kind="experiment",
            key=exp_id,
            value=ExperimentValue(command, kind, first_line(docstring), path, workdir),
            evidence=(Evidence(path, line),),
            detector=self.name,
            confidence="medium" if both else "low",
            note="; ".join(notes),
        )


#: Folders whose guarded scripts are meant to be run (``example/time_series_classification.py``).
_RUNNABLE_DIRS = frozenset({"example", "examples", "projects", "scripts"})


def _example_script(path: str, imports: dict[str, str]) -> bool:
    """A guarded script at the root or in an examples/projects/scripts folder that imports a
    numerical library: run as it is, with no name or command line to go by."""
    return _runnable_place(path) and bool(
        {v.split(".")[0] for v in imports.values()} & _NUMERIC_MODULES
    )


def _runnable_place(path: str) -> bool:
    """The root, or a folder whose scripts run as they are (examples/, projects/, ...)."""
    folders = path.split("/")[:-1]
    return not folders or any(p.lower() in _RUNNABLE_DIRS for p in folders)


def _has_cli(index: RepoIndex, path: str, imports: dict[str, str]) -> bool:
    """Whether ``path`` reads a command line: a CLI library, ``add_argument``, or its own
    parser over ``sys.argv`` (yacs/CfgNode ``--section.key=value`` merges included)."""
    if {v.split(".")[0] for v in imports.values()} & _CLI_MODULES:
        return True
    data = next((d for _, d in index.py_bytes([path])), b"")
    return b"add_argument" in data or bool(_ARGV_RE.search(data))


_NOT_AN_EXPERIMENT = (
    "has a __main__ block but neither an experiment-like name, a command line, nor numerical "
    "imports in an examples/projects/scripts folder or the root"
)
#: The plain guard at column 0, as :func:`~reprobridge.detect._pyast.main_guard` finds it
#: (other spellings are parsed).
_PLAIN_GUARD_RE = re.compile(
    rb"^if[ \t]+(?:__name__[ \t]*==[ \t]*(['\"])__main__\1|(['\"])__main__\2[ \t]*==[ \t]*"
    rb"__name__)[ \t]*:",
    re.M,
)
_CLI_WORDS = tuple(m.encode() for m in sorted(_CLI_MODULES))


def _may_have_cli(data: bytes) -> bool:
    """False only when :func:`_has_cli` is surely False: importing a CLI module needs its
    name in the bytes, as do ``add_argument`` and a parser over ``sys.argv``."""
    return (
        any(word in data for word in _CLI_WORDS)
        or b"add_argument" in data
        or bool(_ARGV_RE.search(data))
    )


_RELATIVE_NOT_A_MODULE = (
    "imports relatively at module level (`from . import ...`), so `python <file>` fails with "
    '"attempted relative import with no known parent package", and its folders do not form '
    "an importable package path (an __init__.py in each, identifier names) to run it with "
    "`python -m`"
)


def _relative_import_line(tree: ast.Module) -> int | None:
    """The line of the first relative import that runs when the file runs (module level, or
    in a module-level ``try``/``if``, the ``__main__`` block included), or None. One inside
    a function is left alone (it may never run), as is one in a ``try`` that catches
    ImportError (the file runs as a script without it)."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, ast.ImportFrom) and stmt.level > 0:
            return stmt.lineno
        if isinstance(stmt, ast.If):
            stack[:0] = [*stmt.body, *stmt.orelse]
        elif isinstance(stmt, ast.Try | ast.TryStar):
            # The failure is an ImportError: a try that catches it runs as a script.
            body = [] if any(_catches_import_error(h) for h in stmt.handlers) else stmt.body
            stack[:0] = [*body, *stmt.orelse, *stmt.finalbody]
            for handler in stmt.handlers:
                stack[:0] = handler.body
    return None


_IMPORT_ERROR_BASES = frozenset({"ImportError", "Exception", "BaseException"})


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether ``except ...:`` catches an ImportError (bare, or naming it or a base)."""
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _IMPORT_ERROR_BASES for t in types)


def _package_module(index: RepoIndex, path: str) -> tuple[str, str] | None:
    """(dotted module, package root) for a file inside a package: the folders above it that
    hold an ``__init__.py`` form the module path, the first one without is the root
    (``lib/pkg/sub/mod.py`` -> ``("pkg.sub.mod", "lib")``). None when the file's own folder
    is no package or a name on the path is not an identifier."""
    inits = set(index.named("__init__.py"))
    parts = path.split("/")
    module = [_stem(parts[-1])]
    folders = parts[:-1]
    while folders and "/".join([*folders, "__init__.py"]) in inits:
        module.insert(0, folders.pop())
    if len(module) < 2 or not all(p.isidentifier() for p in module):
        return None
    return ".".join(module), "/".join(folders) or "."


def _rejected(path: str, line: int, reason: str) -> Finding:
    return rejected(path, reason, Evidence(path, line), EntryPointsDetector.name)


_FIT_METHODS = frozenset({"fit", "train", "fit_generator", "train_model", "run"})


def _import_time_work(tree: ast.Module) -> tuple[int, str] | None:
    """(line, what) the module does at import time that makes it a script, or None.

    A module-level ``for``/``while`` loop, a module-level call of a function the module
    defines (``main()``), or a ``.fit(...)``/``.train(...)`` call.
    """
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for stmt in tree.body:
        if isinstance(stmt, ast.For | ast.While):
            return stmt.lineno, f"a loop at line {stmt.lineno}"
        call = _top_call(stmt)
        if call is None:
            continue
        func = call.func
        if isinstance(func, ast.Name) and func.id in defined:
            return stmt.lineno, f"calls {func.id}() at line {stmt.lineno}"
        if isinstance(func, ast.Attribute) and func.attr in _FIT_METHODS:
            return stmt.lineno, f"calls .{func.attr}() at line {stmt.lineno}"
    return None


def _top_call(stmt: ast.stmt) -> ast.Call | None:
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) else None
    return value if isinstance(value, ast.Call) else None


def _parser_description(tree: ast.Module, imports: dict[str, str]) -> str:
    """The ``description=`` of the file's ``argparse.ArgumentParser``, or ""."""
    for node in nodes_of(tree, ast.Call):  # one type: ast.walk's order
        if (call_name(node, imports) or "").endswith("ArgumentParser"):
            for kw in node.keywords:
                if kw.arg == "description" and isinstance(kw.value, ast.Constant):
                    return str(kw.value.value) if isinstance(kw.value.value, str) else ""
    return ""
