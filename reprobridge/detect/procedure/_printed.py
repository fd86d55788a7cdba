"""What a program prints, and the metrics a printed line carries.

Shared by the outputs detector (``.py`` files) and the notebooks detector (code cells), so
a script and a notebook that print the same line get the same metric.

:func:`printed_line` turns a print-like call into a :class:`Printed` line: literal text and
computed values in order, each value with its expression and format spec. Print-like:
``print`` (also ``accelerator.print``, ``console.print``), ``tqdm.write`` and a progress
bar's ``write`` (``trange.write``, ``pbar.write``), ``set_description``/``set_postfix`` of
a bar, ``click.echo``, and the logging methods of a logger (``logger.info("loss=%f", l)``).
Formats: f-strings, ``%`` with a tuple, a dict or one value, ``str.format`` with
positional, numbered or keyword fields. A message built into a variable first
(``log_message = 'Iter {:04d} | Loss {:.6f}'.format(itr, loss)`` then
``logger.info(log_message)``) prints the format it was last given before the call, in
the same function (:func:`message_formats`); so does the dict a progress bar's postfix
shows (``logs = {"loss": l, "step": s}`` then ``pbar.set_postfix(**logs)``, the loop of
diffusers-style training scripts), besides ``set_postfix(loss=l)`` and
``set_postfix({"loss": l})``.

:func:`line_metrics` finds the metrics of one printed line, of two strengths:

* labelled — a value after a label that names a result (``val loss: {l}``, ``"Accuracy:",
  acc``, ``Loss (averaged): {l}``): the regex is the label, its separator and the number
  (:func:`~reprobridge.detect._text.label_regex`);
* named after the expression — a value printed without any label (``print(t,
  loss.item())``, ``"%-20s: %.4f" % (name, accuracy_score(y, p))``, ``"Epoch {}:
  {:.3f}".format(e, avg_loss)``) whose expression names a result (``loss``, ``accuracy``,
  ``avg_loss``): the regex is the printed line itself, anchored at both ends where the
  call prints whole lines, literal text as printed and the other values as fields. Any
  line of the same shape matches it, so these are weaker: callers keep them only when
  the file or notebook prints no labelled metric at all (:func:`keep_metrics`).

:func:`output_metrics` finds the labelled metrics of printed text itself (a notebook's saved
output), by the same rules.

A labelled whole number printed as a count out of a total (``final score: 967/2000 =
48.35% correct``, ``Accuracy: 9800/10000 (98%)``) is read as the percentage printed after
it: a count is not comparable across runs that evaluate different numbers of examples,
and a reader reports the fraction. With no percentage on the line the metric is
``<label>_count`` and its note says what it is (:func:`~reprobridge.detect._text.count_of_total`).

Either way the value is read from the run's log by check.py, which takes the LAST match
(a running log's final value). A value printed as an object (``loss {loss}`` with a
tensor prints ``loss tensor(0.25, grad_fn=...)``; micrograd's ``Value(data=0.25,
grad=0)``) is matched inside its constructor text too, when the expression is a bare name,
attribute or subscript printed without a format spec. Settings (``block_size``,
``vocab_size``, ``loss_weight``) and counters (epoch, step, lr) are never metrics, labelled
or not.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from reprobridge.detect._pyast import call_name, dotted, kwarg, literal, nodes_of, walk_shallow
from reprobridge.detect._text import (
    NUMBER,
    count_of_total,
    label_regex,
    looks_like_metric,
    result_name,
)

_PRINTF_RE = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-+ #0]*(?P<width>\*|\d+)?(?:\.(?:\*|\d+))?"
    r"(?P<conv>[diouxXeEfFgGcrsa%])"
)
_FORMAT_RE = re.compile(r"\{\{|\}\}|\{(?P<field>[^{}:!]*)(?:![rsa])?(?::(?P<spec>[^{}]*))?\}")
_LABEL_RE = re.compile(r"(?P<label>\w[\w@/.\- ]*?)\s*(?P<sep>[:=]?)\s*$")
#: ``Loss (averaged): `` — a label qualified by a parenthesised word or two.
_PAREN_LABEL_RE = re.compile(
    r"(?P<label>[^\W\d][\w@/.\-]*(?: [\w@/.\-]+){0,3} ?\([\w\- ]{1,30}\))\s*(?P<sep>[:=]?)\s*$"
)
_DELIMS_RE = re.compile(r"[|,;()\[\]{}\t<>]")
#: ``label: value`` / ``label = value`` in a printed line (label may contain spaces).
_OUTPUT_RE = re.compile(
    r"(?<![\w@./\-])(?P<label>[^\W\d_][\w@./\- ]{0,40}?)\s*(?P<sep>[:=])\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])"
)
_PRINTS = frozenset(
    {"print", "tqdm.write", "tqdm.tqdm.write", "tqdm.auto.tqdm.write", "click.echo", "click.secho"}
)
_LOG_METHODS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "log"})
#: Receivers whose ``write`` prints a line (a progress bar's), not to a file.
_BAR_RE = re.compile(r"(?i)(?:tqdm|trange|pbar|progress|bar)")
_BAR_TEXT = frozenset({"set_description", "set_description_str", "set_postfix_str"})
#: Attribute and call wrappers that do not change what a value is (``loss.item()``).
_SAME_ATTRS = frozenset(
    {"item", "data", "detach", "cpu", "numpy", "tolist", "value", "val", "avg", "mean", "sum"}
)
_SAME_CALLS = frozenset({"float", "round", "int", "abs", "mean", "average", "nanmean", "asscalar"})
#: A value printed as an object: ``tensor(0.25``, ``Value(data=0.25``, ``array(0.25``, or
#: as a one-element numpy array, ``[11.]`` (a vectorised environment's return); an array of
#: several values (``[1. 2.]``) is not one number, so the bracket must close after it.
_WRAP_HEAD = r"(?:[A-Za-z_]\w*\((?:data=)?|\[[ \t]*(?=[-+.\deE]+[ \t]*\]))?"
_WRAP_TAIL = r"(?:,[^)\n]*)?[)\]]?"
_LINE_END = r"[ \t\r]*$"
#: Functions that return a metric (sklearn.metrics: accuracy_score, mean_squared_error).
_METRIC_FUNC_RE = re.compile(r"(?:_score|_error)$")


@dataclass(frozen=True)
class Token:
    """Literal text (``text`` set) or a computed value (``text`` None): its expression,
    its format spec or ``%`` conversion, and whether it is a bare ``print`` argument
    (``str()`` of an object: no format, so no padding)."""

    text: str | None
    node: ast.expr | None = None
    spec: str = ""
    loose: bool = False


@dataclass(frozen=True)
class Printed:
    """One printed text; ``starts_line``/``ends_line``: the call writes it at the start
    of a line / ends the line after it (``print`` both; a log record has a prefix)."""

    tokens: tuple[Token, ...]
    starts_line: bool
    ends_line: bool
    line: int


@dataclass(frozen=True)
class PrintedMetric:
    """A metric candidate: its name, the regex reading it from the log, whether a
    printed label names it (else the printed expression does), and what a reader of the
    manifest should know about it (``note``, empty when nothing)."""

    name: str
    regex: str
    labelled: bool
    line: int
    note: str = ""


# -- tokens ------------------------------------------------------------------------------


def _merge(tokens: Iterable[Token]) -> list[Token]:
    out: list[Token] = []
    for tok in tokens:
        if tok.text is not None and out and out[-1].text is not None:
            out[-1] = Token(out[-1].text + tok.text)
        elif tok.text != "":
            out.append(tok)
    return out


def _printf(fmt: str, rhs: ast.expr) -> list[Token]:
    args: list[ast.expr] = list(rhs.elts) if isinstance(rhs, ast.Tuple) else [rhs]
    mapping: dict[str, ast.expr] = {}
    if isinstance(rhs, ast.Dict):
        args = []
        for k, v in zip(rhs.keys, rhs.values, strict=True):
            key = literal(k) if k is not None else None
            if isinstance(key, str):
                mapping[key] = v
    tokens: list[Token] = []
    pos, i = 0, 0
    for m in _PRINTF_RE.finditer(fmt):
        tokens.append(Token(fmt[pos : m.start()]))
        pos = m.end()
        if m.group("conv") == "%":
            tokens.append(Token("%"))
            continue
        if m.group("width") == "*":
            i += 1
        node: ast.expr | None
        if m.group("key") is not None:
            node = mapping.get(m.group("key"))
        else:
            node = args[i] if i < len(args) else None
            i += 1
        width = m.group("width") or ""
        tokens.append(Token(None, node, width + m.group("conv")))
    tokens.append(Token(fmt[pos:]))
    return tokens


def _str_format(fmt: str, call: ast.Call) -> list[Token]:
    kwargs = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    tokens: list[Token] = []
    pos, auto = 0, 0
    for m in _FORMAT_RE.finditer(fmt):
        tokens.append(Token(fmt[pos : m.start()]))
        pos = m.end()
        if m.group(0) in {"{{", "}}"}:
            tokens.append(Token(m.group(0)[0]))
            continue
        field = (m.group("field") or "").strip()
        node: ast.expr | None = None
        if field == "":
            node = call.args[auto] if auto < len(call.args) else None
            auto += 1
        elif field.isdigit():
            node = call.args[int(field)] if int(field) < len(call.args) else None
        elif field.isidentifier():
            node = kwargs.get(field)
        tokens.append(Token(None, node, m.group("spec") or ""))
    tokens.append(Token(fmt[pos:]))
    return tokens


def _tokens(node: ast.expr, *, loose: bool = False) -> list[Token]:
    """What ``node`` prints, as literal text and computed values."""
    value = literal(node)
    if isinstance(value, str):
        return [Token(value)]
    if isinstance(node, ast.JoinedStr):
        out: list[Token] = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                out.append(Token(part.value))
            elif isinstance(part, ast.FormattedValue):
                spec = part.format_spec
                text = ""
                if isinstance(spec, ast.JoinedStr) and all(
                    isinstance(s, ast.Constant) for s in spec.values
                ):
                    text = "".join(str(s.value) for s in spec.values if isinstance(s, ast.Constant))
                out.append(Token(None, part.value, text))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = literal(node.left)
        if isinstance(fmt, str):
            return _printf(fmt, node.right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        fmt = literal(node.func.value)
        if isinstance(fmt, str):
            return _str_format(fmt, node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [*_tokens(node.left, loose=loose), *_tokens(node.right, loose=loose)]
    return [Token(None, node, "", loose)]


def _is_format(node: ast.expr) -> bool:
    """Whether ``node`` builds a string from a format: an f-string with a value, ``"..." %
    x`` or ``"...".format(...)``."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return isinstance(literal(node.left), str)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(literal(node.func.value), str)
    )


