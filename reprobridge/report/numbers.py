"""Numbers for people: one rounding rule for the terminal, Markdown and HTML.

Contract: values print with :data:`SIG_DIGITS` significant digits, and with more only where
two different numbers shown together would otherwise print the same (a claim
``0.88034 > 0.88031`` must not read ``0.8803 > 0.8803``). JSON evidence keeps full
precision; nothing here is used to judge. A confidence interval of one run prints
``n/a (n=1)``, and an interval cut to the metric's declared range says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reprobridge.stats import Stats

#: Significant digits of a displayed metric value.
SIG_DIGITS = 4
#: A number in free text (a claim with the measured values substituted).
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def fmt_bytes(value: float) -> str:
    """Bytes in binary units (``19.1 MiB``, ``20 MiB``)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{value:.0f} B"


def fmt_value(value: float, digits: int = SIG_DIGITS) -> str:
    """``value`` with ``digits`` significant digits (``0.8803``, ``1.234e+06``, ``0``)."""
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}"


def fmt_opt(value: float | None) -> str:
    """:func:`fmt_value`, or ``—`` for a value that is absent."""
    return "—" if value is None else fmt_value(value)


def fmt_delta(value: float | None) -> str:
    """A difference with its sign (``+0.01``, ``-0.02``, ``0``), or ``—`` when absent."""
    return "—" if value is None else ("+" if value > 0 else "") + fmt_value(value)


def fmt_values(values: Sequence[float]) -> list[str]:
    """Each of ``values`` with :data:`SIG_DIGITS` significant digits, or more where two
    different values would print the same (up to 17, where every float is distinct)."""
    distinct = set(values)
    for digits in range(SIG_DIGITS, 18):
        shown = {v: fmt_value(v, digits) for v in distinct}
        if len(set(shown.values())) == len(distinct):
            return [shown[v] for v in values]
    return [repr(v) for v in values]


def round_numbers(text: str) -> str:
    """``text`` with every number in it rounded as :func:`fmt_values` does (for a claim
    with its values substituted: ``0.8803333333333333 > 0.85`` → ``0.8803 > 0.85``)."""
    found = [(m, float(m.group())) for m in _NUMBER.finditer(text)]
    if not found:
        return text
    shown = fmt_values([v for _, v in found])
    out: list[str] = []
    pos = 0
    for (match, _), new in zip(found, shown, strict=True):
        out.append(text[pos : match.start()])
        # A literal already shorter than the rounding (``0.5``, ``3``) stays as written.
        out.append(match.group() if len(match.group()) <= len(new) else new)
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def fmt_ci(stats: Stats, *, mean: bool = False) -> str:
    """The 95% interval as shown: ``[0.85, 0.91]``, ``n/a (n=1)``, or a clipped one with
    its raw ends (``[0.95, 1] (clipped to the range [0, 1]; raw [0.95, 1.008])``).

    ``mean=True`` puts the mean first (``0.88 [0.85, 0.91]``, ``0.88 [n/a (n=1)]``), the
    mean at the interval's precision.
    """
    if stats.ci95 is None:
        text = f"n/a (n={stats.n})"
        return f"{fmt_value(stats.mean)} [{text}]" if mean else text
    shown = stats.ci95_clipped
    assert shown is not None
    m, low, high = fmt_values([stats.mean, shown[0], shown[1]])
    text = f"[{low}, {high}]"
    if stats.clipped and stats.range is not None:
        r_low, r_high = fmt_values(list(stats.range))
        raw_low, raw_high = fmt_values(list(stats.ci95))
        text += f" (clipped to the range [{r_low}, {r_high}]; raw [{raw_low}, {raw_high}])"
    return f"{m} {text}" if mean else text
