"""Statistics of a metric over runs: the one place the judge and the report take them from.

Contract:

* :func:`summarize` gives n, mean, sample standard deviation (ddof=1), min, max and the 95%
  confidence interval of the mean from the exact Student t quantile for ``n - 1`` degrees
  of freedom. One value has no interval (``ci95`` is None): a zero-width interval would
  claim a certainty one run cannot give.
* A metric may declare the range its values can take (``range = [0, 1]`` for an
  accuracy). The raw t interval is kept as computed (``ci95``); :attr:`Stats.ci95_clipped`
  is the interval cut to that range, and the renderers say when they show a clipped one.
* :func:`t_quantile` is the inverse of Student's t CDF for every number of degrees of
  freedom (no normal approximation above 30): the CDF comes from the regularized
  incomplete beta function (Lentz's continued fraction), inverted by bisection to
  machine precision. No scipy: the auditor must not depend on a numerics stack.
* :func:`wilson` is the Wilson score interval of a proportion (``rb bench``'s rates).
* :func:`welch` is Welch's one-sided t test that one mean exceeds another by more than a
  margin (unequal variances, Welch-Satterthwaite degrees of freedom): how claims between
  experiments are judged over several runs (:data:`ALPHA`).
* :meth:`Stats.from_json` reads the form :meth:`Stats.to_json` writes from untrusted
  evidence: anything malformed gives None, never an exception.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reprobridge.errors import AuditError

#: Confidence level of the interval the reports show.
LEVEL = 0.95
#: Significance level of the one-sided test a claim between experiments must pass.
ALPHA = 0.05


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0 and 0.0 <= x <= 1.0):
        raise ValueError(f"betainc needs a, b > 0 and 0 <= x <= 1, got {a}, {b}, {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    # The fraction converges fast only below the mean; above it, use the symmetry.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1).

    Bisection on the CDF to the last representable bit: slow next to a table (about a
    millisecond), but exact for every df, and the auditor calls it once per metric.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


#: z for a two-sided 95% interval (the normal quantile at 0.975).
Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials ((0, 1) when n is 0)."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= k <= n:
        raise ValueError(f"k={k} is not within 0..n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp the rounding noise of the end points (k = 0 or k = n).
    return (max(0.0, centre - half), min(1.0, centre + half))


def t_975(df: int) -> float:
    """t_{0.975, df}, the two-sided 95% quantile; raises :class:`AuditError` for df < 1."""
    if df < 1:
        raise AuditError(f"degrees of freedom must be at least 1, got {df}")
    return t_quantile(0.975, df)


@dataclass(frozen=True)
class Stats:
    """Summary of one metric over runs.

    ``ci95`` is the raw 95% t interval of the mean, None for a single value; ``range`` the
    metric's declared range (None when undeclared). See :attr:`ci95_clipped`.
    """

    n: int
    mean: float
    std: float
    min: float
    max: float
    ci95: tuple[float, float] | None
    range: tuple[float, float] | None = None

    @property
    def ci95_clipped(self) -> tuple[float, float] | None:
        """``ci95`` cut to the declared range (unchanged when none is declared)."""
        if self.ci95 is None or self.range is None:
            return self.ci95
        low, high = self.range
        return (min(max(self.ci95[0], low), high), max(min(self.ci95[1], high), low))

    @property
    def clipped(self) -> bool:
        """Does the raw interval run outside the declared range?"""
        return self.ci95 is not None and self.ci95_clipped != self.ci95

    def to_json(self) -> dict[str, Any]:
        """The stats as a JSON-ready dict, at full precision (``ci95`` a list or null;
        ``range`` and ``ci95_clipped`` only when a range is declared)."""
        out: dict[str, Any] = {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "ci95": list(self.ci95) if self.ci95 is not None else None,
        }
        if self.range is not None:
            out["range"] = list(self.range)
            clipped = self.ci95_clipped
            out["ci95_clipped"] = list(clipped) if clipped is not None else None
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Stats | None:
        """The stats :meth:`to_json` wrote, from untrusted evidence; None when malformed.

        Bundles written before single runs lost their interval hold ``ci95 = [v, v]`` for
        n = 1: that is read as no interval.
        """
        if not isinstance(raw, dict):
            return None
        n = raw.get("n")
        numbers = [_finite(raw.get(k)) for k in ("mean", "std", "min", "max")]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return None
        mean, std, low, high = numbers
        if mean is None or std is None or low is None or high is None:
            return None
        ci = _pair(raw.get("ci95")) if n > 1 else None
        return cls(n, mean, std, low, high, ci, _pair(raw.get("range")))


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _pair(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    a, b = _finite(value[0]), _finite(value[1])
    return (a, b) if a is not None and b is not None and a <= b else None


def summarize(values: Sequence[float], *, value_range: Sequence[float] | None = None) -> Stats:
    """n, mean, sample std, min, max and the 95% t interval of ``values``.

    ``value_range`` is the metric's declared ``[low, high]`` (see :class:`Stats`). Raises
    :class:`AuditError` for no values or a non-finite one (callers pass only extracted,
    finite metric values).
    """
    data = [float(v) for v in values]
    if not data:
        raise AuditError("statistics of no values")
    if not all(math.isfinite(v) for v in data):
        raise AuditError("statistics of a non-finite value")
    bounds = _pair(list(value_range)) if value_range is not None else None
    n = len(data)
    mean = _mean(data)
    if n == 1:
        return Stats(1, mean, 0.0, data[0], data[0], None, bounds)
    try:
        std = statistics.stdev(data)
    except OverflowError:
        # Values a run printed near the float limit: the spread of the scaled values.
        scale = max(abs(v) for v in data)
        std = statistics.stdev([v / scale for v in data]) * scale
    half = t_975(n - 1) * std / math.sqrt(n)
    interval: tuple[float, float] | None = (mean - half, mean + half)
    if not all(math.isfinite(x) for x in interval):  # type: ignore[union-attr]
        interval = None  # past the float range: no interval to state (evidence JSON is finite)
    return Stats(n, mean, std, min(data), max(data), interval, bounds)


def _mean(data: Sequence[float]) -> float:
    """fsum-based: exact rounding, so the mean of equal values is that value. Finite values
    whose sum leaves the float range (fsum raises) are averaged scaled: the mean is finite,
    and a run's printed numbers must never crash the auditor."""
    try:
        return math.fsum(data) / len(data)
    except OverflowError:
        return math.fsum(v / len(data) for v in data)


