"""The per-decade statistics of ``eval cooc-compare``: Student-t 95% intervals of the mean."""

import math

import numpy as np
import pytest
from scipy import stats

from crossalign.evals.cooc_phrases import binned_statistics, compare_metrics


def test_bins_carry_student_t_intervals_from_scipy():
    x_a = np.array([2.0, 3.0, 5.0, 20.0, 30.0, 40.0, 300.0])
    diff = np.array([0.1, 0.4, 0.2, 1.0, 1.5, 0.7, 0.3])
    diff_random = np.array([2.0, 1.0, 3.0, 0.5, 2.5, 1.5, 4.0])
    rows = binned_statistics(x_a, diff, diff_random)
    assert [r["n"] for r in rows] == [3, 3, 1]
    for row, sel in zip(rows[:2], (slice(0, 3), slice(3, 6))):
        for key, values in (("translated", diff[sel]), ("random", diff_random[sel])):
            lo, hi = stats.t.interval(0.95, len(values) - 1, values.mean(), stats.sem(values))
            assert row[key]["mean"] == pytest.approx(values.mean(), rel=1e-12)
            assert row[key]["ci95"] == pytest.approx([lo, hi], rel=1e-12)
    assert rows[2]["translated"] == {"mean": pytest.approx(0.3), "ci95": None}
    metrics = compare_metrics({"phrases": 7, "overall": rows[0], "bins": rows})
    assert math.isnan(metrics["bin2/translated_ci95"])
    lo, hi = rows[1]["random"]["ci95"]
    assert metrics["bin1/random_ci95"] == pytest.approx((hi - lo) / 2)
