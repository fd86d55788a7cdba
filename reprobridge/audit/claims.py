"""Claims between experiments (the conclusion level): a small, safe expression language.

A ``[[claims]] expr`` such as ``mixup-v2.test_accuracy > baseline.test_accuracy + 0.01``
is parsed by a tokenizer and a recursive-descent parser written here; nothing is ever
passed to ``eval`` or :mod:`ast` (experiment ids contain ``-``, which Python would read
as a subtraction, and the manifest is untrusted input).

Grammar (loosest first; ``*`` is repetition)::

    claim      := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)*   # chains as in Python
    sum        := product (("+" | "-") product)*
    product    := unary (("*" | "/") unary)*
    unary      := ("-" | "+") unary | atom
    atom       := NUMBER | REF | "(" claim ")"
                | ("abs") "(" sum ")" | ("min" | "max") "(" sum ("," sum)+ ")"
                | ("mean" | "min_of" | "max_of") "(" REF ")"
    REF        := EXP_ID "." METRIC          # e.g. mixup-v2.test_accuracy

Semantics:

- A reference stands for the values of that metric over the experiment's runs; bare, it is
  their mean (``mean(exp.m)``); ``min_of``/``max_of`` take the smallest/largest run.
- Expressions are typed: arithmetic and comparisons take numbers, ``and``/``or``/``not``
  take truth values, and a claim must be a truth value. Type errors are parse errors.
- Evaluation follows Python: comparison chains (``a < b < c`` is ``a < b and b < c``),
  short-circuit ``and``/``or``, float arithmetic.
- Tokens: an experiment id runs as far as id characters (``[a-z0-9_-]``) go, so
  ``a.x - b.y`` and ``a.x-b.y`` subtract, but in ``a.x - 2-b.y`` the operand is the
  experiment ``2-b``: put spaces around a minus that precedes an id. A number wins a tie
  (``1.e5`` is a number).

Outcomes: :func:`evaluate_claim` answers ``holds`` True or False, or None with a reason when
a referenced value is missing (no run produced it), a division by zero is met (where Python
would raise), or an evaluated intermediate is not finite (an overflow, carried on as
Python does, then reported); None must fail the conclusion level, never pass it. Syntax and type errors raise
:class:`ClaimError` (one line, naming the column).

Significance: ``holds`` is the truth on the values (means over runs). Its ``outcome`` is
``holds`` only when the runs show it: a comparison of two means with two or more runs on
each side must pass Welch's one-sided t test at alpha = 0.05 (else ``holds-not-significant``,
which is not a pass); a claim on single runs, or of a form no test applies to, holds on its
values and ``test`` says so.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from reprobridge.audit.judge import Verdict
from reprobridge.errors import AuditError
from reprobridge.manifest.schema import ID_PATTERN, Claim
from reprobridge.stats import ALPHA, paired_t, welch

#: Longer claims are refused: a claim is one comparison, not a program.
MAX_LENGTH = 4000
#: Nesting depth (parentheses, unary signs, ``not``) beyond which a claim is refused, so a
#: hostile manifest cannot exhaust the interpreter's stack.
MAX_DEPTH = 64

_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_]*")
_NUM = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPS = ("<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", ")", ",")
_KEYWORDS = frozenset({"and", "or", "not"})
_FUNCTIONS = frozenset({"abs", "min", "max"})
_AGGREGATES = frozenset({"mean", "min_of", "max_of"})
_ID = re.compile(ID_PATTERN)
_MISTAKES = {
    "=": "use == to compare",
    "&": "use `and`",
    "|": "use `or`",
    "!": "use `not` (or != to compare)",
    "^": "there is no power operator",
    "%": "there is no modulo operator",
}


class ClaimError(AuditError):
    """A claim that cannot be parsed or type-checked; the message names the column.

    ``column`` is 1-based (0 when the claim as a whole is at fault); ``expr`` the claim.
    """

    def __init__(self, expr: str, column: int, problem: str) -> None:
        where = f"column {column}: " if column else ""
        super().__init__(f"claim {_short(expr)!r}: {where}{problem}")
        self.expr = expr
        self.column = column
        self.problem = problem


def _short(expr: str) -> str:
    return expr if len(expr) <= 120 else expr[:117] + "..."


# -- tokens -------------------------------------------------------------------------------

TokenKind = Literal["num", "ref", "name", "op", "end"]


@dataclass(frozen=True)
class Token:
    """One token: ``kind``, its text, and where it is (``start``/``end`` offsets)."""

    kind: TokenKind
    text: str
    start: int
    end: int


def tokenize(expr: str) -> list[Token]:
    """The tokens of ``expr``, ending with an ``end`` token; ClaimError at a bad character."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(expr):
        char = expr[pos]
        if char.isspace():
            pos += 1
            continue
        ref = _REF.match(expr, pos)
        num = _NUM.match(expr, pos)
        if num and (ref is None or num.end() >= ref.end()):
            tokens.append(Token("num", num.group(), pos, num.end()))
            pos = num.end()
            continue
        if ref:
            exp_id = ref.group().rsplit(".", 1)[0]
            if not _ID.match(exp_id):
                raise ClaimError(
                    expr,
                    pos + 1,
                    f"{exp_id!r} is not an experiment id (lowercase letters, digits, _ and -)",
                )
            tokens.append(Token("ref", ref.group(), pos, ref.end()))
            pos = ref.end()
            continue
        name = _NAME.match(expr, pos)
        if name:
            tokens.append(Token("name", name.group(), pos, name.end()))
            pos = name.end()
            continue
        op = next((o for o in _OPS if expr.startswith(o, pos)), None)
        if op is not None:
            tokens.append(Token("op", op, pos, pos + len(op)))
            pos += len(op)
            continue
        hint = _MISTAKES.get(char)
        problem = f"unexpected character {char!r}" + (f" ({hint})" if hint else "")
        raise ClaimError(expr, pos + 1, problem)
    tokens.append(Token("end", "", len(expr), len(expr)))
    return tokens