def message_formats(tree: ast.Module) -> dict[int, ast.expr]:
    """For each variable a call reads (by the ``id`` of its ``Name`` node), the format it
    was last assigned before that call in the same function or module body
    (``msg = "loss {:.3f}".format(l)``): the line a ``print(msg)`` or ``logger.info(msg)``
    writes. Other assignments (``msg = extend(msg)``) do not replace the format: what
    they add follows it."""
    found: dict[int, ast.expr] = {}
    scopes: list[list[ast.stmt]] = [tree.body]
    scopes += [f.body for f in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef)]
    for body in scopes:
        built: dict[str, list[tuple[int, ast.expr]]] = {}
        dicts: dict[str, list[tuple[int, ast.expr]]] = {}
        calls: list[ast.Call] = []
        for node in walk_shallow(body):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                name = node.targets[0].id
                if _is_format(node.value):
                    built.setdefault(name, []).append((node.lineno, node.value))
                elif _dict_items(node.value) is not None:
                    dicts.setdefault(name, []).append((node.lineno, node.value))
            elif isinstance(node, ast.Call):
                calls.append(node)
        for call in calls:
            # A dict is what a progress bar's postfix shows: ``set_postfix(**logs)``.
            postfix = isinstance(call.func, ast.Attribute) and call.func.attr == "set_postfix"
            named = [(a, built) for a in call.args]
            named += [(a, dicts) for a in call.args[:1] if postfix]
            named += [(k.value, dicts) for k in call.keywords if k.arg is None and postfix]
            for arg, assigned in named:
                if isinstance(arg, ast.Name) and arg.id in assigned:
                    before = [(line, v) for line, v in assigned[arg.id] if line < call.lineno]
                    if before:
                        found[id(arg)] = max(before, key=lambda b: b[0])[1]
    return found


