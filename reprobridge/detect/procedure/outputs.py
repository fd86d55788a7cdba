"""Files the experiments write and the metrics they report.

``output`` findings (key ``"<file>::<path>"``): literal paths, or the static directory of
an f-string / ``os.path.join`` / ``Path /`` whose file name is computed, passed to
``open(..., "w"|"a"|"x")``, ``Path(...).write_text``, ``json.dump``/``pickle.dump``/
``yaml.dump`` (through the handle's ``open``), ``torch.save``, ``np.save``/``savez``/
``savetxt``, ``DataFrame.to_csv``/``to_json``/``to_parquet``, ``savefig`` and
``save_pretrained``. Absolute paths and paths outside the repository are not outputs.

``metric`` findings (key: the metric name, ``^[A-Za-z_][A-Za-z0-9_]{0,63}$``):

* printed values (:mod:`~reprobridge.detect.procedure._printed`) — ``print(f"accuracy: {acc:.4f}")``,
  ``print("Accuracy:", acc)``, ``print("acc=%.3f" % a)``, ``"acc={}".format(a)``,
  ``logger.info("loss=%f", l)``, ``tqdm.write``/``trange.write``/``click.echo``/
  ``accelerator.print`` — become ``{"regex": ...}`` sources matching the printed label and
  separator and capturing the number (negatives and exponents included, see
  :data:`~reprobridge.detect._text.NUMBER`). A label counts only when it names a result
  (acc, loss, F1, BLEU, perplexity, lower bound...) and not a setting (``block_size``,
  ``vocab_size``, ``loss_weight``); progress counters (epoch, step, lr, time...) never do.
  A file that prints no labelled result but an unlabelled value whose expression names
  one (``print(t, loss.item())``) gets that metric, named after the expression, with a
  regex of the whole printed line (low confidence).
* metrics printed by the modules an experiment's entry imports (two levels deep: the
  ``train()`` of another module prints the loss) are declared for the entry too (low
  confidence; the entry's own metric of a name wins), unless every call in the entry's
  code switches that print off (``Trainer(..., verbose=False)`` around ``if
  self.verbose: print(...)``: :mod:`~reprobridge.detect.procedure._switched`).
* keys of a dict dumped with ``json.dump`` to a literal file — a dict literal, or a name
  built in the same function from a literal, ``d["k"] = ...`` or ``d.update(...)`` —
  become ``{"file": path, "key": dotted key}`` sources; within one file such a source is
  preferred to a printed regex of the same name.

``logged_metric`` findings (key: the metric name): results logged to an experiment tracker
— ``wandb.log({...})`` keys, TensorBoard ``add_scalar`` tags — which the auditor cannot
read from the run's log; the merge says so in the guide when nothing else can be read.
A TensorBoard scalar is readable, though, when the file has one writer directory
(``SummaryWriter("runs/x")``; none given: ``runs``): it also becomes a ``metric`` with a
``{"file": <log dir>, "key": <tag>}`` source, read by check.py from the event files (low
confidence; a printed metric of the same name wins). wandb's offline run files are not
read.

Confidence: medium when a printed label or a dumped key names a result, low for a value
named after its expression and for a metric printed by an imported module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

from reprobridge.detect._pyast import (
    arg,
    call_name,
    import_map,
    literal,
    nodes_of,
    static_path,
    walk_shallow,
)
from reprobridge.detect._select import procedure_files, resolve_import
from reprobridge.detect._text import (
    looks_like_metric,
    metric_name,
    tidy_path,
)
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import (
    LoggedMetricValue,
    MetricSource,
    MetricValue,
    OutputValue,
    select,
)
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure._printed import (
    PrintedMetric,
    keep_metrics,
    line_metrics,
    message_formats,
    printed_line,
    shows_info_logs,
)
from reprobridge.detect.procedure._switched import print_switch, switched_off

#: A file is parsed only when its bytes show a write call or a printed ``label<sep>value``
#: (``acc: {``, ``loss=%``, ``"test_acc", x``); ``print(`` and ``logging`` alone are in
#: nearly every file.
_CANDIDATE_RE = re.compile(
    rb"\.dump\(|\.save\(|\.savez|savetxt|savefig|\.to_(?:csv|json|parquet|pickle)\(|"
    rb"save_pretrained|write_(?:text|bytes)\(|open\([^)\n]*[\"'][rwabt+]*[wax]|"
    rb"\w[ \t]*[:=][ \t]*(?:\{|%)|[\w:=][\"'][ \t]*,|wandb|add_scalars?\(|"
    rb"(?i:(?:print|write|info|echo|set_description|set_postfix)\b[^\n]*"
    rb"(?:loss|acc|err|score|bound|likelihood|mse|mae|r2|auc|f1|perplexity|ppl|bleu|reward))"
)
_WRITE_FIRST = frozenset({"numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt"})
_WRITE_METHODS = frozenset(
    {"to_csv", "to_json", "to_parquet", "to_pickle", "savefig", "save_pretrained"}
)
_DUMPS = frozenset({"json.dump", "pickle.dump", "yaml.dump", "yaml.safe_dump", "torch.save"})
_OPENS = frozenset({"open", "io.open", "codecs.open", "gzip.open", "bz2.open"})
_NOT_OUTPUT = ("/", "~", "..", "-")


@dataclass(frozen=True)
class _Metric:
    name: str
    source: dict[str, str]
    line: int
    confidence: str
    note: str = ""


def _output_path(path: str) -> str | None:
    """A written file's path literal, tidied (:func:`~reprobridge.detect._text.tidy_path`);
    None when it is not a file of the run's tree: absolute, in a home, above the root,
    ``-`` (stdout), holding a variable, several lines, or the folder itself (``.``)."""
    path = tidy_path(path)
    if not path or path.startswith(_NOT_OUTPUT) or "$" in path or "\n" in path or path == ".":
        return None
    return path


# -- json-dumped metrics -------------------------------------------------------------------


def _dict_keys(node: ast.Dict, prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in zip(node.keys, node.values, strict=True):
        k = literal(key) if key is not None else None
        if not isinstance(k, str):
            continue
        full = f"{prefix}.{k}" if prefix else k
        if isinstance(value, ast.Dict):
            keys.extend(_dict_keys(value, full))
        else:
            keys.append(full)
    return keys


def _scope_dict_keys(nodes: list[ast.AST]) -> dict[str, list[str]]:
    """Keys given to each local dict among a scope's nodes (literal, ``d["k"] = ...``, update)."""
    keys: dict[str, list[str]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
                keys.setdefault(target.id, []).extend(_dict_keys(node.value))
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                k = literal(target.slice)
                if isinstance(k, str):
                    keys.setdefault(target.value.id, []).append(k)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
        ):
            name = node.func.value.id
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    keys.setdefault(name, []).extend(_dict_keys(arg))
            keys.setdefault(name, []).extend(kw.arg for kw in node.keywords if kw.arg)
    return keys


