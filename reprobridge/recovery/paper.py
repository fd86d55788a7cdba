"""Merge rules for the paper: table cells become metric targets, sentences become claims
(rules stated in :mod:`reprobridge.recovery.merge`)."""

from __future__ import annotations

import re
from typing import Any

from reprobridge.detect.base import Finding
from reprobridge.detect.findings import ClaimValue, ReproducesValue, TargetValue, of_type
from reprobridge.manifest.notes import RecoveryNotes
from reprobridge.recovery._common import Builder

_SYNONYMS = {"acc": "accuracy", "err": "error", "ppl": "perplexity", "top1": "top1", "f1": "f1"}
_STOP = {
    "ours",
    "the",
    "of",
    "a",
    "an",
    "with",
    "w",
    "test",
    "val",
    "mean",
    "std",
    "our",
    "method",
    "model",
}


def _tokens(text: str, *, keep_test: bool = False) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower().replace("_", " "))
    out = {_SYNONYMS.get(w, w) for w in words}
    return out if keep_test else out - _STOP


def _match(label: str, options: dict[str, set[str]]) -> str | None:
    want = _tokens(label)
    if not want:
        return None
    scored = sorted(
        ((len(want & toks) / len(want), k) for k, toks in options.items()), reverse=True
    )
    if not scored or scored[0][0] < 0.5 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


_ROW_PARAM_RE = re.compile(
    r"\b([A-Za-z_][\w.-]*)\s*[=:]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z][\w.-]*)"
)