def _dict_items(node: ast.expr) -> list[tuple[str, ast.expr]] | None:
    """The string keys and values of a dict built in place (``{"loss": l}``,
    ``dict(loss=l)``); None for anything else. Keys that are not literal strings are left
    out (``{**other}``, ``{k: v}``)."""
    if isinstance(node, ast.Dict):
        return [
            (key, value)
            for k, value in zip(node.keys, node.values, strict=True)
            if k is not None and isinstance(key := literal(k), str)
        ]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [(k.arg, k.value) for k in node.keywords if k.arg is not None]
    return None


def _postfix(call: ast.Call) -> Printed | None:
    """What a progress bar's ``set_postfix`` shows: ``key=value`` pairs joined by ", ",
    from its keywords (``refresh`` is its own), a dict as its first argument and ``**``
    of a dict (:func:`message_formats` puts a variable's dict in place)."""
    items: list[tuple[str, ast.expr]] = []
    for node in call.args[:1]:
        items += _dict_items(node) or []
    for kw in call.keywords:
        if kw.arg is None:
            items += _dict_items(kw.value) or []
        elif kw.arg != "refresh":
            items.append((kw.arg, kw.value))
    tokens: list[Token] = []
    for key, value in items:
        tokens += [Token((", " if tokens else "") + f"{key}="), Token(None, value)]
    return Printed(tuple(_merge(tokens)), False, False, call.lineno) if tokens else None


