"""Log-domain batched Sinkhorn against POT (the independent oracle) and against itself per pair."""

import numpy as np
import pytest
import torch

from crossalign.align.sinkhorn import sinkhorn_log_plans, sinkhorn_scaling


def sinkhorn_log(*args):
    """The log plan π alone."""
    return sinkhorn_log_plans(*args).plan


ot = pytest.importorskip("ot")


def pot_plan(f_sim: np.ndarray, mu: float, n_iter: int, method: str = "sinkhorn") -> np.ndarray:
    """POT's plan for cost -f_sim, regularisation mu, uniform marginals, exactly n_iter
    iterations (stopThr=0 never stops early)."""
    m, n = f_sim.shape
    a, b = np.full(m, 1.0 / m), np.full(n, 1.0 / n)
    return ot.sinkhorn(a, b, -f_sim, mu, method=method, numItermax=n_iter, stopThr=0.0, warn=False)


def ours(f_sim: np.ndarray, mu: float, n_iter: int, order: str = "columns-first") -> np.ndarray:
    m, n = f_sim.shape
    ones = torch.ones
    log_t = sinkhorn_log(
        torch.from_numpy(f_sim)[None],
        ones(1, m, dtype=torch.bool),
        ones(1, n, dtype=torch.bool),
        mu,
        n_iter,
        order,
    )
    return log_t[0].exp().numpy()


def eq6(kernel: np.ndarray, n_iter: int) -> np.ndarray:
    """XLM-Align Eq. 6 as written: v⁰ = 1; u <- 1 / (K v); v <- 1 / (Kᵀ u);
    T = diag(u) K diag(v)."""
    v = np.ones(kernel.shape[1])
    u = np.ones(kernel.shape[0])
    for _ in range(n_iter):
        u = 1.0 / (kernel @ v)
        v = 1.0 / (kernel.T @ u)
    return u[:, None] * kernel * v[None, :]


def mutual_argmax(plan: np.ndarray) -> set[tuple[int, int]]:
    return {(i, int(plan[i].argmax())) for i in range(plan.shape[0])} & {
        (int(plan[:, j].argmax()), j) for j in range(plan.shape[1])
    }


@pytest.mark.parametrize("n_iter", [1, 2, 5])
def test_rows_first_is_eq6_up_to_a_constant(n_iter):
    rng = np.random.default_rng(n_iter)
    for _ in range(20):
        m, n = rng.integers(1, 9, size=2)
        kernel = rng.uniform(1e-3, 1.0, size=(m, n))
        plan = ours(np.log(kernel), 1.0, n_iter, "rows-first")
        literal = eq6(kernel, n_iter)
        ratio = plan / literal  # uniform marginals instead of ones: one constant factor
        np.testing.assert_allclose(ratio, ratio.flat[0], rtol=1e-9)


def test_the_order_changes_links_and_rows_first_follows_eq6():
    kernel = np.array([[0.10, 0.17, 0.19], [0.66, 0.01, 0.01], [0.49, 0.03, 0.11]])
    rows = ours(np.log(kernel), 1.0, 2, "rows-first")
    cols = ours(np.log(kernel), 1.0, 2, "columns-first")
    assert mutual_argmax(rows) == mutual_argmax(eq6(kernel, 2))
    assert mutual_argmax(rows) != mutual_argmax(cols)


@pytest.mark.parametrize("order", ["rows-first", "columns-first"])
def test_invariance_to_rescaling_the_first_scaled_side(order):
    """The invariance the docstring claims: rows-first ignores a row scale of K, columns-first
    a column scale; the other side's scale changes the 2-iteration plan and its links."""
    rng = np.random.default_rng(7)
    changed = 0
    for _ in range(200):
        kernel = rng.uniform(1e-3, 1.0, size=(3, 3))
        scale = rng.uniform(0.2, 5.0, size=3)
        same_side = kernel * (scale[:, None] if order == "rows-first" else scale[None, :])
        other_side = kernel * (scale[None, :] if order == "rows-first" else scale[:, None])
        plan = ours(np.log(kernel), 1.0, 2, order)
        np.testing.assert_allclose(ours(np.log(same_side), 1.0, 2, order), plan, rtol=1e-9)
        changed += mutual_argmax(ours(np.log(other_side), 1.0, 2, order)) != mutual_argmax(plan)
    assert changed > 0  # no invariance to the other side's scale


def test_unknown_order():
    x = torch.zeros(1, 2, 2)
    mask = torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="unknown Sinkhorn order"):
        sinkhorn_log(x, mask, mask, 1.0, 2, "diagonal")


@pytest.mark.parametrize("n_iter", [1, 2, 7, 50])
@pytest.mark.parametrize("mu", [1.0, 0.3])
def test_columns_first_matches_pot_iteration_for_iteration(mu, n_iter):
    rng = np.random.default_rng(n_iter)
    for _ in range(10):
        m, n = rng.integers(1, 15, size=2)
        f_sim = np.log(rng.uniform(1e-3, 1.0, size=(m, n)))  # log of clamped dot products
        assert np.abs(ours(f_sim, mu, n_iter) - pot_plan(f_sim, mu, n_iter)).max() <= 1e-5


def test_small_mu_stays_finite_and_matches_pot_log_domain():
    rng = np.random.default_rng(0)
    f_sim = rng.normal(scale=5.0, size=(9, 6))  # exp(f / 0.01) overflows float64
    plan = ours(f_sim, 0.01, 20)
    assert np.isfinite(plan).all()
    assert np.abs(plan - pot_plan(f_sim, 0.01, 20, method="sinkhorn_log")).max() <= 1e-5