# -- syntax tree ----------------------------------------------------------------------------

Kind = Literal["num", "bool"]


@dataclass(frozen=True)
class Node:
    """Base of the syntax tree: ``start``/``end`` offsets into the claim's text."""

    start: int
    end: int

    #: ``num`` or ``bool``: what the node evaluates to.
    kind: ClassVar[Kind] = "num"


@dataclass(frozen=True)
class Num(Node):
    """A number literal."""

    value: float


@dataclass(frozen=True)
class Ref(Node):
    """``exp.metric`` under an aggregate (``mean`` when written bare)."""

    experiment: str
    metric: str
    aggregate: Literal["mean", "min_of", "max_of"]


@dataclass(frozen=True)
class Unary(Node):
    """``-x`` or ``+x``."""

    op: str
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    """``a + b``, ``a - b``, ``a * b``, ``a / b``; ``op_start`` locates the operator."""

    op: str
    left: Node
    right: Node
    op_start: int


@dataclass(frozen=True)
class Call(Node):
    """``abs(x)``, ``min(a, b, ...)``, ``max(a, b, ...)``."""

    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Compare(Node):
    """A comparison chain: ``operands[0] ops[0] operands[1] ops[1] ...``."""

    operands: tuple[Node, ...]
    ops: tuple[str, ...]

    kind: ClassVar[Kind] = "bool"


@dataclass(frozen=True)
class BoolOp(Node):
    """``a and b and ...`` or ``a or b or ...``."""

    op: Literal["and", "or"]
    operands: tuple[Node, ...]

    kind: ClassVar[Kind] = "bool"


@dataclass(frozen=True)
class Not(Node):
    """``not x``."""

    operand: Node

    kind: ClassVar[Kind] = "bool"


@dataclass(frozen=True)
class ClaimAst:
    """A parsed claim: its text, the tree, and the ``(experiment, metric)`` pairs it names."""

    expr: str
    root: Node
    references: frozenset[tuple[str, str]]