#: Levels below the root logger's default (WARNING): what they log is dropped unless the
#: program lowers the level.
_QUIET_LEVELS = frozenset({"info", "debug"})
#: Levels a configuration may set that still drop INFO.
_LOUD_LEVELS = frozenset({"WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"})


def _lowers_level(call: ast.Call) -> bool:
    """Whether ``call`` configures logging to show INFO: ``basicConfig(level=...)``,
    ``setLevel(...)`` (a level other than WARNING and above), ``dictConfig``/``fileConfig``."""
    name = (dotted(call.func) or "").rsplit(".", 1)[-1]
    if name in ("dictConfig", "fileConfig"):
        return True
    if name == "basicConfig":
        level = kwarg(call, "level")
    elif name == "setLevel" and call.args:
        level = call.args[0]
    else:
        return False
    if level is None:
        return False
    shown = dotted(level) or literal(level)
    return not (isinstance(shown, str) and shown.rsplit(".", 1)[-1].upper() in _LOUD_LEVELS)


def shows_info_logs(trees: Iterable[ast.Module]) -> bool:
    """Whether any of ``trees`` lowers the logging level to INFO where it always runs: a
    configuring call (:func:`_lowers_level`) at a module's or a function's top level, not
    under an ``if`` (``if args.debug: logging.getLogger().setLevel(logging.INFO)`` leaves
    a default run at WARNING, so its ``logging.info`` lines print nothing)."""
    for tree in trees:
        bodies: list[list[ast.stmt]] = [tree.body]
        bodies += [f.body for f in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef)]
        for body in bodies:
            for stmt in body:
                for node in walk_shallow([stmt]):
                    if isinstance(node, ast.If):
                        break
                    if isinstance(node, ast.Call) and _lowers_level(node):
                        return True
    return False


