"""Summary statistics of repeated measurements (runs that differ only in their seed)."""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95


def t_interval(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean of ``values`` and the half-width of its 95% Student-t confidence interval,
    ``t.ppf(0.975, n - 1) · s / √n`` (``s``: the sample standard deviation); a single value
    has no interval (None). An empty sequence is a programming error."""
    n = len(values)
    if n == 0:
        raise ValueError("t_interval of no values")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, None
    from scipy.stats import t

    s = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * s / math.sqrt(n)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman's rank correlation ρ of ``x`` and ``y`` and its two-sided p-value
    (``scipy.stats.spearmanr``); (NaN, NaN) with fewer than three points or a constant side."""
    if len(x) != len(y):
        raise ValueError("spearman: x and y differ in length")
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return float("nan"), float("nan")
    from scipy.stats import spearmanr

    result = spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have the same mean
    (``scipy.stats.ttest_ind(a, b, equal_var=False)``); NaN when a side has fewer than two
    values or both sides are constant."""
    if len(a) < 2 or len(b) < 2 or (len(set(a)) < 2 and len(set(b)) < 2):
        return float("nan")
    import warnings

    from scipy.stats import ttest_ind

    with warnings.catch_warnings():  # nearly equal values: scipy warns, the p stands
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ttest_ind(a, b, equal_var=False).pvalue)