class _Parser:
    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.tokens = tokenize(expr)
        self.i = 0
        self.depth = 0
        self.refs: set[tuple[str, str]] = set()

    # helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def fail(self, token: Token, problem: str) -> ClaimError:
        return ClaimError(self.expr, token.start + 1, problem)

    def describe(self, token: Token) -> str:
        return "the end of the claim" if token.kind == "end" else repr(token.text)

    def take(self) -> Token:
        token = self.tok
        self.i += 1
        return token

    def at(self, kind: TokenKind, *texts: str) -> bool:
        return self.tok.kind == kind and (not texts or self.tok.text in texts)

    def expect_op(self, text: str, context: str) -> Token:
        if not self.at("op", text):
            raise self.fail(
                self.tok, f"expected {text!r} {context}, found {self.describe(self.tok)}"
            )
        return self.take()

    def need(self, node: Node, kind: Kind, what: str) -> Node:
        if node.kind != kind:
            found = "a number" if node.kind == "num" else "a comparison (true/false)"
            wanted = "a number" if kind == "num" else "a comparison (true/false)"
            raise ClaimError(self.expr, node.start + 1, f"{what} needs {wanted}, found {found}")
        return node

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(self.tok, f"nested more than {MAX_DEPTH} levels deep")

    # grammar
    def parse(self) -> ClaimAst:
        if not self.expr.strip():
            raise ClaimError(self.expr, 0, "the claim is empty")
        root = self.or_()
        if not self.at("end"):
            raise self.fail(self.tok, f"unexpected {self.describe(self.tok)}")
        if root.kind != "bool":
            raise ClaimError(
                self.expr,
                root.start + 1,
                "a claim must compare something (e.g. `a.acc > b.acc`), not be a number",
            )
        return ClaimAst(self.expr, root, frozenset(self.refs))

    def bool_chain(self, op: Literal["and", "or"]) -> Node:
        sub = self.and_ if op == "or" else self.not_
        first = sub()
        if not self.at("name", op):
            return first
        operands = [self.need(first, "bool", f"`{op}`")]
        while self.at("name", op):
            self.take()
            operands.append(self.need(sub(), "bool", f"`{op}`"))
        return BoolOp(first.start, operands[-1].end, op, tuple(operands))

    def or_(self) -> Node:
        return self.bool_chain("or")

    def and_(self) -> Node:
        return self.bool_chain("and")

    def not_(self) -> Node:
        if self.at("name", "not"):
            token = self.take()
            self.enter()
            operand = self.need(self.not_(), "bool", "`not`")
            self.depth -= 1
            return Not(token.start, operand.end, operand)
        return self.comparison()

    def comparison(self) -> Node:
        first = self.sum_()
        if not self.at("op", "<", "<=", ">", ">=", "==", "!="):
            return first
        operands = [self.need(first, "num", "a comparison")]
        ops: list[str] = []
        while self.at("op", "<", "<=", ">", ">=", "==", "!="):
            ops.append(self.take().text)
            operands.append(self.need(self.sum_(), "num", "a comparison"))
        return Compare(first.start, operands[-1].end, tuple(operands), tuple(ops))

    def binary(self, ops: tuple[str, ...], sub: str) -> Node:
        parse_sub = self.product if sub == "product" else self.unary
        left = parse_sub()
        while self.at("op", *ops):
            op = self.take()
            self.need(left, "num", f"{op.text!r}")
            right = self.need(parse_sub(), "num", f"{op.text!r}")
            left = Binary(left.start, right.end, op.text, left, right, op.start)
        return left

    def sum_(self) -> Node:
        return self.binary(("+", "-"), "product")

    def product(self) -> Node:
        return self.binary(("*", "/"), "unary")

    def unary(self) -> Node:
        if self.at("op", "-", "+"):
            token = self.take()
            self.enter()
            operand = self.need(self.unary(), "num", f"unary {token.text!r}")
            self.depth -= 1
            return Unary(token.start, operand.end, token.text, operand)
        return self.atom()

    def atom(self) -> Node:
        token = self.tok
        if token.kind == "num":
            self.take()
            value = float(token.text)
            if not math.isfinite(value):
                raise self.fail(token, f"the number {token.text} is too large")
            return Num(token.start, token.end, value)
        if token.kind == "ref":
            self.take()
            return self.reference(token, token.start, token.end, "mean")
        if token.kind == "op" and token.text == "(":
            self.take()
            self.enter()
            inner = self.or_()
            self.depth -= 1
            close = self.expect_op(")", f"to close '(' at column {token.start + 1}")
            return _with_span(inner, token.start, close.end)
        if token.kind == "name" and token.text in _FUNCTIONS | _AGGREGATES:
            return self.call()
        if token.kind == "name" and token.text in _KEYWORDS:
            raise self.fail(token, f"expected a value before `{token.text}`")
        if token.kind == "name":
            raise self.fail(
                token,
                f"unknown name {token.text!r} (a reference is experiment.metric; functions: "
                "abs, min, max, mean, min_of, max_of)",
            )
        raise self.fail(token, f"expected a value, found {self.describe(token)}")

    def reference(self, token: Token, start: int, end: int, aggregate: str) -> Ref:
        experiment, metric = token.text.rsplit(".", 1)
        self.refs.add((experiment, metric))
        return Ref(start, end, experiment, metric, aggregate)  # type: ignore[arg-type]

    def call(self) -> Node:
        name = self.take()
        self.expect_op("(", f"after {name.text}")
        self.enter()
        if name.text in _AGGREGATES:
            if not self.at("ref"):
                raise self.fail(self.tok, f"{name.text}() takes one reference experiment.metric")
            ref = self.take()
            close = self.expect_op(")", f"to close {name.text}(")
            self.depth -= 1
            return self.reference(ref, name.start, close.end, name.text)
        args = [self.need(self.sum_(), "num", f"{name.text}()")]
        while self.at("op", ","):
            self.take()
            args.append(self.need(self.sum_(), "num", f"{name.text}()"))
        close = self.expect_op(")", f"to close {name.text}(")
        self.depth -= 1
        if name.text == "abs" and len(args) != 1:
            raise self.fail(name, "abs() takes one argument")
        if name.text in ("min", "max") and len(args) < 2:
            raise self.fail(
                name, f"{name.text}() takes two or more arguments (for runs: {name.text}_of(exp.m))"
            )
        return Call(name.start, close.end, name.text, tuple(args))