def printed_line(
    call: ast.Call,
    imports: dict[str, str],
    messages: dict[int, ast.expr] | None = None,
    *,
    info_logs: bool = True,
) -> Printed | None:
    """The line a print-like call writes (module docstring), or None for any other call;
    ``messages`` are the formats variables it prints hold (:func:`message_formats`).
    ``info_logs`` False: the program never lowers the logging level
    (:func:`shows_info_logs`), so ``logging.info``/``logging.debug`` on the root logger
    (the ``logging`` module's own functions) print nothing."""
    if messages:
        args = [messages.get(id(a), a) for a in call.args]
        keywords = [
            ast.keyword(arg=k.arg, value=messages[id(k.value)]) if id(k.value) in messages else k
            for k in call.keywords
        ]
        if any(a is not b for a, b in zip(args, call.args, strict=True)) or any(
            a is not b for a, b in zip(keywords, call.keywords, strict=True)
        ):
            call = ast.copy_location(ast.Call(func=call.func, args=args, keywords=keywords), call)
    name = call_name(call, imports) or ""
    func = call.func
    attr = func.attr if isinstance(func, ast.Attribute) else ""
    receiver = (dotted(func.value) or "") if isinstance(func, ast.Attribute) else ""
    if name in _PRINTS or attr == "print" or (attr == "write" and _BAR_RE.search(receiver)):
        sep_value = literal(kwarg(call, "sep"))
        sep = sep_value if isinstance(sep_value, str) else " "
        end = kwarg(call, "end")
        tokens: list[Token] = []
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return None
            if i:
                tokens.append(Token(sep))
            tokens.extend(_tokens(arg, loose=True))
        ends = end is None or literal(end) == "\n"
        return Printed(tuple(_merge(tokens)), True, ends, call.lineno)
    if attr in _BAR_TEXT and call.args:
        return Printed(tuple(_merge(_tokens(call.args[0]))), False, False, call.lineno)
    if attr == "set_postfix":
        return _postfix(call)
    if attr in _LOG_METHODS and isinstance(func, ast.Attribute):
        owner = func.value.func if isinstance(func.value, ast.Call) else func.value
        if "log" not in (dotted(owner) or "").lower() or not call.args:
            return None  # logger.info, logging.getLogger().info; not "err.info"
        if not info_logs and attr in _QUIET_LEVELS and name.startswith("logging."):
            return None  # the root logger at its default WARNING level drops it
        args = call.args[1:] if attr == "log" else call.args
        if not args:
            return None
        fmt = literal(args[0])
        if isinstance(fmt, str) and len(args) > 1:
            rest = args[1:]
            rhs: ast.expr = rest[0] if len(rest) == 1 else ast.Tuple(elts=rest, ctx=ast.Load())
            tokens = _printf(fmt, rhs)
        else:
            tokens = _tokens(args[0])
        return Printed(tuple(_merge(tokens)), False, True, call.lineno)
    return None


# -- naming a value ---------------------------------------------------------------------


def _singular(name: str) -> str:
    """``losses`` -> ``loss``, ``accs`` -> ``acc`` when only the singular names a result."""
    if looks_like_metric(name):
        return name
    for cut in ("es", "s"):
        if name.endswith(cut) and looks_like_metric(name[: -len(cut)]):
            return name[: -len(cut)]
    return name


def expression_name(node: ast.expr | None) -> str | None:
    """The result a printed expression names (``loss.item()`` -> ``loss``,
    ``accuracy_score(y, p)`` -> ``accuracy``, ``losses['val']`` -> ``val_loss``,
    ``np.mean(accs)`` -> ``acc``), when that name looks like a metric and is not a setting
    or a counter; else None."""
    name: str | None = None
    for _ in range(12):
        if node is None:
            return None
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _SAME_ATTRS and not node.args:
                node = func.value  # loss.item(), acc.mean()
                continue
            called = dotted(func) or ""
            leaf = called.rsplit(".", 1)[-1]
            if leaf in _SAME_CALLS | _SAME_ATTRS and node.args:  # float(x), np.mean(accs)
                node = node.args[0]
                continue
            name = re.sub(r"^(?:get|compute|calc|calculate|eval|evaluate)_|_score$", "", leaf)
            break
        if isinstance(node, ast.Attribute):
            if node.attr in _SAME_ATTRS:
                node = node.value
                continue
            name = node.attr
            break
        if isinstance(node, ast.Subscript):
            key = literal(node.slice)
            if isinstance(key, str):
                base = expression_name(node.value)
                name = f"{key}_{base}" if base and not looks_like_metric(key) else key
                break
            node = node.value
            continue
        if isinstance(node, ast.Name):
            name = node.id
            break
        if isinstance(node, ast.UnaryOp):
            node = node.operand
            continue
        if isinstance(node, ast.BinOp):  # acc * 100, loss / n
            node = node.left if not isinstance(node.left, ast.Constant) else node.right
            continue
        return None
    if not name:
        return None
    return result_name(_singular(name))