def test_converges_to_the_uniform_marginals():
    rng = np.random.default_rng(1)
    plan = ours(rng.normal(size=(5, 8)), 1.0, 500, "rows-first")
    np.testing.assert_allclose(plan.sum(1), np.full(5, 1 / 5), atol=1e-9)
    np.testing.assert_allclose(plan.sum(0), np.full(8, 1 / 8), atol=1e-9)


def test_zero_iterations_is_the_kernel():
    f_sim = np.log(np.array([[0.5, 0.25], [1.0, 2.0]]))
    for order in ("rows-first", "columns-first"):
        np.testing.assert_allclose(ours(f_sim, 1.0, 0, order), np.exp(f_sim))


def test_batched_with_padding_equals_per_pair():
    gen = torch.Generator().manual_seed(0)
    sizes = [(3, 5), (7, 2), (1, 1), (6, 6), (4, 0)]
    m, n = 7, 6
    f_sim = torch.randn(len(sizes), m, n, generator=gen, dtype=torch.float64) * 3  # junk in padding
    src_mask = torch.arange(m)[None] < torch.tensor([s for s, _ in sizes])[:, None]
    tgt_mask = torch.arange(n)[None] < torch.tensor([t for _, t in sizes])[:, None]
    batched = sinkhorn_log(f_sim, src_mask, tgt_mask, 0.5, 3)
    for b, (ms, ns) in enumerate(sizes):
        alone = sinkhorn_log(
            f_sim[b : b + 1, :ms, :ns],
            torch.ones(1, ms, dtype=torch.bool),
            torch.ones(1, ns, dtype=torch.bool),
            0.5,
            3,
        )
        torch.testing.assert_close(batched[b, :ms, :ns], alone[0], rtol=0, atol=1e-12)
        padding = ~(src_mask[b, :, None] & tgt_mask[b, None, :])
        assert torch.isneginf(batched[b][padding]).all()
    assert not batched.isnan().any()


@pytest.mark.parametrize("order", ["rows-first", "columns-first"])
@pytest.mark.parametrize("n_iter", [0, 1, 2, 5])
def test_scaling_equals_the_log_domain_up_to_a_constant_plan_and_half(order, n_iter):
    """The authors' arithmetic (unit marginals) and the log domain (uniform marginals) give
    proportional plans π and proportional half-step plans ξ, batched with padding."""
    rng = np.random.default_rng(n_iter)
    kernel = torch.from_numpy(rng.uniform(1e-3, 1.0, size=(4, 6, 7)))
    src_mask = torch.arange(6)[None] < torch.tensor([6, 3, 1, 2])[:, None]
    tgt_mask = torch.arange(7)[None] < torch.tensor([7, 5, 2, 1])[:, None]
    direct = sinkhorn_scaling(kernel, src_mask, tgt_mask, n_iter, order)
    logs = sinkhorn_log_plans(kernel.log(), src_mask, tgt_mask, 1.0, n_iter, order)
    for got, log_ref in zip(direct, logs):
        for b in range(4):
            m, n = int(src_mask[b].sum()), int(tgt_mask[b].sum())
            ratio = got[b, :m, :n] / log_ref[b, :m, :n].exp()
            torch.testing.assert_close(ratio, torch.full_like(ratio, float(ratio[0, 0])))
            pad = ~(src_mask[b, :, None] & tgt_mask[b, None, :])
            assert (got[b][pad] == 0).all()


def test_half_is_the_plan_before_the_last_update():
    """ξ of 2 columns-first iterations is π of 1.5 iterations: π₁ with its columns normalised."""
    kernel = torch.tensor([[[0.10, 0.17, 0.19], [0.66, 0.01, 0.01], [0.49, 0.03, 0.11]]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    one = sinkhorn_scaling(kernel, mask, mask, 1).plan
    two = sinkhorn_scaling(kernel, mask, mask, 2)
    torch.testing.assert_close(two.half, one / one.sum(1, keepdim=True))
    torch.testing.assert_close(two.plan, two.half / two.half.sum(2, keepdim=True))


def test_transport_plans_floor_and_other_mu():
    """Scores <= 0 become ε; μ = 1 is the authors' arithmetic, another μ the log domain on
    ``log K`` (kernel ``K^(1/μ)``), both returned as plans (not logs)."""
    from crossalign.align.sinkhorn import floored_scores, transport_plans

    scores = torch.tensor([[[2.0, -1.0, 0.0], [0.5, 3.0, 1e-9]]], dtype=torch.float64)
    floored = floored_scores(scores, 1e-6)
    assert floored[0, 0, 1] == floored[0, 0, 2] == 1e-6 and floored[0, 1, 2] == 1e-9
    sm, tm = torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)
    one = transport_plans(scores, sm, tm, 1.0, 2)
    assert torch.equal(one.plan, sinkhorn_scaling(floored, sm, tm, 2).plan)
    half = transport_plans(scores, sm, tm, 0.5, 3, "rows-first")
    logs = sinkhorn_log_plans(floored.log(), sm, tm, 0.5, 3, "rows-first")
    torch.testing.assert_close(half.plan, logs.plan.exp())
    torch.testing.assert_close(half.half, logs.half.exp())