def _logged(node: ast.Call, imports: dict[str, str]) -> list[tuple[str, str, str]]:
    """(metric name, sink, key or tag) of result-like values a call logs to an experiment
    tracker:
    ``wandb.log({"val_acc": a})`` (``run.log`` of a ``wandb`` run too) and TensorBoard's
    ``writer.add_scalar("test/acc", a)`` / ``add_scalars``."""
    name = call_name(node, imports) or ""
    func = node.func
    attr = func.attr if isinstance(func, ast.Attribute) else ""
    keys: list[str] = []
    sink = ""
    if name == "wandb.log" or (name.startswith("wandb.") and attr == "log"):
        sink = "wandb"
        logged = arg(node, 0)
        if isinstance(logged, ast.Dict):
            keys = [str(k.value) for k in logged.keys if isinstance(k, ast.Constant)]
    elif attr in {"add_scalar", "add_scalars"} and node.args:
        sink = "tensorboard"
        tag = literal(node.args[0])
        if isinstance(tag, str):
            keys = [tag]
    out: list[tuple[str, str, str]] = []
    for key in keys:
        leaf = key.replace("/", " ").replace("-", " ")
        metric = metric_name(key.replace("/", "_"))
        if metric and looks_like_metric(leaf):
            out.append((metric, sink, key))
    return out


def _tensorboard_dirs(calls: list[ast.Call], imports: dict[str, str]) -> set[str]:
    """The log directories of a file's TensorBoard writers (``SummaryWriter("runs/x")``;
    no directory: ``runs``, where the writer makes ``runs/<date>_<host>``; a computed name:
    its static folder). A directory outside the repository is left out."""
    dirs: set[str] = set()
    for node in calls:
        if not (call_name(node, imports) or "").endswith("SummaryWriter"):
            continue
        log_dir = arg(node, 0, "log_dir", "logdir")
        if log_dir is None or literal(log_dir) is None:
            dirs.add("runs")
            continue
        where = static_path(log_dir, imports)
        norm = _output_path(where[0]) if where else None
        if norm:
            dirs.add(norm)
    return dirs


