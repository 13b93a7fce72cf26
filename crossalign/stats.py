"""Summary statistics of repeated measurements (runs that differ only in their seed)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


def mean_and_variance(values: Sequence[float]) -> tuple[float, float]:
    """The mean of ``values`` (two or more) and their sample variance, ``Σ (v − mean)² /
    (n − 1)``."""
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def t_interval(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean of ``values`` and the half-width of its 95% Student-t confidence interval,
    ``t.ppf(0.975, n - 1) · s / √n`` (``s``: the sample standard deviation); a single value
    has no interval (None). An empty sequence is a programming error."""
    n = len(values)
    if n == 0:
        raise ValueError("t_interval of no values")
    if n == 1:
        return math.fsum(values), None
    from scipy.stats import t

    mean, variance = mean_and_variance(values)
    return mean, float(t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * math.sqrt(variance) / math.sqrt(n)


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


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the order given:
    ``p_(i) · (m − i + 1)`` over the sorted p-values, made monotone and capped at 1. NaN
    p-values are left out of the family and stay NaN."""
    kept = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    out = [float("nan")] * len(pvalues)
    m, running = len(kept), 0.0
    for rank, (p, i) in enumerate(kept):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg q-values (false discovery rate), in the order given
    (``scipy.stats.false_discovery_control``); NaN p-values are left out and stay NaN."""
    kept = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    out = [float("nan")] * len(pvalues)
    if kept:
        from scipy.stats import false_discovery_control

        for i, q in zip(kept, false_discovery_control([pvalues[i] for i in kept])):
            out[i] = float(q)
    return out


@dataclass
class ContrastTest:
    """A one-sided test of ``D > 0`` for a contrast ``D`` of group means, with its estimate."""

    estimate: float
    """The contrast at the groups' means."""
    low: float
    """The lower end of its two-sided 95% interval."""
    high: float
    """The upper end."""
    p: float
    """One-sided p of ``D > 0`` (small: evidence that D > 0)."""
    p_opposite: float
    """One-sided p of ``D < 0`` (small: evidence that D < 0)."""
    mde: float | None = None
    """The smallest true |D| the test finds with 80% power at α = 0.05 (linear contrasts)."""


def linear_contrast(
    terms: Sequence[tuple[float, Sequence[float]]], constant: float = 0.0
) -> ContrastTest:
    """Welch's test of ``D = Σ c_i · mean(x_i) + constant > 0`` over independent groups
    ``terms = [(c_i, x_i), ...]``: ``SE² = Σ c_i² s_i² / n_i`` with Welch–Satterthwaite
    degrees of freedom ``SE⁴ / Σ (c_i² s_i² / n_i)² / (n_i − 1)``, Student-t interval and
    p-values. With two groups and ``c = (1, −1)`` this is ``scipy.stats.ttest_ind(...,
    equal_var=False)``. Every group needs two values; a zero standard error gives p 0 or 1."""
    from scipy.stats import t

    estimate, var, dof_den = constant, 0.0, 0.0
    for c, x in terms:
        n = len(x)
        if n < 2:
            raise ValueError("linear_contrast: every group needs at least two values")
        mean, s2 = mean_and_variance(x)
        estimate += c * mean
        part = c * c * s2 / n
        var += part
        dof_den += part * part / (n - 1)
    se = math.sqrt(var)
    if se == 0.0:
        p = 0.0 if estimate > 0 else 1.0
        return ContrastTest(estimate, estimate, estimate, p, 0.0 if estimate < 0 else 1.0, 0.0)
    dof = var * var / dof_den
    half = float(t.ppf(0.975, dof)) * se
    stat = estimate / se
    mde = (float(t.ppf(0.95, dof)) + float(t.ppf(0.8, dof))) * se
    return ContrastTest(
        estimate,
        estimate - half,
        estimate + half,
        float(t.sf(stat, dof)),
        float(t.cdf(stat, dof)),
        mde,
    )


def bootstrap_contrast(
    statistic: Callable[[Sequence[float]], float],
    groups: Sequence[Sequence[Sequence[float]]],
    *,
    resamples: int = 10000,
    seed: int = 0,
) -> ContrastTest:
    """A percentile bootstrap over seeds for a non-linear contrast (e.g. a ratio of means).
    ``groups`` are independent groups (runs), each a list of per-seed rows of measures (the
    rows of a group stay together: measures of one seed are paired). Each group's rows are
    resampled with replacement ``resamples`` times (a fixed ``seed``); ``statistic`` gets the
    column means of every group, concatenated in order. The interval is the 2.5th–97.5th
    percentile, ``p`` the share of resamples with ``D ≤ 0`` and ``p_opposite`` the share with
    ``D ≥ 0``; a resample whose statistic is not finite (a zero denominator) counts against
    both sides."""
    import numpy as np

    rng = np.random.default_rng(seed)
    means, point = [], []
    for rows in groups:
        arr = np.asarray(rows, dtype=float)
        if arr.ndim != 2 or len(arr) < 2:
            raise ValueError("bootstrap_contrast: every group needs at least two rows")
        picks = rng.integers(0, len(arr), size=(resamples, len(arr)))
        means.append(arr[picks].mean(axis=1))  # resamples x measures
        point.extend(float(m) for m in arr.mean(axis=0))
    stack = np.concatenate(means, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.array([statistic(row) for row in stack], dtype=float)
    finite = values[np.isfinite(values)]
    bad = resamples - len(finite)
    low, high = np.percentile(finite, [2.5, 97.5]) if len(finite) else (math.nan, math.nan)
    return ContrastTest(
        float(statistic(point)),
        float(low),
        float(high),
        float((np.sum(finite <= 0) + bad) / resamples),
        float((np.sum(finite >= 0) + bad) / resamples),
    )
