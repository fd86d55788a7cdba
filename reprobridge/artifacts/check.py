#!/usr/bin/env python3
# repro/check.py, copied from ReproBridge (reprobridge/artifacts/check.py); regenerate with: rb init
"""Threshold check of one experiment run: extract each metric, judge it, print a verdict.

Standalone on purpose: standard library only, Python 3.8 syntax, so the flake's
``reproduce-<exp>`` apps can run it with whatever Python the pinned environment has. The
same file is :mod:`reprobridge.artifacts.check` inside ReproBridge, where the auditor
imports :func:`extract_metric` and :func:`judge_metric`, and ``rb init`` copies it byte for
byte into target repositories as ``repro/check.py``.

Usage::

    python repro/check.py --spec SPEC.json --experiment EXP --tier full|smoke \\
        --log LOG --workdir DIR

``SPEC.json`` is one experiment of ``reprobridge.toml`` as JSON (the flake writes it with
``builtins.toJSON``): ``metrics``, ``outputs`` and ``tiers`` as in the manifest schema.

Rules:

- A regex source is searched in the log (stdout and stderr together, multiline mode); the
  value is the first capture group of the LAST match, because training logs print running
  values and the final one is the result. How many matches there were is reported.
- A file source is read relative to the workdir: ``.json``; ``.yaml``/``.yml`` when PyYAML
  can be imported; ``.csv`` (``key`` is a column, the last non-empty row is read). The key
  is dotted (``eval.top1``; list indices as numbers); a literal key containing dots wins
  over a split one.
- Values must be numbers (or strings that parse as one, e.g. ``"0.91"``); booleans, missing
  values and NaN/inf fail, with the reason printed.
- Thresholds: ``target`` with ``tolerance`` (absolute) and/or ``relative_tolerance`` (of
  ``|target|``; with both, the wider band applies, as in ``pytest.approx``); ``min`` and
  ``max`` are inclusive. A bare ``target`` means at least it when ``higher_is_better`` is
  true, at most it when false, and equal to it otherwise.
- Tier ``full`` judges the experiment's ``metrics`` (or ``tiers.full.metrics``). Tier
  ``smoke`` judges ``tiers.smoke.metrics`` when present; otherwise the experiment's metrics
  only have to exist and be finite.
- Declared ``outputs`` must exist (relative to the workdir); a declared ``sha256`` is
  compared in tier ``full`` only.

Output: one line per metric and output, then ``verdict: PASS`` or ``verdict: FAIL``.
Exit status 0 (pass), 1 (fail), 2 (usage error: bad arguments or an unreadable spec).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CheckResult",
    "MetricError",
    "check_experiment",
    "extract_metric",
    "judge_metric",
    "main",
    "tier_metrics",
]

TIERS = ("full", "smoke")
#: Slack for float round-off when comparing against a threshold (values pass through
#: decimal text in logs and JSON, and Nix's JSON printer keeps 6 significant digits).
_EPS = 1e-9


class MetricError(ValueError):
    """A metric could not be extracted; the message says why, in one line."""


class CheckResult:
    """The outcome of one check line (a metric or an output)."""

    def __init__(self, name: str, ok: bool, line: str, value: float | None = None) -> None:
        self.name = name
        self.ok = ok
        self.line = line
        self.value = value

    def __repr__(self) -> str:
        return f"CheckResult({self.name!r}, ok={self.ok!r}, line={self.line!r})"


# -- extraction ---------------------------------------------------------------------------


def _to_number(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or raw is None:
        raise MetricError(f"{where} is {raw!r}, not a number")
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            raise MetricError(f"{where} is {raw!r}, not a number") from None
    else:
        raise MetricError(f"{where} is a {type(raw).__name__}, not a number")
    if not math.isfinite(value):
        raise MetricError(f"{where} is {value} (not finite)")
    return value


def _lookup(data: Any, key: str, where: str) -> Any:
    """Follow a dotted ``key`` into nested dicts and lists."""
    if isinstance(data, dict) and key in data:
        return data[key]
    head, dot, rest = key.partition(".")
    if isinstance(data, dict):
        if head not in data:
            raise MetricError(f"{where}: no key {head!r}")
        node = data[head]
    elif isinstance(data, list):
        try:
            node = data[int(head)]
        except (ValueError, IndexError):
            raise MetricError(f"{where}: no list index {head!r}") from None
    else:
        raise MetricError(f"{where}: {head!r} is not inside a table or list")
    return _lookup(node, rest, where) if dot else node


def _read_csv(path: Path, column: str, where: str) -> Any:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [
            row for row in csv.DictReader(handle) if any((v or "").strip() for v in row.values())
        ]
    if not rows:
        raise MetricError(f"{where}: no data rows")
    if column not in rows[-1]:
        raise MetricError(f"{where}: no column {column!r}")
    return rows[-1][column]


def _read_structured(path: Path, where: str) -> Any:
    lower = path.name.lower()
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if lower.endswith((".yaml", ".yml")):
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise MetricError(f"{where}: PyYAML is not installed, cannot read YAML") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise MetricError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MetricError(f"{where}: not valid JSON ({exc})") from None


def extract_metric(source: Mapping[str, Any], log_text: str, workdir: str) -> float:
    """The value of a metric whose ``source`` is ``{"regex": ...}`` or ``{"file", "key"}``.

    ``log_text`` is the run's stdout and stderr; ``workdir`` is where file sources and
    outputs are relative to. Raises :class:`MetricError` (a ``ValueError``) with a one-line
    reason when the value is missing, not a number, or not finite.
    """
    regex = source.get("regex")
    if regex is not None:
        try:
            pattern = re.compile(regex, re.MULTILINE)
        except re.error as exc:
            raise MetricError(f"regex {regex!r} does not compile: {exc}") from None
        if pattern.groups < 1:
            raise MetricError(f"regex {regex!r} has no capture group")
        matches = list(pattern.finditer(log_text))
        if not matches:
            raise MetricError(f"regex {regex!r} does not match the log")
        where = f"regex {regex!r} (last of {len(matches)} matches)"
        if len(matches) == 1:
            where = f"regex {regex!r}"
        return _to_number(matches[-1].group(1), where)
    path = source.get("file")
    key = source.get("key")
    if not path or not key:
        raise MetricError("the source needs `regex`, or `file` and `key`")
    full = Path(workdir, path)
    where = f"{path}:{key}"
    if not full.is_file():
        raise MetricError(f"{where}: the file does not exist")
    try:
        if path.lower().endswith(".csv"):
            raw = _read_csv(full, key, where)
        else:
            raw = _lookup(_read_structured(full, where), key, where)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise MetricError(f"{where}: cannot read ({exc})") from None
    return _to_number(raw, where)


# -- judging ------------------------------------------------------------------------------


def _num(spec: Mapping[str, Any], name: str) -> float | None:
    value = spec.get(name)
    return None if value is None else float(value)


def _fmt(value: float) -> str:
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.4g}"
    return f"{value:.4f}"


def judge_metric(metric_spec: Mapping[str, Any], value: float) -> tuple[bool, str]:
    """Whether ``value`` meets the thresholds of ``metric_spec``, and the rule applied.

    The reason reads like ``target 0.912 ± 0.005`` or ``min 0.8, max 1``; when the value
    fails, it says by which bound. A spec without thresholds only needs a finite value.
    """
    if not math.isfinite(value):
        return False, "value is not finite"
    target = _num(metric_spec, "target")
    tol = _num(metric_spec, "tolerance")
    rel = _num(metric_spec, "relative_tolerance")
    low = _num(metric_spec, "min")
    high = _num(metric_spec, "max")
    rules: list[str] = []
    failures: list[str] = []
    if target is not None:
        slack = _EPS * max(1.0, abs(target))
        if tol is not None or rel is not None:
            band = max(tol or 0.0, (rel or 0.0) * abs(target))
            shown = f"{tol:g}" if rel is None else f"{rel * 100:g}%"
            if tol is not None and rel is not None:
                shown = f"max({tol:g}, {rel * 100:g}%)"
            rules.append(f"target {target:g} ± {shown}")
            if abs(value - target) > band + slack:
                failures.append(f"off target by {_fmt(abs(value - target))}")
        else:
            better = metric_spec.get("higher_is_better")
            if better is True:
                rules.append(f"target ≥ {target:g}")
                if value < target - slack:
                    failures.append("below target")
            elif better is False:
                rules.append(f"target ≤ {target:g}")
                if value > target + slack:
                    failures.append("above target")
            else:
                rules.append(f"target {target:g} exactly")
                if abs(value - target) > slack:
                    failures.append("not equal to target")
    if low is not None:
        rules.append(f"min {low:g}")
        if value < low - _EPS * max(1.0, abs(low)):
            failures.append("below min")
    if high is not None:
        rules.append(f"max {high:g}")
        if value > high + _EPS * max(1.0, abs(high)):
            failures.append("above max")
    reason = ", ".join(rules) if rules else "finite"
    if failures:
        reason += "; " + ", ".join(failures)
    return not failures, reason


# -- one experiment -----------------------------------------------------------------------


def tier_metrics(spec: Mapping[str, Any], tier: str) -> tuple[dict[str, Any], bool]:
    """The metrics to check in ``tier`` and whether their thresholds apply.

    Returns ``(metrics, judged)``: for ``smoke`` without its own metrics, the experiment's
    metrics with ``judged`` false (they only need to exist and be finite).
    """
    tiers = spec.get("tiers") or {}
    own = (tiers.get(tier) or {}).get("metrics")
    if own is not None:
        return dict(own), True
    return dict(spec.get("metrics") or {}), tier != "smoke"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_experiment(
    spec: Mapping[str, Any], tier: str, log_text: str, workdir: str
) -> list[CheckResult]:
    """Check every metric and declared output of one run; one result per line printed."""
    results: list[CheckResult] = []
    metrics, judged = tier_metrics(spec, tier)
    for name in sorted(metrics):
        mspec = metrics[name] or {}
        try:
            value = extract_metric(mspec.get("source") or {}, log_text, workdir)
        except MetricError as exc:
            results.append(CheckResult(name, False, f"FAIL {name}: {exc}"))
            continue
        if judged:
            ok, reason = judge_metric(mspec, value)
        else:
            ok, reason = True, "smoke: exists and is finite; thresholds not applied"
        line = "{} {} = {} ({})".format("PASS" if ok else "FAIL", name, _fmt(value), reason)
        results.append(CheckResult(name, ok, line, value))
    for output in spec.get("outputs") or []:
        rel = output.get("path", "")
        full = Path(workdir, rel)
        if not full.is_file():
            results.append(CheckResult(rel, False, f"FAIL output {rel}: missing"))
            continue
        want = output.get("sha256")
        if want and tier == "full":
            got = _sha256(full)
            if got != want:
                line = f"FAIL output {rel}: sha256 {got} (expected {want})"
                results.append(CheckResult(rel, False, line))
                continue
        results.append(CheckResult(rel, True, f"PASS output {rel}: exists"))
    return results


# -- command line -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="check.py", description="Judge one experiment run against its thresholds."
    )
    parser.add_argument("--spec", required=True, help="JSON of the experiment from the manifest")
    parser.add_argument("--experiment", required=True, help="experiment id (for messages)")
    parser.add_argument("--tier", default="full", choices=TIERS)
    parser.add_argument("--log", required=True, help="stdout+stderr of the run")
    parser.add_argument("--workdir", default=".", help="where output files are relative to")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; returns the exit status (0 pass, 1 fail, 2 usage error)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 on --help
        return int(exc.code or 0)
    try:
        with open(args.spec, encoding="utf-8") as handle:
            spec = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"check.py: cannot read the spec {args.spec}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(spec, dict):
        print(f"check.py: the spec {args.spec} is not a JSON object", file=sys.stderr)
        return 2
    try:
        with open(args.log, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
    except OSError as exc:
        print(f"check.py: cannot read the log {args.log}: {exc}", file=sys.stderr)
        return 2
    tier_names = ["full", *sorted(t for t in spec.get("tiers") or {} if t != "full")]
    if args.tier not in tier_names:
        print(
            "check.py: {} has no tier {!r} (it has: {})".format(
                args.experiment, args.tier, ", ".join(tier_names)
            ),
            file=sys.stderr,
        )
        return 2
    results = check_experiment(spec, args.tier, log_text, args.workdir)
    print(f"check {args.experiment} (tier {args.tier}):")
    for result in results:
        print(result.line)
    if not results:
        print("(no metrics or outputs declared)")
    ok = all(r.ok for r in results)
    print("verdict: {}".format("PASS" if ok else "FAIL"))
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