# -- metrics of a line -------------------------------------------------------------------


def _wrapped(tok: Token) -> bool:
    """A bare object printed with ``str()``: a tensor prints ``tensor(0.25, ...)``."""
    return not tok.spec and isinstance(tok.node, ast.Name | ast.Attribute | ast.Subscript)


def _literal_regex(text: str) -> str:
    parts = re.split(r"([ \t]+)", text)
    return "".join(r"[ \t]+" if p and p.isspace() else re.escape(p) for p in parts)


def _field_regex(tok: Token) -> str:
    spec = tok.spec
    if spec[-1:] in {"d", "i", "u"}:
        return r"[ \t]*[-+]?\d+" if any(c.isdigit() for c in spec) else r"[-+]?\d+"
    if tok.loose:
        return r"\S+"
    return r".*?"


def _line_regex(printed: Printed, target: int) -> str | None:
    """The regex of ``printed``'s line holding the value ``target`` (a token index)."""
    tokens = printed.tokens
    start, end = 0, len(tokens)
    head_text, tail_text = "", ""
    for i in range(target - 1, -1, -1):
        text = tokens[i].text
        if text is not None and "\n" in text:
            start, head_text = i + 1, text.rsplit("\n", 1)[1]
            break
    for i in range(target + 1, len(tokens)):
        text = tokens[i].text
        if text is not None and "\n" in text:
            end, tail_text = i, text.split("\n", 1)[0]
            break
    starts = printed.starts_line or start > 0
    ends = printed.ends_line or end < len(tokens)
    if not starts and head_text == "" and all(t.text is None for t in tokens[start:target]):
        return None  # nothing but the number to find: any line's tail would match
    parts: list[str] = ["^" if starts else "", _literal_regex(head_text)]
    for i in range(start, end):
        tok = tokens[i]
        if tok.text is not None:
            parts.append(_literal_regex(tok.text))
        elif i == target:
            pad = r"[ \t]*" if any(c.isdigit() for c in tok.spec.split(".")[0]) else ""
            wrap = _wrapped(tok)
            parts.append(pad + (_WRAP_HEAD if wrap else "") + NUMBER + (_WRAP_TAIL if wrap else ""))
        else:
            parts.append(_field_regex(tok))
    parts.append(_literal_regex(tail_text))
    if ends:
        parts.append(_LINE_END)
    return "".join(parts)


def _label_of(text: str) -> tuple[str, str] | None:
    """(label, separator) ending ``text`` (the text printed before a value), or None."""
    paren = _PAREN_LABEL_RE.search(text)
    if paren and looks_like_metric(paren.group("label").split("(")[0]):
        return " ".join(paren.group("label").split()[-5:]), paren.group("sep")
    tail = _DELIMS_RE.split(text)[-1]
    match = _LABEL_RE.search(tail)
    if not match:
        return None
    label = " ".join(match.group("label").strip(" -./").split()[-4:])
    return (label, match.group("sep")) if label else None


#: Format specs of a value that prints with a fraction (``.3f``, ``e``, ``%``): no count.
_FRACTIONAL_SPEC = frozenset("fFeEgG%")