def _with_span(node: Node, start: int, end: int) -> Node:
    """``node`` widened to its parentheses, so substitution keeps them."""
    return dataclasses.replace(node, start=start, end=end)


def parse_claim(expr: str) -> ClaimAst:
    """Parse and type-check ``expr``; raises :class:`ClaimError` naming the column."""
    if len(expr) > MAX_LENGTH:
        raise ClaimError(expr, 0, f"longer than {MAX_LENGTH} characters")
    return _Parser(expr).parse()


def references(expr: str) -> set[tuple[str, str]]:
    """The ``(experiment, metric)`` pairs ``expr`` names; raises :class:`ClaimError`.

    For ``rb check`` and the auditor, to refuse claims about unknown experiments or metrics.
    """
    return set(parse_claim(expr).references)


# -- evaluation -----------------------------------------------------------------------------


#: What a claim's evaluation concludes: ``holds`` (on single values, on means where no test
#: applies, or significantly by Welch's t), ``holds-not-significant`` (holds on the means,
#: but the runs do not show it at :data:`~reprobridge.stats.ALPHA`), ``does-not-hold``,
#: ``undecided`` (a value is missing, a division by zero, an overflow).
Outcome = Literal["holds", "holds-not-significant", "does-not-hold", "undecided"]


@dataclass(frozen=True)
class ClaimResult:
    """``holds`` True/False on the values (means, or single runs), or None (undecidable:
    fails the conclusion level).

    ``reason`` says why in one line; ``substituted`` is the claim with each reference
    replaced by the number used (``0.935 > 0.827``; ``?`` where a value is missing).
    ``outcome`` is the conclusion (:data:`Outcome`): it differs from ``holds`` only where
    the claim holds on the means of several runs but not significantly. ``test`` says how
    it was judged (the significance test and its numbers, or why there was none).
    """

    holds: bool | None
    reason: str
    substituted: str
    outcome: Outcome = "undecided"
    test: str = ""


class _Undecidable(Exception):
    """Evaluation met a division by zero (message: where)."""


def _fmt(value: float) -> str:
    # Short when exact, else every digit: two numbers that print equal must be equal.
    short = f"{value:.6g}"
    return short if float(short) == value else repr(value)


def _aggregate(ref: Ref, runs: Sequence[float]) -> float:
    if ref.aggregate == "min_of":
        return min(runs)
    if ref.aggregate == "max_of":
        return max(runs)
    try:
        return math.fsum(runs) / len(runs)
    except OverflowError:
        # Finite values whose sum leaves the float range (fsum raises instead of returning
        # inf); their mean is finite: average the scaled values instead.
        return math.fsum(v / len(runs) for v in runs)


_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


