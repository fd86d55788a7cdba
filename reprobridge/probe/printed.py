"""Metrics a run printed: ``name: value`` / ``name=value`` / ``name value`` in its log.

Static recovery reads format strings in the code; a program that builds its message at run
time (``logging``, f-strings over dicts, a tqdm postfix, a library's progress line) only
shows its metrics when it runs. :func:`printed_metrics` reads the log the probe's run wrote
and proposes, for each metric-like name printed, a regex source that picks the value of its
last printing (what the auditor then reads from every run's log).

Seen where static recovery found no metric although the program prints one:
karpathy/makemore (``step 10 | loss 3.2``), greydanus/hamiltonian-nn (``Final test loss
3.6e-02 +/- ...``), rtqichen/ffjord (``Iter 0010 | ... | Loss 2.9(2.9)`` through
``logging``), patrick-kidger/torchcde (``Test Accuracy: 0.9``).

Contract: deterministic (the same log, the same proposals, in the order the names last
appear); at most ``limit`` proposals, metric-like names first; every proposed regex matches
the log it came from, its first group is the value, and it compiles under the manifest's
rules. Names are the manifest's metric names (lower case, ``_``-separated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reprobridge.detect._text import is_counter_label, metric_name, result_name

#: Result words static recovery's vocabulary (:func:`reprobridge.detect._text.result_name`)
#: does not hold, because a format string gives it other context: a run's own output is all
#: the probe has (``min_dist`` in the earlier unseen set's neuroevolution repository; a
#: distance or divergence is a result there).
_MORE_RESULT_WORDS = frozenset({"dist", "distance", "kl", "fid", "psnr", "ssim", "ece", "r2"})

#: What a ``logging`` record puts before its message (its level), never part of a name.
_LOG_PREFIXES = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "CRITICAL", "TRACE", "NOTICE"})

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
# name: value | name = value | name value ; the name is words joined by spaces, _ . - /
_PAIR = re.compile(
    r"(?P<name>[A-Za-z][A-Za-z0-9_./-]*(?:[ ][A-Za-z][A-Za-z0-9_./-]*){0,3})"
    r"(?P<sep>\s*[:=]\s*|\s+)"
    r"(?P<value>" + _NUMBER + r")(?P<pct>%?)(?![\w.])"
)


@dataclass(frozen=True)
class PrintedMetric:
    """A metric the log shows: its manifest name, the regex that reads its last value,
    that value, and the line it was read from (the decision's evidence)."""

    name: str
    regex: str
    value: float
    line: str


def _metric_like(printed: str) -> str | None:
    """The manifest name of ``printed`` when it names a result, else None: static
    recovery's own rule (:func:`~reprobridge.detect._text.result_name`), plus the words of
    :data:`_MORE_RESULT_WORDS` for a name that is no counter or setting."""
    name = result_name(printed)
    if name is not None:
        return name
    if is_counter_label(printed):
        return None
    slug = metric_name(printed)
    return slug if slug and set(slug.split("_")) & _MORE_RESULT_WORDS else None


def _name_regex(printed: str, sep: str) -> str:
    words = [re.escape(w) for w in printed.split(" ")]
    name = r"[ \t]+".join(words)
    gap = r"[ \t]*[:=][ \t]*" if sep.strip() else r"[ \t]+"
    # Bounded on the left so neither `train_loss` nor `train loss` reads as `loss` (an
    # upper-case word before the name is a logging level: `INFO nll: 1.4`).
    return r"(?<![\w.])(?<![a-z_.][ \t])" + name + gap + "(" + _NUMBER + ")"


def printed_metrics(log: str, *, limit: int = 4, tail_lines: int = 400) -> list[PrintedMetric]:
    """Metric-like ``name value`` pairs of ``log``'s last ``tail_lines`` lines (see module)."""
    lines = log.splitlines()[-tail_lines:]
    last: dict[str, tuple[int, PrintedMetric]] = {}
    for i, line in enumerate(lines):
        for m in _PAIR.finditer(line):
            printed = m.group("name").strip()
            # "Loss 2.9(2.9)", "acc 0.9 (best 0.91)": the name may carry leading words.
            words = printed.split(" ")
            for start in range(len(words)):
                if words[start] in _LOG_PREFIXES:
                    continue  # `INFO nll: 1.4`: the record's level is not the metric's name
                candidate = " ".join(words[start:])
                slug = _metric_like(candidate)
                if slug is None:
                    continue
                regex = _name_regex(candidate, m.group("sep"))
                try:
                    value = float(m.group("value"))
                except ValueError:
                    continue
                last[slug] = (i, PrintedMetric(slug, regex, value, line.strip()[:300]))
                break
    full = log
    chosen: list[PrintedMetric] = []
    for _, pm in sorted(last.values(), key=lambda t: (-t[0], t[1].name)):
        found = re.findall(pm.regex, full, re.MULTILINE)
        if not found:
            continue  # a proposal must read its own log
        chosen.append(pm)
    # Results printed last first; a summary line beats a progress line printed earlier.
    return chosen[:limit]
