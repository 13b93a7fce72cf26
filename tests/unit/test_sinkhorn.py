"""Log-domain batched Sinkhorn against POT (the independent oracle) and against itself per pair."""

import numpy as np
import pytest
import torch

from crossalign.align.sinkhorn import sinkhorn_log

ot = pytest.importorskip("ot")


def pot_plan(f_sim: np.ndarray, mu: float, n_iter: int, method: str = "sinkhorn") -> np.ndarray:
    """POT's plan for cost -f_sim, regularisation mu, uniform marginals, exactly n_iter
    iterations (stopThr=0 never stops early)."""
    m, n = f_sim.shape
    a, b = np.full(m, 1.0 / m), np.full(n, 1.0 / n)
    return ot.sinkhorn(a, b, -f_sim, mu, method=method, numItermax=n_iter, stopThr=0.0, warn=False)


def ours(f_sim: np.ndarray, mu: float, n_iter: int) -> np.ndarray:
    m, n = f_sim.shape
    ones = torch.ones
    log_t = sinkhorn_log(
        torch.from_numpy(f_sim)[None],
        ones(1, m, dtype=torch.bool),
        ones(1, n, dtype=torch.bool),
        mu,
        n_iter,
    )
    return log_t[0].exp().numpy()


@pytest.mark.parametrize("n_iter", [1, 2, 7, 50])
@pytest.mark.parametrize("mu", [1.0, 0.3])
def test_matches_pot_iteration_for_iteration(mu, n_iter):
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
    plan = ours(rng.normal(size=(5, 8)), 1.0, 500)
    np.testing.assert_allclose(plan.sum(1), np.full(5, 1 / 5), atol=1e-9)
    np.testing.assert_allclose(plan.sum(0), np.full(8, 1 / 8), atol=1e-9)


def test_zero_iterations_is_the_kernel():
    f_sim = np.log(np.array([[0.5, 0.25], [1.0, 2.0]]))
    np.testing.assert_allclose(ours(f_sim, 1.0, 0), np.exp(f_sim))


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
