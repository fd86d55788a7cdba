"""Experiments exposed as Makefile targets (``make train``, ``make eval``).

Reads ``Makefile``/``makefile``/``GNUmakefile`` (any directory outside vendored ones).
A target whose recipe runs Python (``python x.py``, ``python -m pkg``, ``torchrun``...,
with ``$(VAR)``/``${VAR}`` expanded from the file's own assignments, so ``$(PYTHON)
train.py`` counts) becomes an experiment ``make target`` (``make -C dir target`` for a
Makefile in a subdirectory), kind ``make``, medium confidence. Housekeeping targets
(install, clean, lint, test, format, help, ...), pattern rules, special targets and targets
named by variables are skipped. The description is the ``## help`` comment on the rule line
or the comment line above it; the note says whether the target is ``.PHONY``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from reprobridge.detect._text import (
    RunCommand,
    continued_lines,
    python_runs,
    slugify,
    unique_id,
)
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ExperimentValue

_SKIP_TARGETS = frozenset(
    {
        "install",
        "uninstall",
        "clean",
        "distclean",
        "lint",
        "test",
        "tests",
        "format",
        "fmt",
        "help",
        "setup",
        "env",
        "venv",
        "deps",
        "requirements",
        "docs",
        "doc",
        "check",
        "typecheck",
        "style",
        "publish",
        "release",
        "upload",
        "dev",
        "pre-commit",
        "coverage",
        "docker",
        "docker-build",
        "init",
    }
)
_ASSIGN_RE = re.compile(
    r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\?|:|::|\+|!)?=\s*(.*)$"
)
_RULE_RE = re.compile(r"^([^\t#:=][^:=]*?)\s*::?(?!=)\s*(.*)$")
_VAR_RE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_.]*)[)}]")


@dataclass
class MakeRule:
    """One target of a rule of a Makefile (``a b: deps`` gives two) at ``line``: its
    ``description`` (the ``## help`` after the prerequisites, else the comment line just
    above) and its ``recipe``, (line number, command) with the tab stripped and an inline
    ``target: ; command`` first."""

    target: str
    line: int
    description: str
    recipe: list[tuple[int, str]] = field(default_factory=list)


def _logical(text: str) -> list[tuple[int, str]]:
    """Continuation-joined lines with their first line number; the line that ends a
    continuation is stripped (a recipe's first line keeps its tab)."""
    lines: list[tuple[int, str]] = []
    continued = False
    for number, raw in enumerate(text.splitlines(), 1):
        ends = continued and not raw.strip().endswith("\\")
        lines.append((number, raw.strip() if ends else raw))
        continued = raw.endswith("\\")
    return [(start, " ".join(parts)) for start, parts in continued_lines(lines)]


#: :func:`parse_makefile`'s result: (variables, .PHONY targets, rules).
Makefile = tuple[dict[str, str], set[str], list[MakeRule]]
#: ``index.memo`` key: Makefile path -> its :data:`Makefile`.
_MEMO = "makefile.parsed"


def parsed_makefile(ctx: DetectContext, path: str, text: str) -> Makefile:
    """:func:`parse_makefile` of ``text``, the Makefile at ``path``, once per index: this
    detector and the services detector (once per make experiment) read the same
    Makefiles. Callers must not change the result."""
    memo = ctx.index.memo.setdefault(_MEMO, {})
    assert isinstance(memo, dict)
    parsed = memo.get(path)
    if parsed is None:
        parsed = memo[path] = parse_makefile(text)
    return parsed


def parse_makefile(text: str) -> Makefile:
    """(variables, .PHONY targets, rules with their recipe lines) of a Makefile's text."""
    variables: dict[str, str] = {}
    phony: set[str] = set()
    rules: list[MakeRule] = []
    current: list[MakeRule] = []
    last_comment = ""
    for number, line in _logical(text):
        if line.startswith("\t"):
            for rule in current:
                rule.recipe.append((number, line.strip()))
            continue
        stripped = line.strip()
        if not stripped:
            last_comment = ""
            continue
        if stripped.startswith("#"):
            last_comment = stripped.lstrip("#").strip()
            continue
        assign = _ASSIGN_RE.match(stripped)
        rule_match = _RULE_RE.match(line)
        if assign:
            name, value = assign.groups()
            variables[name] = value.split(" #")[0].strip()
            current = []
            continue
        if rule_match:
            targets, rest = rule_match.groups()
            deps, _, help_text = rest.partition("##")
            deps, _, inline = deps.partition(";")
            names = targets.split()
            if names == [".PHONY"]:
                phony.update(deps.split())
                current = []
                continue
            description = help_text.strip() or last_comment
            current = [MakeRule(t, number, description) for t in names]
            for rule in current:
                if inline.strip():
                    rule.recipe.append((number, inline.strip()))
            rules.extend(current)
            last_comment = ""
            continue
        current = []
    return variables, phony, rules


def expand(text: str, variables: dict[str, str], depth: int = 3) -> str:
    """``$(VAR)`` / ``${VAR}`` replaced from ``variables`` (unknown ones left as written)."""
    for _ in range(depth):
        new = _VAR_RE.sub(lambda m: variables.get(m.group(1), m.group(0)), text)
        if new == text:
            break
        text = new
    return text


def _recipe_runs(rule: MakeRule, variables: dict[str, str]) -> list[tuple[int, RunCommand]]:
    return python_runs((n, expand(line, variables).lstrip("@-+ ")) for n, line in rule.recipe)


class MakefileDetector(Detector):
    """Makefile targets whose recipes run Python (see module docstring)."""

    name = "makefile"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        taken: set[str] = set()
        for path, text in ctx.own_texts(ctx.index.named("Makefile", "makefile", "GNUmakefile")):
            variables, phony, rules = parsed_makefile(ctx, path, text)
            directory = str(PurePosixPath(path).parent)
            for rule in rules:
                target = rule.target
                if (
                    target.lower() in _SKIP_TARGETS
                    or target.startswith(".")
                    or "%" in target
                    or "$" in target
                ):
                    continue
                runs = _recipe_runs(rule, variables)
                if not runs:
                    continue
                base = slugify(target if directory == "." else f"{directory}-{target}") or "make"
                exp_id = unique_id(base, taken)
                command = f"make {target}" if directory == "." else f"make -C {directory} {target}"
                entries = sorted({r.entry for _, r in runs})
                note = (
                    ("phony target; " if target in phony else "") + "runs " + ", ".join(entries[:8])
                )
                findings.append(
                    Finding(
                        kind="experiment",
                        key=exp_id,
                        value=ExperimentValue(command, "make", rule.description, path, "."),
                        evidence=(
                            Evidence(path, rule.line),
                            *(Evidence(path, n) for n, _ in runs[:3]),
                        ),
                        detector=self.name,
                        confidence="medium",
                        note=note,
                    )
                )
        return findings