class _Evaluator:
    """Python's float semantics, in Python's order: a division by zero stops evaluation
    where Python would raise ZeroDivisionError; a non-finite intermediate (an overflow,
    or inf - inf) is carried on as Python carries it and remembered (the first one), so
    :func:`evaluate_claim` can call the claim undecidable once evaluation ends. So which
    of the two a claim meets never depends on where the overflow sits."""

    def __init__(self, expr: str, resolved: Mapping[Ref, float]) -> None:
        self.expr = expr
        self.resolved = resolved
        self.overflow: str | None = None

    def number(self, node: Node) -> float:
        if isinstance(node, Num):
            return node.value
        if isinstance(node, Ref):
            return self.resolved[node]
        if isinstance(node, Unary):
            value = self.number(node.operand)
            return -value if node.op == "-" else value
        if isinstance(node, Binary):
            left, right = self.number(node.left), self.number(node.right)
            if node.op == "/" and right == 0:
                raise _Undecidable(f"division by zero at column {node.op_start + 1}")
            result = {
                "+": lambda: left + right,
                "-": lambda: left - right,
                "*": lambda: left * right,
                "/": lambda: left / right,
            }[node.op]()
            if not math.isfinite(result) and self.overflow is None:
                self.overflow = f"arithmetic overflow at column {node.op_start + 1}"
            return result
        if isinstance(node, Call):
            args = [self.number(a) for a in node.args]
            if node.name == "abs":
                return abs(args[0])
            return min(args) if node.name == "min" else max(args)
        raise AssertionError(f"not a number node: {node!r}")  # the parser's types forbid it

    def truth(self, node: Node) -> bool:
        if isinstance(node, Compare):
            # Python's chain: each operand evaluated once, stop at the first false link.
            left = self.number(node.operands[0])
            for op, operand in zip(node.ops, node.operands[1:], strict=True):
                right = self.number(operand)
                if not _COMPARE[op](left, right):
                    return False
                left = right
            return True
        if isinstance(node, BoolOp):
            if node.op == "and":
                return all(self.truth(o) for o in node.operands)  # short-circuits, as Python
            return any(self.truth(o) for o in node.operands)
        if isinstance(node, Not):
            return not self.truth(node.operand)
        raise AssertionError(f"not a truth node: {node!r}")


def _walk_refs(node: Node) -> list[Ref]:
    if isinstance(node, Ref):
        return [node]
    children: list[Node] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Node):
            children.append(value)
        elif isinstance(value, tuple):
            children += [v for v in value if isinstance(v, Node)]
    return [ref for child in children for ref in _walk_refs(child)]


def evaluate_claim(
    expr: str,
    values: Mapping[str, Mapping[str, Sequence[float]]],
    seeds: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
) -> ClaimResult:
    """Evaluate ``expr`` on ``values[experiment][metric]`` (one value per counted run;
    ``seeds``, in the same shape, the seed of each of those runs: where both sides of a
    comparison ran the same seeds, the significance test pairs the runs by seed).

    ``holds`` is None, with the reason, when a referenced metric has no value (unknown
    experiment or metric, no runs, or a non-finite value); on a division by zero exactly
    where Python would raise ZeroDivisionError; else when any evaluated intermediate was
    not finite (an overflow). Finite run values are always aggregated (a mean whose sum
    overflows is averaged scaled). Raises :class:`ClaimError` for a claim that does not
    parse; never anything else.
    """
    ast = parse_claim(expr)
    refs = _walk_refs(ast.root)
    resolved: dict[Ref, float] = {}
    missing: list[str] = []
    for ref in refs:
        name = f"{ref.experiment}.{ref.metric}"
        runs = values.get(ref.experiment, {}).get(ref.metric)
        if not runs:
            why = (
                "no such experiment in the audit"
                if ref.experiment not in values
                else "no run produced it"
            )
            missing.append(f"{name} ({why})")
        elif not all(math.isfinite(v) for v in runs):
            missing.append(f"{name} (a value is not finite)")
        else:
            resolved[ref] = _aggregate(ref, runs)
    substituted = _substitute(expr, refs, resolved)
    if missing:
        unique = list(dict.fromkeys(missing))
        return ClaimResult(None, "no value for " + ", ".join(unique), substituted)  # undecided
    evaluator = _Evaluator(expr, resolved)
    try:
        holds = evaluator.truth(ast.root)
    except _Undecidable as exc:
        return ClaimResult(None, f"undecidable: {exc}", substituted)
    if evaluator.overflow is not None:
        # A truth value reached through inf or nan says nothing about the claim.
        return ClaimResult(None, f"undecidable: {evaluator.overflow}", substituted)
    if not holds:
        return ClaimResult(False, f"does not hold: {substituted}", substituted, "does-not-hold")
    return _significance(ast, values, substituted, seeds or {})


def _linear(node: Node) -> tuple[Ref | None, float] | None:
    """``node`` as ``mean-reference + constant`` (either part may be absent), or None when it
    is any other form (a product, an aggregate other than the mean, two references)."""
    if isinstance(node, Num):
        return None, node.value
    if isinstance(node, Ref):
        return (node, 0.0) if node.aggregate == "mean" else None
    if isinstance(node, Unary) and node.op == "+":
        return _linear(node.operand)
    if isinstance(node, Binary) and node.op in "+-":
        left, right = _linear(node.left), _linear(node.right)
        if left is None or right is None:
            return None
        if node.op == "-":
            if right[0] is not None:
                return None  # a reference subtracted: not a comparison of two means
            return left[0], left[1] - right[1]
        if left[0] is not None and right[0] is not None:
            return None
        return left[0] or right[0], left[1] + right[1]
    return None