#: How many import levels below an experiment's entry its printed metrics are looked for
#: (``main.py`` -> ``experiments.py`` -> ``training.py`` prints the loss).
IMPORT_DEPTH = 2


def _reached_modules(ctx: DetectContext) -> dict[str, list[str]]:
    """Repository modules each experiment entry imports, up to :data:`IMPORT_DEPTH`
    levels, nearest first (resolved as :func:`~reprobridge.detect._select.resolve_import`
    does)."""
    index = ctx.index
    paths = set(index.py_scan())
    entries = [e for e in ctx.experiment_entries(".py") if e in paths]
    reach: dict[str, list[str]] = {}
    for entry in entries:
        seen, level = {entry}, [entry]
        found: list[str] = []
        for _ in range(IMPORT_DEPTH):
            nxt: list[str] = []
            for path in level:
                for module, names in index.imported_modules(path):
                    for hit in sorted(resolve_import(paths, path, module, names) - seen):
                        seen.add(hit)
                        nxt.append(hit)
            found += nxt
            level = nxt
        reach[entry] = found
    return reach


def _inherited_metrics(
    findings: list[Finding], reach: dict[str, list[str]], index: RepoIndex
) -> list[Finding]:
    """Metrics printed by a module an entry imports, declared for the entry too (the merge
    attaches metrics to an experiment by its entry): a ``train()`` in another module
    prints the loss. The entry's own metric of a name wins, then the nearest module's. A
    print that every call in the entry's code switches off (``Trainer(..., verbose=False)``
    around ``if self.verbose: print(...)``: :mod:`._switched`) is no metric of it."""
    by_file: dict[str, list[Finding[MetricValue]]] = {}
    for f in select(findings, MetricValue):
        by_file.setdefault(f.value.entry, []).append(f)
    out: list[Finding] = []
    for entry, modules in sorted(reach.items()):
        have = {f.key for f in by_file.get(entry, [])}
        # Parsed only for an entry some module of which prints a metric: most import none.
        trees: list[ast.Module] | None = None
        for module in modules:
            for f in by_file.get(module, []):
                if f.key in have:
                    continue
                if trees is None:
                    paths = [entry, *modules]
                    trees = [t for p in paths if (t := index.parse_python(p)) is not None]
                if _off_in(f, index, trees):
                    continue
                have.add(f.key)
                out.append(
                    Finding(
                        kind="metric",
                        key=f.key,
                        value=replace(f.value, entry=entry),
                        evidence=f.evidence,
                        detector=f.detector,
                        confidence="low",
                        note=f"printed by {module}, which {entry} imports"
                        + (f"; {f.note}" if f.note else ""),
                    )
                )
    return out


def _off_in(f: Finding[MetricValue], index: RepoIndex, trees: list[ast.Module]) -> bool:
    """Whether the print behind metric ``f`` is switched off by every call in ``trees``."""
    line = f.evidence[0].line if f.evidence else None
    tree = index.parse_python(f.value.entry) if line else None
    switch = print_switch(tree, line) if tree is not None and line else None
    return switch is not None and switched_off(switch, trees)


#: Bytes of a Python file that may configure the logging level.
_LOG_CONFIG = ("basicConfig", "setLevel", "dictConfig", "fileConfig")


def _shows_info_logs(ctx: DetectContext) -> bool:
    """Whether some Python file of the repository lowers the logging level to INFO where
    it always runs (:func:`~reprobridge.detect.procedure._printed.shows_info_logs`)."""
    trees = []
    for path in ctx.index.python_paths():
        text = ctx.index.try_read_text(path)
        if text and any(word in text for word in _LOG_CONFIG):
            tree = ctx.index.parse_python(path)
            if tree is not None:
                trees.append(tree)
    return shows_info_logs(trees)