def _same(a: object, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(a).lower() == b.lower()


def _match_row(label: str, exp_tokens: dict[str, set[str]], exps: dict[str, Any]) -> str | None:
    """The experiment a table row names, by shared words and by parameter values.

    ``name=value`` pairs in the label ("Logistic regression (C=0.5)") count as the
    parameter's name when the experiment's ``params`` hold that value, and rule the
    experiment out when they hold another one.
    """
    pairs = _ROW_PARAM_RE.findall(label)
    if not pairs:
        return _match(label, exp_tokens)
    rest = _ROW_PARAM_RE.sub(" ", label)
    options: dict[str, set[str]] = {}
    for exp, tokens in exp_tokens.items():
        params = {str(k).lower(): v for k, v in exps[exp].get("params", {}).items()}
        extra: set[str] = set()
        conflict = False
        for name, value in pairs:
            key = name.lower().replace("-", "_").replace(".", "_")
            if key in params:
                if not _same(params[key], value):
                    conflict = True
                    break
                extra.add(f"param:{key}")
        if not conflict:
            options[exp] = tokens | extra
    want = _tokens(rest) | {
        f"param:{n.lower().replace('-', '_').replace('.', '_')}" for n, _ in pairs
    }
    scored = sorted(((len(want & t) / len(want), k) for k, t in options.items()), reverse=True)
    if not scored or scored[0][0] < 0.5 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def _ours(label: str, exps: dict[str, Any]) -> str | None:
    """The only experiment, for a row that names no other thing ("Ours", "Our method"):
    a row that names a baseline or a dataset is matched by its words or not at all."""
    words = set(re.findall(r"[a-z0-9]+", label.lower()))
    if (
        len(exps) == 1
        and words
        and words <= {"ours", "our", "method", "model", "full", "this", "work", "proposed"}
    ):
        return next(iter(exps))
    return None


def _readme_sentences(
    exps: dict[str, Any], sentences: list[Finding[ReproducesValue]]
) -> dict[str, set[str]]:
    """Words of the README's sentences about results, per experiment they belong to: one
    that names the experiment (its id or script), else the only experiment there is."""
    out: dict[str, set[str]] = {}
    for f in sentences:
        text = f.value.text
        words = _tokens(text)
        named = [
            e
            for e, d in exps.items()
            if e in text
            or any(
                w.endswith(".py") and w.rsplit("/", 1)[-1] in text
                for w in str(d.get("command", "")).split()
            )
        ]
        owners = named if named else (list(exps) if len(exps) == 1 else [])
        for e in owners:
            out.setdefault(e, set()).update(words)
    return out


def _seeds_in(caption: str) -> list[int] | None:
    """Seeds a table caption names: "seeds 0-2", "seeds 0, 1 and 2", "over 3 seeds" (0..2)."""
    m = re.search(r"seeds?\s+(\d+)\s*(?:-|–|to|\.\.)\s*(\d+)", caption, re.I)
    if m and int(m.group(1)) <= int(m.group(2)) <= int(m.group(1)) + 99:
        return list(range(int(m.group(1)), int(m.group(2)) + 1))
    m = re.search(r"seeds?\s+((?:\d+\s*(?:,|and|,\s*and)\s*)+\d+)", caption, re.I)
    if m:
        return [int(x) for x in re.findall(r"\d+", m.group(1))]
    m = re.search(r"(\d+)\s+(?:random\s+)?seeds", caption, re.I)
    if m and 1 <= int(m.group(1)) <= 100:
        return list(range(int(m.group(1))))
    return None


def merge_paper(b: Builder, by_kind: dict[str, list[Finding]], notes: RecoveryNotes) -> None:
    """Paper table cells become metric targets and sentences become claims; unmatched ones are reported."""
    exps: dict[str, Any] = b.data.get("experiments", {})
    datasets: dict[str, Any] = b.data.get("datasets", {})
    exp_tokens = {
        e: _tokens(e)
        | _tokens(str(d.get("description", "")))
        | {t for v in d.get("params", {}).values() if isinstance(v, str) for t in _tokens(v)}
        # The data an experiment reads names it too (the `cora` row for data/cora/).
        | {
            t
            for ds in d.get("datasets", [])
            for t in _tokens(f"{ds} {datasets.get(ds, {}).get('path') or ''}")
        }
        for e, d in exps.items()
    }
    for e, words in _readme_sentences(exps, of_type(by_kind, ReproducesValue)).items():
        exp_tokens[e] |= words
    row_to_exp: dict[str, str | None] = {}
    seeded: set[str] = set()
    # The paper's values first: a README table fills only what the paper leaves open.
    ordered = sorted(
        of_type(by_kind, TargetValue), key=lambda f: (f.detector != "paper", f.sources())
    )
    for f in ordered:
        row, col = f.value.row, f.value.column
        exp = row_to_exp.setdefault(row, _match_row(row, exp_tokens, exps) or _ours(row, exps))
        metrics = exps.get(exp, {}).get("metrics", {}) if exp else {}
        # A count out of a total (``accuracy_count``) is never a paper's column: its value
        # depends on how many examples a run evaluates.
        comparable = {m: _tokens(m) for m in metrics if not m.endswith("_count")}
        metric = _match(col, comparable) if comparable else None
        where = f"{', '.join(f.sources())} ({f.value.table}, row {row!r}, column {col!r})"
        if exp is None or metric is None:
            notes.unmatched_targets.append(
                f"{f.value.value} at {where}: no "
                + ("experiment" if exp is None else f"metric of {exp}")
                + " matches"
            )
            continue
        value = float(f.value.value)
        spread = f.value.spread
        note = ""
        if f.value.percent and 1.0 < value <= 100.0 and not _prints_percent(metrics[metric]):
            value, note = (
                value / 100.0,
                f"; the {'README' if f.detector == 'readme_results' else 'paper'}'s "
                f"{f.value.value}% read as the fraction {value / 100.0:g}",
            )
            spread = spread / 100.0 if spread is not None else None
        mp = f"experiments.{exp}.metrics.{metric}"
        if b.has(f"{mp}.target"):
            continue
        seeds = _seeds_in(f.value.caption)
        if seeds and exp not in seeded:
            seeded.add(exp)
            b.put(
                f"experiments.{exp}.seeds",
                seeds,
                [*f.sources(), "the table caption names the seeds"],
            )
        b.put(f"{mp}.target", round(value, 10), f.sources(), "medium")
        if spread is not None and spread > 0:
            b.put(
                f"{mp}.tolerance",
                round(max(3 * spread, 0.01 * abs(value)), 10),
                [*f.sources(), "rb rule: 3 x the paper's ± spread (at least 1% of the target)"],
                "medium",
            )
            b.put(f"{mp}.tolerance_source", "paper-spread", f.sources(), "medium")
        else:
            rounding = _rounding(f.value)
            if note:  # the paper's percent read as a fraction: its rounding too
                rounding /= 100.0
            b.put(
                f"{mp}.tolerance",
                float(f"{rounding:.3g}"),
                [
                    *f.sources(),
                    "rb rule: the paper gives no spread; half a unit of the last digit it "
                    "prints, widened by the audit's own run-to-run spread",
                ],
                "medium",
            )
            b.put(f"{mp}.tolerance_source", "paper-precision", f.sources(), "medium")
        if f.value.higher_is_better is not None:
            b.put(f"{mp}.higher_is_better", f.value.higher_is_better, f.sources(), "medium")
        if note:
            # A percentage read as a fraction cannot leave [0, 1]: the report clips its
            # confidence interval there (a mean of 0.99 ± 0.02 is not "up to 1.008").
            b.put(
                f"{mp}.range",
                [0, 1],
                [*f.sources(), "the paper gives it in percent: a fraction"],
                "medium",
            )
        b.put(f"{mp}.provenance", f"{where}{note}", f.sources(), "medium")
    claims: list[dict[str, str]] = []
    sources: list[str] = []
    for claim in sorted(of_type(by_kind, ClaimValue), key=lambda f: f.sources()):
        better = row_to_exp.get(claim.value.better) or _match(claim.value.better, exp_tokens)
        worse = row_to_exp.get(claim.value.worse) or _match(claim.value.worse, exp_tokens)
        if not better or not worse or better == worse:
            notes.unmatched_targets.append(
                f"claim at {', '.join(claim.sources())}: experiments not matched"
            )
            continue
        common = sorted(set(exps[better].get("metrics", {})) & set(exps[worse].get("metrics", {})))
        metric = None
        if claim.value.metric:
            metric = _match(claim.value.metric, {m: _tokens(m) for m in common})
        targeted = [m for m in common if "target" in exps[better]["metrics"][m]]
        metric = metric or (
            targeted[0] if len(targeted) == 1 else common[0] if len(common) == 1 else None
        )
        if metric is None:
            notes.unmatched_targets.append(
                f"claim at {', '.join(claim.sources())}: no common metric of {better} and {worse}"
            )
            continue
        hib = exps[better]["metrics"][metric].get("higher_is_better", True)
        op = ">" if hib is not False else "<"
        claims.append(
            {
                "expr": f"{better}.{metric} {op} {worse}.{metric}",
                "provenance": ", ".join(claim.sources()),
            }
        )
        sources += claim.sources()
    if claims:
        b.put("claims", claims, sources, "medium")


def _rounding(target: TargetValue) -> float:
    """Half a unit of the last digit ``target`` is printed with (``81.0``: 0.05, ``0.99``:
    0.005, ``81``: 0.5): every value within it prints as the paper's number. A finding
    without ``decimals`` (from a reader that does not record them) counts the digits of the
    shortest form of the number, which can only make the band narrower."""
    decimals = target.decimals
    if decimals is None:
        decimals = len(repr(float(target.value)).partition(".")[2].rstrip("0"))
    return 0.5 * 10.0**-decimals


# -- finishing ----------------------------------------------------------------------------


def _prints_percent(metric: object) -> bool:
    """Whether a recovered metric is read from a printed percentage (its regex requires a
    ``%`` after the captured number: ``accuracy: 96.5%``): the paper's percent is then
    already on the metric's scale, not a fraction."""
    source = metric.get("source") if isinstance(metric, dict) else None
    regex = source.get("regex") if isinstance(source, dict) else None
    if not isinstance(regex, str):
        return False
    group = re.search(r"(?<!\\)\((?!\?)", regex)  # the capturing group: the value
    return group is not None and "%" in regex[group.end() :]
