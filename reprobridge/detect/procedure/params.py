"""Parameters, seeds and unbounded loops of the Python entry points.

Parameters (``param`` findings, key ``"<file>::<name>"``) come from, statically:

* argparse ``add_argument`` calls (flag, ``dest``, ``type``, ``default``, ``required``,
  ``choices``, ``store_true``/``store_false``) and ``set_defaults``;
* click ``@click.option``/``@click.argument`` decorators; typer commands (``typer.Option``,
  ``Annotated[...]`` and plain defaults); ``fire.Fire(fn)`` (the keyword defaults of ``fn``
  or of a class's ``__init__``);
* hydra ``@hydra.main(config_path, config_name)``: the YAML config it names, flattened
  (``optimizer.lr``), with the groups its ``defaults`` list selects; ``flag`` is then the
  hydra override key (``optimizer.lr``, used as ``optimizer.lr=value``);
* ``ml_collections.ConfigDict`` attribute assignments (flag ``--config.<path>``) and yacs
  ``_C.SOLVER.BASE_LR = 0.01`` (flag ``SOLVER.BASE_LR``, used as an ``opts`` pair).

A default that is not a literal is reported as ``None`` with the expression in the note.
``seed`` findings (key: the file) come from a parameter named like a seed, else from a
seeding call with a literal (``torch.manual_seed(0)``). ``unbounded`` findings report a
``while True``/``itertools.count()`` loop that has no exit at all (``"no bound found"``)
or whose only exits depend on a step/epoch budget such as ``max_steps`` — naming the flag
that bounds it. Loops that end on other conditions (data exhausted, convergence) and
generators (``yield``) are not reported.

Each source has its reader: :mod:`~reprobridge.detect.procedure._cli_params` (argparse, click, typer,
fire), :mod:`~reprobridge.detect.procedure._config_params` (ml_collections, yacs),
:mod:`~reprobridge.detect.procedure._hydra` and :mod:`~reprobridge.detect.procedure._loops`, all returning the
:class:`~reprobridge.detect.procedure._param.Param` record. This module is the detector: it picks the
files, follows config sections and loops into the modules an entry imports, and turns what
the readers return into findings.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import PurePosixPath

from reprobridge.detect._pyast import (
    call_name,
    dotted,
    import_map,
    nodes_of,
    seed_calls,
    short_source,
)
from reprobridge.detect._select import procedure_files, resolve_import
from reprobridge.detect._text import normalize_path
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ParamValue, SeedValue, UnboundedValue
from reprobridge.detect.procedure._cli_params import argparse_params, cli_params
from reprobridge.detect.procedure._config_params import (
    config_object_params,
    config_sections,
    merges_from_argv,
)
from reprobridge.detect.procedure._hydra import hydra_params
from reprobridge.detect.procedure._loops import Unbounded, unbounded_loops
from reprobridge.detect.procedure._param import SEED_NAMES, Param
from reprobridge.detect.procedure.bounds import print_gates

# -- config sections and loops in imported modules ----------------------------------------


def _module_file(ctx: DetectContext, importer: str, dotted_name: str) -> tuple[str, list[str]]:
    """(repository file, attribute path inside it) of a resolved dotted name, or ("", [])."""
    parts = dotted_name.split(".")
    base = str(PurePosixPath(importer).parent)
    for cut in range(len(parts) - 1, 0, -1):
        stem = "/".join(parts[:cut])
        for cand in (f"{stem}.py", f"{stem}/__init__.py", f"src/{stem}.py", f"{base}/{stem}.py"):
            norm = normalize_path(cand)
            if norm in ctx.index:
                return norm, parts[cut:]
    return "", []


def _find_def(tree: ast.Module, attrs: list[str]) -> ast.AST | None:
    """The class/function ``attrs`` names inside a module (``["Trainer", "get_config"]``)."""
    body: list[ast.stmt] = tree.body
    found: ast.ClassDef | ast.FunctionDef | None = None
    for attr in attrs:
        found = next(
            (n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == attr),
            None,
        )
        if found is None:
            return None
        body = found.body
    return found


def _section_params(
    ctx: DetectContext, path: str, tree: ast.Module, imports: dict[str, str]
) -> list[tuple[Param, Evidence]]:
    """Parameters of config sections whose defaults a function of another module makes
    (``C.trainer = Trainer.get_default_config()``), keyed under the section."""
    out: list[tuple[Param, Evidence]] = []
    argv = merges_from_argv(tree)
    for keys, callee, line in config_sections(tree, imports):
        file, attrs = _module_file(ctx, path, callee)
        other = ctx.index.parse_python(file) if file else None
        node = _find_def(other, attrs) if other is not None else None
        if other is None or node is None:
            continue
        for param in config_object_params(node, import_map(other), prefix=keys, argv=argv):
            out.append((replace(param, line=line), Evidence(file, param.line)))
    return out


#: Methods that read the command line from an ``ArgumentParser``.
_PARSE_METHODS = frozenset({"parse_args", "parse_known_args"})


def _imported_parser_params(
    ctx: DetectContext, path: str, tree: ast.Module, imports: dict[str, str]
) -> list[tuple[Param, Evidence]]:
    """Parameters of a parser that a function of another repository module builds and
    ``path`` parses (``parser = grok.training.add_args()`` ... ``parser.parse_args()``,
    or ``get_parser().parse_args()``): that function's ``add_argument`` calls, and those of
    the functions or methods of its module it calls (``Model.add_model_specific_args(
    parser)``), one level down."""
    builders: list[ast.Call] = []
    parsed: set[str] = set()
    for call in nodes_of(tree, ast.Call):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _PARSE_METHODS:
            if isinstance(func.value, ast.Name):
                parsed.add(func.value.id)
            elif isinstance(func.value, ast.Call):
                builders.append(func.value)
    for node in nodes_of(tree, ast.Assign):
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in parsed
            and isinstance(node.value, ast.Call)
        ):
            builders.append(node.value)
    out: list[tuple[Param, Evidence]] = []
    for call in builders:
        callee = call_name(call, imports)
        file, attrs = _module_file(ctx, path, callee) if callee else ("", [])
        other = ctx.index.parse_python(file) if file else None
        node = _find_def(other, attrs) if other is not None else None
        if other is None or not isinstance(node, ast.FunctionDef):
            continue
        other_imports = import_map(other)
        defs = [node]
        for inner in nodes_of(node, ast.Call):
            name = dotted(inner.func)
            sub = _find_def(other, name.split(".")) if name else None
            if isinstance(sub, ast.FunctionDef) and sub is not node:
                defs.append(sub)
        for d in defs:
            out += [
                (replace(p, line=call.lineno), Evidence(file, p.line))
                for p in argparse_params(d, other_imports)
            ]
    return out


def _imported_loop(
    ctx: DetectContext, path: str, by_name: dict[str, tuple[Param, Evidence]]
) -> tuple[str, Unbounded] | None:
    """(module, loop) of a budget-bounded infinite loop in a repository module ``path``
    imports, when one of ``path``'s own parameters sets that budget (a Trainer's
    ``while True`` ending on ``config.max_iters``, set by ``--trainer.max_iters``)."""
    params = [p for p, _ in by_name.values()]
    paths = ctx.index.python_paths()
    for module, names in ctx.index.imported_modules(path):
        for file in sorted(resolve_import(paths, path, module, names)):
            other = ctx.index.parse_python(file)
            if other is None:
                continue
            for loop in unbounded_loops(other, import_map(other)):
                if loop.bound and _bounding_param(loop, params) is not None:
                    return file, loop
    return None


# -- the detector --------------------------------------------------------------------------


#: Bytes of a file that may declare parameters, seeds or loops (tested only on the files
#: :func:`~reprobridge.detect._select.procedure_files` selects).
_CANDIDATE_RE = re.compile(
    rb"argparse|add_argument|parse_args|parse_known_args|click|typer|fire|hydra|"
    rb"ml_collections|yacs|seed|while True|"
    rb"itertools\.count"
)
#: Imports of a config module, which declares parameters without being an entry point.
_CONFIG_IMPORTS = frozenset({"ml_collections", "yacs"})


def candidate_files(ctx: DetectContext) -> list[str]:
    """The Python files worth parsing for parameters, seeds or loops, most relevant first:
    the experiments' entry points and what they import, plus config modules."""
    configs = [p for p, s in ctx.index.py_scan().items() if s.imports & _CONFIG_IMPORTS]
    return procedure_files(ctx, _CANDIDATE_RE, "params", extra=configs)


