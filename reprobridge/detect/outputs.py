"""Files the experiments write and the metrics they report.

``output`` findings (key ``"<file>::<path>"``): literal paths, or the static directory of
an f-string / ``os.path.join`` / ``Path /`` whose file name is computed, passed to
``open(..., "w"|"a"|"x")``, ``Path(...).write_text``, ``json.dump``/``pickle.dump``/
``yaml.dump`` (through the handle's ``open``), ``torch.save``, ``np.save``/``savez``/
``savetxt``, ``DataFrame.to_csv``/``to_json``/``to_parquet``, ``savefig`` and
``save_pretrained``. Absolute paths and paths outside the repository are not outputs.

``metric`` findings (key: the metric name, ``^[A-Za-z_][A-Za-z0-9_]{0,63}$``):

* printed values — ``print(f"accuracy: {acc:.4f}")``, ``print("test_acc", x)``,
  ``print("acc=%.3f" % a)``, ``"acc={}".format(a)``, ``logger.info("loss=%f", l)``,
  ``tqdm.write``/``click.echo``/``accelerator.print`` — become ``{"regex": ...}`` sources
  matching the printed label and separator and capturing the number (negatives and
  exponents included, see :data:`~reprobridge.detect._text.NUMBER`). A label counts only
  when it names a result (acc, loss, F1, BLEU, perplexity...) and not a setting
  (``block_size``, ``vocab_size``, ``loss_weight``); progress counters (epoch, step, lr,
  time...) never do.
* keys of a dict dumped with ``json.dump`` to a literal file — a dict literal, or a name
  built in the same function from a literal, ``d["k"] = ...`` or ``d.update(...)`` —
  become ``{"file": path, "key": dotted key}`` sources; within one file such a source is
  preferred to a printed regex of the same name.

``logged_metric`` findings (key: the metric name): results logged only to an experiment
tracker — ``wandb.log({...})`` keys, TensorBoard ``add_scalar`` tags — which the auditor
cannot read from the run's log; the merge says so in the guide.

Confidence: medium when the label names a result, low otherwise.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from reprobridge.detect._pyast import (
    call_name,
    dotted,
    import_map,
    kwarg,
    literal,
    nodes_of,
    static_path,
    walk_shallow,
)
from reprobridge.detect._select import procedure_files
from reprobridge.detect._text import (
    is_counter_label,
    label_regex,
    looks_like_metric,
    metric_name,
)
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding

#: A file is parsed only when its bytes show a write call or a printed ``label<sep>value``
#: (``acc: {``, ``loss=%``, ``"test_acc", x``); ``print(`` and ``logging`` alone are in
#: nearly every file.
_CANDIDATE_RE = re.compile(
    rb"\.dump\(|\.save\(|\.savez|savetxt|savefig|\.to_(?:csv|json|parquet|pickle)\(|"
    rb"save_pretrained|write_(?:text|bytes)\(|open\([^)\n]*[\"'][rwabt+]*[wax]|"
    rb"\w[ \t]*[:=][ \t]*(?:\{|%)|\w[\"'][ \t]*,|wandb|add_scalars?\("
)
_WRITE_FIRST = frozenset({"numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt"})
_WRITE_METHODS = frozenset(
    {"to_csv", "to_json", "to_parquet", "to_pickle", "savefig", "save_pretrained"}
)
_DUMPS = frozenset({"json.dump", "pickle.dump", "yaml.dump", "yaml.safe_dump", "torch.save"})
_OPENS = frozenset({"open", "io.open", "codecs.open", "gzip.open", "bz2.open"})
_LOG_METHODS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "log"})
_PRINTF_RE = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")
_FORMAT_RE = re.compile(r"\{[^{}]*\}")
_LABEL_RE = re.compile(r"(?P<label>\w[\w@/.\- ]*?)\s*(?P<sep>[:=]?)\s*$")
_DELIMS_RE = re.compile(r"[|,;()\[\]{}\t<>]")
_NOT_OUTPUT = ("/", "~", "..", "-")


@dataclass(frozen=True)
class _Metric:
    name: str
    source: dict[str, str]
    line: int
    confidence: str
    note: str = ""


def _norm(path: str) -> str | None:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    path = path.rstrip("/")
    if not path or path.startswith(_NOT_OUTPUT) or "$" in path or "\n" in path or path == ".":
        return None
    return path


# -- printed metrics -----------------------------------------------------------------------

Token = tuple[str, str]  # ("text", literal) or ("value", "")


def _split_format(text: str, pattern: re.Pattern[str]) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    for match in pattern.finditer(text):
        if match.group(0) in {"%%", "{{", "}}"}:
            continue
        tokens.append(("text", text[pos : match.start()]))
        tokens.append(("value", ""))
        pos = match.end()
    tokens.append(("text", text[pos:]))
    return tokens


def _tokens(node: ast.expr) -> list[Token]:
    """What ``node`` prints, as literal text and computed values."""
    value = literal(node)
    if isinstance(value, str):
        return [("text", value)]
    if isinstance(node, ast.JoinedStr):
        out: list[Token] = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                out.append(("text", part.value))
            else:
                out.append(("value", ""))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = literal(node.left)
        if isinstance(fmt, str):
            return _split_format(fmt, _PRINTF_RE)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        fmt = literal(node.func.value)
        if isinstance(fmt, str):
            return _split_format(fmt, _FORMAT_RE)
    return [("value", "")]


def _print_tokens(call: ast.Call, imports: dict[str, str]) -> list[Token] | None:
    name = call_name(call, imports) or ""
    func = call.func
    if name in {"print", "tqdm.write", "tqdm.tqdm.write", "click.echo", "click.secho"} or (
        isinstance(func, ast.Attribute) and func.attr == "print"
    ):
        sep_value = literal(kwarg(call, "sep"))
        sep = sep_value if isinstance(sep_value, str) else " "
        tokens: list[Token] = []
        for i, arg in enumerate(call.args):
            if i:
                tokens.append(("text", sep))
            tokens.extend(_tokens(arg))
        return tokens
    if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS:
        owner = func.value.func if isinstance(func.value, ast.Call) else func.value
        receiver = (dotted(owner) or "").lower()  # logger.info, logging.getLogger().info
        if "log" not in receiver or not call.args:
            return None
        args = call.args[1:] if func.attr == "log" else call.args
        if not args:
            return None
        fmt = literal(args[0])
        if isinstance(fmt, str) and len(args) > 1:
            return _split_format(fmt, _PRINTF_RE)
        return _tokens(args[0])
    return None


def printed_metrics(tokens: list[Token]) -> list[tuple[str, str, bool]]:
    """(label, regex, names a result) for every ``label<sep>value`` in printed tokens."""
    found: list[tuple[str, str, bool]] = []
    text = ""
    for kind, part in tokens:
        if kind == "text":
            text += part
            continue
        tail = _DELIMS_RE.split(text)[-1]
        text = ""
        match = _LABEL_RE.search(tail)
        if not match:
            continue
        words = match.group("label").strip(" -./").split()[-4:]
        label = " ".join(words)
        if not label or is_counter_label(label):
            continue
        sep = match.group("sep")
        result = looks_like_metric(label)
        if not result:
            continue  # block_size: 8, vocab_size: 65 are settings, not results
        found.append((label, label_regex(label, sep), result))
    return found


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


def _logged(node: ast.Call, imports: dict[str, str]) -> list[tuple[str, str]]:
    """(metric name, sink) of result-like values a call logs to an experiment tracker:
    ``wandb.log({"val_acc": a})`` (``run.log`` of a ``wandb`` run too) and TensorBoard's
    ``writer.add_scalar("test/acc", a)`` / ``add_scalars``."""
    name = call_name(node, imports) or ""
    func = node.func
    attr = func.attr if isinstance(func, ast.Attribute) else ""
    keys: list[str] = []
    sink = ""
    if name == "wandb.log" or (name.startswith("wandb.") and attr == "log"):
        sink = "wandb"
        arg = node.args[0] if node.args else None
        if isinstance(arg, ast.Dict):
            keys = [str(k.value) for k in arg.keys if isinstance(k, ast.Constant)]
    elif attr in {"add_scalar", "add_scalars"} and node.args:
        sink = "tensorboard"
        tag = literal(node.args[0])
        if isinstance(tag, str):
            keys = [tag]
    out: list[tuple[str, str]] = []
    for key in keys:
        leaf = key.replace("/", " ").replace("-", " ")
        metric = metric_name(key.replace("/", "_"))
        if metric and looks_like_metric(leaf):
            out.append((metric, sink))
    return out


class OutputsMetricsDetector(Detector):
    """Output files and metric candidates of Python sources (see module docstring)."""

    name = "outputs"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        index = ctx.index
        findings: list[Finding] = []
        for path in sorted(procedure_files(ctx, _CANDIDATE_RE, self.name)):
            tree = index.parse_python(path)
            if tree is None:
                continue
            try:
                findings.extend(self._file(path, tree))
            except RecursionError:  # pathologically nested expressions (generated code)
                ctx.warn("skipped: expressions nested too deeply to analyse", path)
        return findings

    def _file(self, path: str, tree: ast.Module) -> list[Finding]:
        imports = import_map(tree)
        outputs: dict[str, tuple[int, bool]] = {}
        metrics: dict[str, _Metric] = {}
        calls: list[ast.Call] = nodes_of(tree, ast.Call)
        dumps: list[ast.Call] = []
        logged: dict[str, tuple[int, str]] = {}
        for node in calls:
            self._output(node, imports, outputs)
            tokens = _print_tokens(node, imports)
            if tokens is not None:
                for label, regex, result in printed_metrics(tokens):
                    name = metric_name(label)
                    if name and name not in metrics:
                        metrics[name] = _Metric(
                            name,
                            {"regex": regex},
                            node.lineno,
                            "medium" if result else "low",
                            "printed",
                        )
            if call_name(node, imports) == "json.dump" and len(node.args) >= 2:
                dumps.append(node)
            for name, sink in _logged(node, imports):
                logged.setdefault(name, (node.lineno, sink))
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
                    value={"entry": path, "path": out_path},
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
                    value={"entry": path, "name": name, "sink": sink},
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
                    value={"entry": path, "source": dict(metric.source)},
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
                mode_node = node.args[0] if node.args else kwarg(node, "mode")
                target: ast.expr | None = node.func.value
                if isinstance(target, ast.Call) and target.args:
                    target = (
                        target.args[0]
                        if (call_name(target, imports) or "").endswith("Path")
                        else target
                    )
            else:
                mode_node = node.args[1] if len(node.args) > 1 else kwarg(node, "mode")
                target = node.args[0] if node.args else kwarg(node, "file")
            mode = literal(mode_node)
            if not isinstance(mode, str) or not set(mode) & {"w", "a", "x"} or target is None:
                return None
            where = static_path(target, imports)
            if where is None:
                return None
            norm = _norm(where[0])
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
            target = node.args[1] if len(node.args) > 1 else kwarg(node, "f")
        elif name in _WRITE_FIRST:
            target = node.args[0] if node.args else kwarg(node, "file") or kwarg(node, "fname")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _WRITE_METHODS:
            target = (
                node.args[0]
                if node.args
                else (
                    kwarg(node, "path_or_buf")
                    or kwarg(node, "fname")
                    or kwarg(node, "path")
                    or kwarg(node, "save_directory")
                )
            )
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
        norm = _norm(where[0])
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
