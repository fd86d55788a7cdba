"""Python entry points that look like experiments (``train.py``, ``src/pkg/__main__.py``).

Only files with the ``__main__`` index marker are considered, and of those only the ones
whose bytes show a module-level ``if ... __main__`` line and an experiment-like name or a
command line are parsed. A file is an entry point when it
has a module-level ``if __name__ == "__main__":`` block (or is a package's ``__main__.py``,
run as ``python -m pkg``; a leading ``src/`` is dropped from the module path). It is
reported as an experiment when its name says so (train, eval, run, main, experiment,
benchmark, finetune, ...) or it declares a command line (argparse, click, typer, fire,
hydra, absl): medium confidence with both, low with one. Tests, ``setup.py``, docs and
vendored directories are skipped.

The command is ``python path.py`` plus every *required* parameter the command line
declares, as ``--flag {name}`` (or ``{name}`` for a positional): the launcher fills the
placeholder from the experiment's ``params``, and the ``param`` findings of
:mod:`~reprobridge.detect.params` carry those names. Ids are the file stem, with the
directory prepended when the stem is generic (``main``) or already taken.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import PurePosixPath

from reprobridge.detect._pyast import import_map, main_guard
from reprobridge.detect._text import first_line, is_test_path, skip_path, slugify, unique_id
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.params import cli_params

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
_GENERIC_STEMS = frozenset({"main", "run", "__main__", "cli", "app", "script"})
_SKIP_NAMES = frozenset({"setup.py", "conftest.py", "__init__.py", "noxfile.py", "fabfile.py"})
_SKIP_TOP = frozenset({"docs", "doc", "benchmarks_data"})


def looks_like_experiment_name(path: str) -> bool:
    """True when the file name suggests it runs an experiment (``train_cifar.py``)."""
    return (
        bool(_NAME_RE.search(PurePosixPath(path).stem)) or PurePosixPath(path).name == "__main__.py"
    )


def module_of(path: str) -> str | None:
    """``pkg.sub`` for ``[src/]pkg/sub/__main__.py``, or None when not importable as a module."""
    parts = list(PurePosixPath(path).parts[:-1])
    if parts and parts[0] == "src":
        parts = parts[1:]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


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
                or is_test_path(path)
                or pure.name in _SKIP_NAMES
                or pure.parts[0] in _SKIP_TOP
            ):
                continue
            is_pkg_main = pure.name == "__main__.py"
            if not self._worth_parsing(index, path, is_pkg_main):
                continue
            tree = index.parse_python(path)
            if tree is None:
                continue
            guard = main_guard(tree)
            if guard is None and not is_pkg_main:
                continue
            imports = import_map(tree)
            has_cli = bool(
                {v.split(".")[0] for v in imports.values()} & _CLI_MODULES
                or "add_argument" in (index.try_read_text(path) or "")
            )
            named = looks_like_experiment_name(path)
            if not (named or has_cli):
                continue
            finding = self._finding(path, tree, imports, guard, named and has_cli, taken)
            if finding is not None:
                findings.append(finding)
        return findings

    @staticmethod
    def _worth_parsing(index: RepoIndex, path: str, is_pkg_main: bool) -> bool:
        """Whether ``path`` may be kept, decided from its bytes and the index's scan.

        Necessary conditions only (the AST decides): a module-level ``if`` line naming
        ``__main__`` (or a package ``__main__.py``), and an experiment-like name or a
        command line (a CLI module imported, or ``add_argument`` in the text).
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
        if looks_like_experiment_name(path):
            return True
        scan = index.py_scan().get(path)
        return bool(scan is not None and scan.imports & _CLI_MODULES) or b"add_argument" in data

    def _finding(
        self,
        path: str,
        tree: ast.Module,
        imports: dict[str, str],
        guard: ast.If | None,
        both: bool,
        taken: set[str],
    ) -> Finding | None:
        pure = PurePosixPath(path)
        if pure.name == "__main__.py":
            module = module_of(path)
            if module is None:
                return None
            command, kind = f"python -m {module}", "module"
            stem = module.rsplit(".", 1)[-1]
        else:
            command, kind = f"python {shlex.quote(path)}", "script"
            stem = pure.stem
        notes: list[str] = []
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
        docstring = ast.get_docstring(tree) or ""
        line = guard.lineno if guard is not None else 1
        return Finding(
            kind="experiment",
            key=exp_id,
            value={
                "command": command,
                "kind": kind,
                "description": first_line(docstring),
                "entry": path,
                "workdir": ".",
            },
            evidence=(Evidence(path, line),),
            detector=self.name,
            confidence="medium" if both else "low",
            note="; ".join(notes),
        )