def _shown(tok: Token) -> str:
    """A stand-in for what a value prints: a whole number, a decimal or a percentage."""
    if tok.spec[-1:] == "%":
        return "0.5%"
    return "0.5" if tok.spec[-1:] in _FRACTIONAL_SPEC else "0"


def _after(tokens: tuple[Token, ...]) -> str:
    """What ``tokens`` print up to the end of their line, each value as :func:`_shown`."""
    text = "".join(_shown(t) if t.text is None else t.text for t in tokens)
    return text.split("\n", 1)[0]


#: Names of a count or a total (``correct``, ``n_samples``, ``total``, ``num_examples``).
_COUNT_NAME_RE = re.compile(
    r"(?i)(?:^|_)(?:n|num|number|total|count|correct|hits|samples|examples|size|len|length)"
    r"(?:$|_)"
)


def _whole(tok: Token) -> bool:
    """Whether a value prints as a whole number: an integer format, ``len(...)``, or a
    name that says count or total (``correct``, ``total``, ``correct.sum().item()``)."""
    if tok.spec[-1:] in {"d", "i", "u"}:
        return True
    node = tok.node
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        node = node.func.value  # correct.sum().item()
    if isinstance(node, ast.Call):
        return dotted(node.func) == "len"
    leaf = (dotted(node) or "").rsplit(".", 1)[-1] if node is not None else ""
    return bool(_COUNT_NAME_RE.search(leaf))


def _whole_count(tokens: tuple[Token, ...]) -> bool:
    """Whether ``tokens`` (a value, ``/``, a total) show a count: the value or its total
    prints as a whole number, or the total is written in the text (``/10000``)."""
    slash = tokens[1].text if len(tokens) > 1 else None
    if slash is None:
        return False
    if re.match(r"[ \t]*/[ \t]*\d", slash):
        return True
    return _whole(tokens[0]) or (len(tokens) > 2 and _whole(tokens[2]))


def _total_text(tokens: tuple[Token, ...]) -> str:
    """The total printed after ``/`` (``tokens`` start at the slash): ``len(test_set)``
    as written in the code, or the number in the text."""
    slash = tokens[0].text or ""
    written = re.match(r"[ \t]*/[ \t]*(\d+)", slash)
    if written:
        return written.group(1)
    node = tokens[1].node if len(tokens) > 1 else None
    return f"`{ast.unparse(node)}`" if node is not None else "a total"


def _labelled(name: str, label: str, sep: str, printed: Printed, i: int) -> PrintedMetric:
    """The metric ``name`` of the value ``printed.tokens[i]``, printed after ``label``.

    A whole number printed as a count out of a total (``final score: 967/2000 = 48.35%``,
    ``Accuracy: 9800/10000 (98%)``) is read as the percentage printed after it; with none
    on the line it is ``<name>_count``, the count, and the note says so: the total changes
    with the number of examples evaluated (a smoke tier evaluates fewer)."""
    tok = printed.tokens[i]
    wrapped = _wrapped(tok)
    fraction = None
    if tok.spec[-1:] not in _FRACTIONAL_SPEC:
        fraction = count_of_total(_after(printed.tokens[i + 1 :]), wrapped=wrapped)
    if fraction is None:
        value = (_WRAP_HEAD if wrapped else "") + NUMBER
        if not wrapped and (
            tok.spec[-1:] == "%" or _after(printed.tokens[i + 1 :]).startswith("%")
        ):
            # ``acc: 96.47%``: the regex requires the sign, which says the value's scale
            # (a paper's percentage is then compared as printed, not as a fraction)
            value += "%"
        return PrintedMetric(name, label_regex(label, sep, value=value), True, printed.line)
    if not fraction.percent and not _whole_count(printed.tokens[i:]):
        # ``loss: {a}/{b}`` may print two decimals (train/val): read the first, as before.
        value = (_WRAP_HEAD if wrapped else "") + NUMBER
        return PrintedMetric(name, label_regex(label, sep, value=value), True, printed.line)
    regex = label_regex(label, sep, value=fraction.value)
    if fraction.percent:
        note = "printed as a count out of a total: the percentage after it is read"
        return PrintedMetric(name, regex, True, printed.line, note)
    note = (
        f"printed as a count out of {_total_text(printed.tokens[i + 1 :])}, with no "
        "percentage: the count is read, comparable only between runs that evaluate the "
        "same number of examples"
    )
    return PrintedMetric(fraction.metric(name), regex, True, printed.line, note)