def _single_values(n: Mapping[str, int]) -> str:
    shown = ", ".join(f"{name} n = {count}" for name, count in n.items())
    return f"judged on single values ({shown}): no significance test is possible with one run"


def _significance(
    ast: ClaimAst,
    values: Mapping[str, Mapping[str, Sequence[float]]],
    substituted: str,
    seeds: Mapping[str, Mapping[str, Sequence[int]]],
) -> ClaimResult:
    """The conclusion for a claim that holds on its values.

    A single comparison ``<``, ``<=``, ``>``, ``>=`` between two means (each side a
    reference plus constants, ``a.m > b.m + 0.01``) with at least two runs on each side is
    judged by a one-sided t test at :data:`~reprobridge.stats.ALPHA` (paired by seed when
    both sides ran the same distinct seeds in the same order, else Welch's): not significant
    is ``holds-not-significant``, never ``holds``. With one run on a side, the claim holds
    on single values and says so; any other form of claim holds on its means and says
    that no test applies.
    """
    runs = {f"{e}.{m}": len(values[e][m]) for e, m in sorted(ast.references)}
    root = ast.root
    sides = (
        (_linear(root.operands[0]), _linear(root.operands[1]))
        if isinstance(root, Compare)
        and len(root.ops) == 1
        and root.ops[0] in ("<", "<=", ">", ">=")
        else (None, None)
    )
    left, right = sides
    if left is None or right is None or left[0] is None or right[0] is None:
        if all(count == 1 for count in runs.values()):
            test = _single_values(runs)
        else:
            test = "judged on the means: no significance test applies to this form of claim"
        return ClaimResult(True, f"holds: {substituted} ({test})", substituted, "holds", test)
    assert isinstance(root, Compare)
    (big, big_c), (small, small_c) = (left, right) if root.ops[0] in (">", ">=") else (right, left)
    assert big is not None and small is not None
    a = values[big.experiment][big.metric]
    b = values[small.experiment][small.metric]
    if len(a) < 2 or len(b) < 2:
        test = _single_values(runs)
        return ClaimResult(True, f"holds: {substituted} ({test})", substituted, "holds", test)
    seeds_a = list(seeds.get(big.experiment, {}).get(big.metric, ()))
    seeds_b = list(seeds.get(small.experiment, {}).get(small.metric, ()))
    paired = seeds_a == seeds_b and len(seeds_a) == len(a) and len(set(seeds_a)) == len(a)
    result = (paired_t if paired else welch)(a, b, small_c - big_c)
    test = f"{result.describe()}, alpha = {ALPHA:g}"
    if result.significant():
        return ClaimResult(
            True, f"holds: {substituted} (significant: {test})", substituted, "holds", test
        )
    return ClaimResult(
        True,
        f"holds on the means ({substituted}) but not significant: {test}; more runs (seeds) "
        "would decide it",
        substituted,
        "holds-not-significant",
        test,
    )


def _substitute(expr: str, refs: Sequence[Ref], resolved: Mapping[Ref, float]) -> str:
    out: list[str] = []
    pos = 0
    for ref in sorted(set(refs), key=lambda r: r.start):
        out.append(expr[pos : ref.start])
        out.append(_fmt(resolved[ref]) if ref in resolved else "?")
        pos = ref.end
    out.append(expr[pos:])
    return " ".join("".join(out).split())


def judge_claims(
    claims: Sequence[Claim], values: Mapping[str, Mapping[str, Sequence[float]]]
) -> tuple[Verdict, list[ClaimResult]]:
    """The conclusion level: ``pass`` when every claim holds, ``fail`` when one does not or
    cannot be decided, ``not-applicable`` when there are none. Raises :class:`ClaimError`."""
    if not claims:
        return Verdict("not-applicable", "no claims declared"), []
    results = [evaluate_claim(c.expr, values) for c in claims]
    bad = [(c, r) for c, r in zip(claims, results, strict=True) if r.outcome != "holds"]
    if not bad:
        return Verdict("pass", f"all {len(claims)} claim(s) hold"), results
    shown = "; ".join(f"{c.expr}: {r.reason}" for c, r in bad[:3])
    return Verdict("fail", f"{len(bad)} of {len(claims)} claim(s) fail: {shown}"), results