class ParamsDetector(Detector):
    """Parameters, seeds and unbounded loops of Python files (see module docstring)."""

    name = "params"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        for path, tree in ctx.python_trees(sorted(candidate_files(ctx))):
            with ctx.skip_too_deep(path):
                findings.extend(self._file(ctx, path, tree))
        return findings

    def _file(self, ctx: DetectContext, path: str, tree: ast.Module) -> list[Finding]:
        imports = import_map(tree)
        pairs: list[tuple[Param, Evidence]] = [
            (p, Evidence(path, p.line)) for p in cli_params(tree, imports)
        ]
        pairs += [(p, Evidence(path, p.line)) for p in config_object_params(tree, imports)]
        pairs += _section_params(ctx, path, tree, imports)
        pairs += _imported_parser_params(ctx, path, tree, imports)
        pairs += hydra_params(tree, imports, path, ctx)
        findings: list[Finding] = []
        by_name: dict[str, tuple[Param, Evidence]] = {}
        # A loop over range(args.steps) that prints every K steps: K, by the parameter.
        gates: dict[str, int] = {}
        for stop, every in print_gates(tree).items():
            if not stop.startswith("@"):
                name = stop.rsplit(".", 1)[-1]
                gates[name] = max(every, gates.get(name, 0))
        for param, ev in pairs:
            if param.name in by_name:
                continue
            by_name[param.name] = (param, ev)
            evidence = (ev,) if ev.path == path else (ev, Evidence(path, param.line))
            note = "; ".join(n for n in (param.note, "required" if param.required else "") if n)
            findings.append(
                Finding(
                    kind="param",
                    key=f"{path}::{param.name}",
                    value=ParamValue(
                        path,
                        param.name,
                        param.flag,
                        param.default,
                        param.type,
                        param.syntax,
                        gates.get(param.name, 0),
                    ),
                    evidence=evidence,
                    detector=self.name,
                    confidence="high",
                    note=note,
                )
            )
        seed = self._param_seed(path, by_name) or self._call_seed(path, tree, imports)
        if seed:
            findings.append(seed)
        loops = unbounded_loops(tree, imports)
        if loops:
            findings.append(self._unbounded(path, loops, by_name))
        else:
            found = _imported_loop(ctx, path, by_name)
            if found is not None:
                findings.append(self._unbounded(found[0], [found[1]], by_name, entry=path))
        return findings

    def _param_seed(self, path: str, by_name: dict[str, tuple[Param, Evidence]]) -> Finding | None:
        """The ``seed`` finding of a seed parameter (``--seed``, ``random_seed``; ``seed``
        itself first), high confidence; None without one."""
        names = sorted(
            (n for n in by_name if n.lower() in SEED_NAMES or n.lower().endswith("_seed")),
            key=lambda n: (n.lower() != "seed", n.lower() not in SEED_NAMES, n),
        )
        if not names:
            return None
        param, ev = by_name[names[0]]
        default = (
            param.default
            if isinstance(param.default, int) and not isinstance(param.default, bool)
            else None
        )
        return Finding(
            kind="seed",
            key=path,
            value=SeedValue(path, param.flag, default, param.syntax),
            evidence=(ev,),
            detector=self.name,
            confidence="high",
            note=f"parameter {param.name}"
            + ("" if default is not None else "; no literal default"),
        )

    def _call_seed(self, path: str, tree: ast.Module, imports: dict[str, str]) -> Finding | None:
        """The ``seed`` finding of the file's seeding calls (``torch.manual_seed(0)``): medium
        confidence with a literal, low from a computed value; None without a call."""
        calls = list(seed_calls(tree, imports))
        if not calls:
            return None
        literal_calls = [(c, v) for c, v in calls if v is not None]
        if literal_calls:
            values = sorted({v for _, v in literal_calls if v is not None})
            call, value = literal_calls[0]
            note = f"set by {call_name(call, imports)}({value}) in the code; no seed flag"
            if len(values) > 1:
                note += f"; other literal seeds: {', '.join(str(v) for v in values if v != value)}"
            return Finding(
                kind="seed",
                key=path,
                value=SeedValue(path, None, value),
                evidence=tuple(Evidence(path, c.lineno) for c, _ in literal_calls[:5]),
                detector=self.name,
                confidence="medium",
                note=note,
            )
        call = calls[0][0]
        return Finding(
            kind="seed",
            key=path,
            value=SeedValue(path, None, None),
            evidence=(Evidence(path, call.lineno),),
            detector=self.name,
            confidence="low",
            note=f"seeded from a computed value: {short_source(call)}",
        )

    def _unbounded(
        self,
        path: str,
        loops: list[Unbounded],
        by_name: dict[str, tuple[Param, Evidence]],
        *,
        entry: str | None = None,
    ) -> Finding:
        """The ``unbounded`` finding of ``entry`` (default ``path``) for loops in ``path``."""
        loop = next((lp for lp in loops if lp.bound), loops[0])
        param: Param | None = None
        if loop.bound is None:
            reason = f"infinite loop at line {loop.line} has no exit: no bound found"
        else:
            param = _bounding_param(loop, [p for p, _ in by_name.values()])
            reason = f"infinite loop at line {loop.line} ends only when {loop.bound} is reached"
            if param is not None and param.default is None:
                reason += f" ({param.flag or loop.bound} has no default: set it)"
            elif param is None:
                reason += " (no flag sets it)"
        if entry is not None and entry != path:
            reason = f"{path}: {reason}"
        value = UnboundedValue(entry or path, reason, None, budget=loop.bound)
        if param is not None:
            value = UnboundedValue(
                entry or path,
                reason,
                param.flag,
                param.name,
                param.syntax,
                param.default,
                budget=loop.bound,
            )
        return Finding(
            kind="unbounded",
            key=entry or path,
            value=value,
            evidence=tuple(Evidence(path, lp.line) for lp in loops[:5]),
            detector=self.name,
            confidence="medium",
        )


def _bounding_param(loop: Unbounded, params: list[Param]) -> Param | None:
    """The parameter a loop's budget reads: same override path, else same name."""

    def key(flag: str | None) -> str:
        return (flag or "").lstrip("-").removeprefix("config.").replace("-", "_").lower()

    if loop.path:
        path = loop.path.lower()
        for param in params:
            if key(param.flag) == path:
                return param
    bound = (loop.bound or "").lower()
    for param in params:
        if param.name.lower() == bound or key(param.flag) == bound:
            return param
    if loop.path and "." not in loop.path:
        # A loop in an imported module reads its own config (``config.max_iters``); the
        # entry sets it under a section (``--trainer.max_iters``).
        for param in params:
            if key(param.flag).rsplit(".", 1)[-1] == bound:
                return param
    return None
