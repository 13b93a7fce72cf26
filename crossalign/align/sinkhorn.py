"""Entropic optimal transport between the subwords of a sentence pair, by Sinkhorn iterations
in the log domain, batched over pairs of different lengths with padding masks."""

from __future__ import annotations

import torch


def sinkhorn_log(
    f_sim: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    mu: float = 1.0,
    n_iter: int = 2,
) -> torch.Tensor:
    """Log of the entropic transport plan between source and target tokens (XLM-Align §3.1).

    The plan ``T = diag(u) K diag(v)`` with kernel ``K_ij = exp(f_sim(i, j) / μ)`` moves the
    uniform distribution ``a_i = 1/m`` over the real source tokens onto ``b_j = 1/n`` over the
    real target tokens. Each iteration first scales columns, then rows (as POT's
    ``ot.sinkhorn``, whose cost is ``M = -f_sim`` and regularisation ``reg = μ``)::

        v <- b / (Kᵀ u)        u <- a / (K v)

    so after the last iteration the row marginals are exact and the column marginals
    approximate. The authors' aligner (2 iterations on the clamped dot products) normalises
    columns then rows of ``K`` to sum 1; its plan is ``m · T``, with the same argmaxes.
    Working with ``log u``, ``log v`` and ``logsumexp`` keeps small ``μ`` from underflowing.

    f_sim [B, m, n] (float), src_mask [B, m] and tgt_mask [B, n] (bool, True at real tokens)
    -> log T [B, m, n], ``-inf`` wherever the row or the column is padding (everywhere in a
    pair with an empty side). ``n_iter = 0`` returns ``log K`` (masked).
    """
    neg_inf = torch.tensor(float("-inf"), dtype=f_sim.dtype, device=f_sim.device)
    # a pair with an empty side transports nothing: treat all its tokens as padding
    src_mask, tgt_mask = (
        src_mask & tgt_mask.any(1, keepdim=True),
        tgt_mask & src_mask.any(1, keepdim=True),
    )
    pair = src_mask[:, :, None] & tgt_mask[:, None, :]
    log_k = torch.where(pair, f_sim / mu, neg_inf)
    n_src = src_mask.sum(1, keepdim=True).clamp(min=1).to(f_sim.dtype)
    n_tgt = tgt_mask.sum(1, keepdim=True).clamp(min=1).to(f_sim.dtype)
    log_a = torch.where(src_mask, -n_src.log(), neg_inf)  # [B, m]
    log_b = torch.where(tgt_mask, -n_tgt.log(), neg_inf)  # [B, n]
    log_u = torch.zeros_like(log_a)
    log_v = torch.zeros_like(log_b)
    for _ in range(n_iter):
        log_v = torch.where(
            tgt_mask, log_b - torch.logsumexp(log_k + log_u[:, :, None], dim=1), neg_inf
        )
        log_u = torch.where(
            src_mask, log_a - torch.logsumexp(log_k + log_v[:, None, :], dim=2), neg_inf
        )
    return log_u[:, :, None] + log_k + log_v[:, None, :]
