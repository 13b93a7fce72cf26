"""Entropic optimal transport between the subwords of a sentence pair, by Sinkhorn iterations
in the log domain, batched over pairs of different lengths with padding masks."""

from __future__ import annotations

import torch

from crossalign.align.config import SINKHORN_ORDERS


def sinkhorn_log(
    f_sim: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    mu: float = 1.0,
    n_iter: int = 2,
    order: str = "rows-first",
) -> torch.Tensor:
    """Log of the entropic transport plan between source and target tokens (XLM-Align §3.1).

    The plan ``T = diag(u) K diag(v)`` with kernel ``K_ij = exp(f_sim(i, j) / μ)`` moves the
    uniform distribution ``a_i = 1/m`` over the real source tokens onto ``b_j = 1/n`` over the
    real target tokens.

    - ``rows-first`` (Eq. 6 of the paper, the default): ``v⁰ = 1``, then each iteration
      ``u <- a / (K v)``, ``v <- b / (Kᵀ u)``; after the last one the column marginals are
      exact. The paper writes the updates with unit marginals; uniform marginals only scale
      the whole plan by a constant.
    - ``columns-first`` (POT's ``ot.sinkhorn`` with cost ``M = -f_sim`` and ``reg = μ``, and
      the released XLM-Align aligner, which normalises the columns then the rows of ``K``):
      ``u⁰ = 1``, then ``v <- b / (Kᵀ u)``, ``u <- a / (K v)``.

    With few iterations the two orders give different plans and can give different argmax
    links. One invariance holds exactly: in ``rows-first`` order a positive rescaling of the
    rows of ``K`` (``diag(r) K``) leaves the plan unchanged, and in ``columns-first`` order a
    rescaling of its columns does (tested). Working with ``log u``, ``log v`` and
    ``logsumexp`` keeps small ``μ`` from underflowing.

    f_sim [B, m, n] (float), src_mask [B, m] and tgt_mask [B, n] (bool, True at real tokens)
    -> log T [B, m, n], ``-inf`` wherever the row or the column is padding (everywhere in a
    pair with an empty side). ``n_iter = 0`` returns ``log K`` (masked).
    """
    if order not in SINKHORN_ORDERS:
        raise ValueError(f"unknown Sinkhorn order {order!r}; expected one of {SINKHORN_ORDERS}")
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
    log_u = torch.where(src_mask, 0.0, neg_inf)
    log_v = torch.where(tgt_mask, 0.0, neg_inf)

    def rows(log_v: torch.Tensor) -> torch.Tensor:  # u <- a / (K v)
        return torch.where(
            src_mask, log_a - torch.logsumexp(log_k + log_v[:, None, :], dim=2), neg_inf
        )

    def columns(log_u: torch.Tensor) -> torch.Tensor:  # v <- b / (Kᵀ u)
        return torch.where(
            tgt_mask, log_b - torch.logsumexp(log_k + log_u[:, :, None], dim=1), neg_inf
        )

    for _ in range(n_iter):
        if order == "rows-first":
            log_u = rows(log_v)
            log_v = columns(log_u)
        else:
            log_v = columns(log_u)
            log_u = rows(log_v)
    plan = log_u[:, :, None] + log_k + log_v[:, None, :]
    return torch.where(pair, plan, neg_inf)