class OutputsMetricsDetector(Detector):
    """Output files and metric candidates of Python sources (see module docstring)."""

    name = "outputs"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        index = ctx.index
        findings: list[Finding] = []
        reach = _reached_modules(ctx)
        extra = {m for mods in reach.values() for m in mods}
        info_logs = _shows_info_logs(ctx)
        paths = sorted(procedure_files(ctx, _CANDIDATE_RE, self.name, extra=extra))
        for path, tree in ctx.python_trees(paths):
            with ctx.skip_too_deep(path):
                findings.extend(self._file(path, tree, info_logs))
        return findings + _inherited_metrics(findings, reach, index)

    def _file(self, path: str, tree: ast.Module, info_logs: bool) -> list[Finding]:
        imports = import_map(tree)
        outputs: dict[str, tuple[int, bool]] = {}
        metrics: dict[str, _Metric] = {}
        calls: list[ast.Call] = nodes_of(tree, ast.Call)
        dumps: list[ast.Call] = []
        logged: dict[str, tuple[int, str]] = {}
        scalars: dict[str, tuple[int, str]] = {}  # TensorBoard add_scalar: name -> line, tag
        printed: list[PrintedMetric] = []
        messages = message_formats(tree)
        for node in calls:
            self._output(node, imports, outputs)
            shown = printed_line(node, imports, messages, info_logs=info_logs)
            if shown is not None:
                printed.extend(line_metrics(shown))
            if call_name(node, imports) == "json.dump" and len(node.args) >= 2:
                dumps.append(node)
            for name, sink, key in _logged(node, imports):
                logged.setdefault(name, (node.lineno, sink))
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "add_scalar":
                    scalars.setdefault(name, (node.lineno, key))
        for m in keep_metrics(sorted(printed, key=lambda m: (m.line, m.name))):
            metrics[m.name] = _Metric(
                m.name,
                {"regex": m.regex},
                m.line,
                "medium" if m.labelled else "low",
                m.note
                or ("printed" if m.labelled else "printed without a label: named after the value"),
            )
        tb_dirs = _tensorboard_dirs(calls, imports) if scalars else set()
        if len(tb_dirs) == 1:
            # One writer's directory: its scalars are read from the event files (check.py).
            (tb_dir,) = tb_dirs
            for name, (line, tag) in sorted(scalars.items()):
                metrics.setdefault(
                    name,
                    _Metric(
                        name,
                        {"file": tb_dir, "key": tag},
                        line,
                        "low",
                        f"TensorBoard scalar {tag!r}, read from the event files under {tb_dir}",
                    ),
                )
        # Only the scopes that dump JSON are walked again, for their file handles and dicts.
        functions = nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef)
        scopes: dict[int, tuple[list[ast.stmt], list[ast.Call]]] = {}
        for dump in dumps:
            inner = [f for f in functions if f.lineno <= dump.lineno <= (f.end_lineno or f.lineno)]
            body = max(inner, key=lambda f: f.lineno).body if inner else tree.body
            scopes.setdefault(id(body), (body, []))[1].append(dump)
        for body, scope_dumps in scopes.values():
            self._json_scope(body, scope_dumps, imports, metrics)
        findings: list[Finding] = []
        for out_path, (line, partial) in sorted(outputs.items(), key=lambda kv: (kv[1][0], kv[0])):
            findings.append(
                Finding(
                    kind="output",
                    key=f"{path}::{out_path}",
                    value=OutputValue(path, out_path),
                    evidence=(Evidence(path, line),),
                    detector=self.name,
                    confidence="low" if partial else "medium",
                    note="directory: the file name is computed at run time" if partial else "",
                )
            )
        for name, (line, sink) in sorted(logged.items()):
            findings.append(
                Finding(
                    kind="logged_metric",
                    key=name,
                    value=LoggedMetricValue(path, name, sink),
                    evidence=(Evidence(path, line),),
                    detector=self.name,
                    confidence="medium",
                )
            )
        for metric in sorted(metrics.values(), key=lambda m: (m.line, m.name)):
            findings.append(
                Finding(
                    kind="metric",
                    key=metric.name,
                    value=MetricValue(path, MetricSource(**metric.source)),
                    evidence=(Evidence(path, metric.line),),
                    detector=self.name,
                    confidence="medium" if metric.confidence == "medium" else "low",
                    note=metric.note,
                )
            )
        return findings

    def _json_scope(
        self,
        body: list[ast.stmt],
        dumps: list[ast.Call],
        imports: dict[str, str],
        metrics: dict[str, _Metric],
    ) -> None:
        """Metrics of the dicts that ``dumps`` (``json.dump`` calls in ``body``) write."""
        handles: dict[str, list[tuple[int, str]]] = {}  # name -> [(line, path)] of open(..., "w")
        nodes = list(walk_shallow(body))
        dict_keys = _scope_dict_keys(nodes)
        for node in nodes:
            if isinstance(node, ast.With | ast.AsyncWith):
                for item in node.items:
                    written = self._opened(item.context_expr, imports)
                    if written and not written[1] and isinstance(item.optional_vars, ast.Name):
                        handles.setdefault(item.optional_vars.id, []).append(
                            (node.lineno, written[0])
                        )
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                written = self._opened(node.value, imports)
                if written and not written[1]:
                    handles.setdefault(node.targets[0].id, []).append((node.lineno, written[0]))
        for node in dumps:
            target = self._dump_target(node.args[1], node.lineno, handles, imports)
            if target is None:
                continue
            obj = node.args[0]
            keys = (
                _dict_keys(obj)
                if isinstance(obj, ast.Dict)
                else (dict_keys.get(obj.id, []) if isinstance(obj, ast.Name) else [])
            )
            for key in keys:
                leaf = key.rsplit(".", 1)[-1]
                result = looks_like_metric(leaf)
                if not result:
                    continue  # a setting dumped beside the results (lr, batch_size)
                name = metric_name(key)
                if name is None:
                    continue
                previous = metrics.get(name)
                if previous is not None and "file" in previous.source:
                    continue
                note = f"also printed: {previous.source['regex']}" if previous else ""
                metrics[name] = _Metric(
                    name,
                    {"file": target, "key": key},
                    node.lineno,
                    "medium" if result else "low",
                    note,
                )

    def _opened(self, node: ast.expr, imports: dict[str, str]) -> tuple[str, bool] | None:
        """Path of an ``open(path, "w")``-like call that writes, or None."""
        if not isinstance(node, ast.Call):
            return None
        name = call_name(node, imports) or ""
        if name in _OPENS or name.endswith(".open"):
            if (
                name.endswith(".open")
                and name not in _OPENS
                and isinstance(node.func, ast.Attribute)
            ):
                # Path("x").open("w"): the receiver is the path
                mode_node = arg(node, 0, "mode")
                target: ast.expr | None = node.func.value
                if isinstance(target, ast.Call) and target.args:
                    target = (
                        target.args[0]
                        if (call_name(target, imports) or "").endswith("Path")
                        else target
                    )
            else:
                mode_node = arg(node, 1, "mode")
                target = arg(node, 0, "file")
            mode = literal(mode_node)
            if not isinstance(mode, str) or not set(mode) & {"w", "a", "x"} or target is None:
                return None
            where = static_path(target, imports)
            if where is None:
                return None
            norm = _output_path(where[0])
            return (norm, where[1]) if norm else None
        return None

    def _output(
        self, node: ast.Call, imports: dict[str, str], outputs: dict[str, tuple[int, bool]]
    ) -> None:
        name = call_name(node, imports) or ""
        target: ast.expr | None = None
        written = self._opened(node, imports)
        if written:
            outputs.setdefault(written[0], (node.lineno, written[1]))
            return
        if name == "torch.save":
            target = arg(node, 1, "f")
        elif name in _WRITE_FIRST:
            target = arg(node, 0, "file", "fname")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _WRITE_METHODS:
            target = arg(node, 0, "path_or_buf", "fname", "path", "save_directory")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in {
            "write_text",
            "write_bytes",
        }:
            receiver = node.func.value
            if isinstance(receiver, ast.Call) and receiver.args:
                target = receiver.args[0]
            elif isinstance(receiver, ast.BinOp):
                target = receiver
        if target is None:
            return
        where = static_path(target, imports)
        if where is None:
            return
        norm = _output_path(where[0])
        if norm:
            outputs.setdefault(norm, (node.lineno, where[1]))

    def _dump_target(
        self,
        handle: ast.expr,
        line: int,
        handles: dict[str, list[tuple[int, str]]],
        imports: dict[str, str],
    ) -> str | None:
        if isinstance(handle, ast.Name):
            before = [p for ln, p in handles.get(handle.id, []) if ln <= line]
            return before[-1] if before else None
        written = self._opened(handle, imports)
        return written[0] if written and not written[1] else None