@dataclass(frozen=True)
class Welch:
    """Welch's one-sided t test of H0: mean(a) - mean(b) <= margin against the alternative
    mean(a) - mean(b) > margin. ``t`` and ``df`` are None when both samples have no spread
    (the difference is then exact: ``p`` is 0.0 when it exceeds the margin, else 1.0)."""

    t: float | None
    df: float | None
    p: float
    n_a: int
    n_b: int
    #: True for the paired test (:func:`paired_t`): the runs of both sides used the same
    #: seeds, and the test is on the per-seed differences.
    paired: bool = False

    def significant(self, alpha: float = ALPHA) -> bool:
        """Whether H0 is rejected at ``alpha``."""
        return self.p < alpha

    def describe(self) -> str:
        """One line: the test, its statistic and p (``Welch's t = 2.1, df = 3.4, one-sided
        p = 0.052, n = 3 vs 3``)."""
        if self.t is None or self.df is None:
            stat = "no run-to-run spread on either side"
        else:
            stat = f"t = {self.t:.3g}, df = {self.df:.3g}"
        if self.paired:
            return (
                f"paired t test over the seeds both sides ran ({stat}, one-sided "
                f"p = {self.p:.3g}, n = {self.n_a} pairs)"
            )
        return f"Welch's t test ({stat}, one-sided p = {self.p:.3g}, n = {self.n_a} vs {self.n_b})"


def welch(a: Sequence[float], b: Sequence[float], margin: float = 0.0) -> Welch:
    """Welch's one-sided t test that the mean of ``a`` exceeds the mean of ``b`` by more
    than ``margin``; each sample needs at least two finite values (:class:`AuditError`
    otherwise: a variance needs two)."""
    if len(a) < 2 or len(b) < 2:
        raise AuditError("Welch's t test needs at least two values on each side")
    sa, sb = summarize(a), summarize(b)
    diff = sa.mean - sb.mean - margin
    va, vb = sa.std**2 / sa.n, sb.std**2 / sb.n
    se2 = va + vb
    if se2 == 0.0:
        return Welch(None, None, 0.0 if diff > 0 else 1.0, sa.n, sb.n)
    t = diff / math.sqrt(se2)
    # Welch-Satterthwaite; a side without spread contributes nothing to the denominator.
    parts = [v * v / (n - 1) for v, n in ((va, sa.n), (vb, sb.n)) if v > 0]
    df = se2 * se2 / math.fsum(parts)
    return Welch(t, df, 1.0 - t_cdf(t, df), sa.n, sb.n)


def paired_t(a: Sequence[float], b: Sequence[float], margin: float = 0.0) -> Welch:
    """The one-sided paired t test that ``a`` exceeds ``b`` by more than ``margin``, on the
    differences ``a[i] - b[i]`` of runs that used the same seed (a seed fixes the data
    order and the initialisation both methods see, so the runs pair). Needs two pairs or
    more (:class:`AuditError` otherwise) and samples of equal length."""
    if len(a) != len(b) or len(a) < 2:
        raise AuditError("the paired t test needs two or more pairs of values")
    diffs = [x - y - margin for x, y in zip(a, b, strict=True)]
    d = summarize(diffs)
    if d.std == 0.0:
        return Welch(None, None, 0.0 if d.mean > 0 else 1.0, d.n, d.n, paired=True)
    t = d.mean / (d.std / math.sqrt(d.n))
    df = float(d.n - 1)
    return Welch(t, df, 1.0 - t_cdf(t, df), d.n, d.n, paired=True)