def line_metrics(printed: Printed) -> list[PrintedMetric]:
    """The metric candidates of one printed line (module docstring), in print order."""
    found: list[PrintedMetric] = []
    text = ""
    for i, tok in enumerate(printed.tokens):
        if tok.text is not None:
            text += tok.text
            continue
        # Only the text on the value's own line can label it.
        before, text = text.rsplit("\n", 1)[-1], ""
        labelled = _label_of(before)
        if labelled is not None:
            label, sep = labelled
            # A counter or a setting (block_size: 8) labels a value that is no result.
            labelled_name = result_name(label)
            if labelled_name:
                found.append(_labelled(labelled_name, label, sep, printed, i))
            continue
        named = expression_name(tok.node)
        line_regex = _line_regex(printed, i) if named else None
        if named and line_regex:
            found.append(PrintedMetric(named, line_regex, False, printed.line))
    return found


def output_metrics(text: str) -> list[tuple[str, str, str, str]]:
    """(metric name, regex, printed value, matched text) of the result-like lines of
    printed ``text`` (a notebook's saved output): ``label: value`` or ``label = value``
    where the label names a result, read by the rules of :func:`line_metrics`."""
    found: list[tuple[str, str, str, str]] = []
    for line in text.splitlines():
        for match in _OUTPUT_RE.finditer(line):
            label = match.group("label").strip(" -./")
            # Keep only the last words after a separator ("Epoch 3 | val acc" -> "val acc").
            label = re.split(r"[|,;()\[\]]", label)[-1].strip()
            label = " ".join(label.split()[-4:])  # "the net gave ... accuracy" -> its tail
            name = result_name(label)
            if name is None:  # no label, or a counter or setting: no result
                continue
            value, shown = NUMBER, match.group("value")
            # A count out of a total, as in printed code: its percentage, or ``_count``.
            fraction = count_of_total(line[match.end() :]) if shown.isdigit() else None
            if fraction is not None:
                value, name = fraction.value, fraction.metric(name)
            regex = label_regex(label, match.group("sep"), value=value)
            read = re.compile(regex).search(line, match.start())
            if read is not None:
                shown = read.group(1)
            found.append((name, regex, shown, (read or match).group(0)))
    return found


def keep_metrics(candidates: Iterable[PrintedMetric]) -> list[PrintedMetric]:
    """The candidates of one file or notebook worth declaring, first per name: the
    labelled ones; the expression-named ones only when nothing is labelled (a line of
    numbers matches any such line, so a labelled metric is better evidence)."""
    ordered = list(candidates)
    labelled = [c for c in ordered if c.labelled]
    chosen: dict[str, PrintedMetric] = {}
    for c in labelled or ordered:
        chosen.setdefault(c.name, c)
    return list(chosen.values())


def last_expression_metric(tree: ast.Module) -> PrintedMetric | None:
    """A notebook cell ending in an expression that names a result (``loss.item()``,
    ``accuracy_score(y, p)``): Jupyter shows its value alone on a line of the output."""
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    node = tree.body[-1].value
    if isinstance(node, ast.Call):
        leaf = (dotted(node.func) or "").rsplit(".", 1)[-1]
        # A call shows what it returns: a number for loss.item(), float(x) and sklearn's
        # metric functions; often None for a helper that prints (split_loss('val')).
        if leaf not in _SAME_ATTRS | _SAME_CALLS and not _METRIC_FUNC_RE.search(leaf):
            return None
    name = expression_name(node)
    if name is None:
        return None
    printed = Printed((Token(None, node),), True, True, tree.body[-1].lineno)
    regex = _line_regex(printed, 0)
    return PrintedMetric(name, regex, False, printed.line) if regex else None
