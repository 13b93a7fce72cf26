"""Entropic optimal transport between the subwords of a sentence pair by Sinkhorn iterations,
batched over pairs of different lengths with padding masks: the authors' arithmetic (the
kernel's columns and rows divided by their sums) for μ = 1, the log domain for any μ."""

from __future__ import annotations

from typing import NamedTuple

import torch

from crossalign.align.config import SINKHORN_ORDERS


class SinkhornPlans(NamedTuple):
    """The transport plan after the last Sinkhorn update and the one before it (or their logs,
    from the ``_log`` functions)."""

    plan: torch.Tensor
    """π [B, m, n]: the plan after the last update."""
    half: torch.Tensor
    """ξ [B, m, n]: the plan before the last update (half an iteration earlier; the
    kernel itself when ``n_iter = 0``). The released XLM-Align aligner takes the column
    argmaxes from it (``crossalign.align.extract.released_argmax_links``)."""


def floored_scores(scores: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The authors' Sinkhorn kernel for μ = 1: the dot products with every ``S <= 0`` set to
    ``ε`` (``S[S <= 0] = 1e-6`` in ``_sinkhorn_iter`` of their pre-training task). The paper
    writes ``f_sim = log max(ε, S)``, which differs only for ``0 < S < ε``.

    scores [B, m, n] -> [B, m, n]."""
    return torch.where(scores <= 0, torch.full_like(scores, eps), scores)


def transport_plans(
    scores: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    mu: float = 1.0,
    n_iter: int = 2,
    order: str = "columns-first",
    eps: float = 1e-6,
) -> SinkhornPlans:
    """The plans π and ξ (not their logs) of XLM-Align's optimal transport (§3.1, Eq. 6) from
    the dot products ``S`` of a pair's subwords, kernel ``K = floored_scores(S)^(1/μ)``.

    With ``μ = 1`` (the paper's and the authors' setting) by ``sinkhorn_scaling``, the
    authors' own arithmetic, so equal scores stay exactly equal and argmax ties break as
    theirs do; otherwise by ``sinkhorn_log_plans`` on ``f_sim = log K·μ``, exponentiated (the
    two differ by a constant factor per pair: unit against uniform marginals).

    scores [B, m, n], src_mask [B, m], tgt_mask [B, n] -> ``SinkhornPlans`` of [B, m, n]
    tensors, 0 at padding.
    """
    floored = floored_scores(scores, eps)
    if mu == 1.0:
        return sinkhorn_scaling(floored, src_mask, tgt_mask, n_iter, order)
    logs = sinkhorn_log_plans(floored.log(), src_mask, tgt_mask, mu, n_iter, order)
    return SinkhornPlans(logs.plan.exp(), logs.half.exp())


def sinkhorn_scaling(
    kernel: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    n_iter: int = 2,
    order: str = "columns-first",
) -> SinkhornPlans:
    """Sinkhorn as XLM-Align's authors compute it (``_sinkhorn_iter`` of their pre-training
    task and released aligner): starting from ``π = K``, each iteration divides every column
    of π by its sum (giving ξ), then every row of ξ by its sum (giving π) — unit marginals,
    as Eq. 6 writes them. ``rows-first`` swaps the two steps (Eq. 6's order). After the last
    step the rows (columns-first) or the columns (rows-first) sum to 1.

    kernel [B, m, n] (positive at real pairs), src_mask [B, m], tgt_mask [B, n] ->
    ``SinkhornPlans`` (π, ξ) of [B, m, n] tensors, 0 wherever the row or the column is
    padding. ``n_iter = 0`` gives ``K`` (masked) for both.
    """
    if order not in SINKHORN_ORDERS:
        raise ValueError(f"unknown Sinkhorn order {order!r}; expected one of {SINKHORN_ORDERS}")
    pair = src_mask[:, :, None] & tgt_mask[:, None, :]
    zero = torch.zeros((), dtype=kernel.dtype, device=kernel.device)
    pi = torch.where(pair, kernel, zero)

    def normalise(x: torch.Tensor, dim: int) -> torch.Tensor:
        # Sum along the contiguous last axis, so that every row (column) is reduced by the
        # same code whatever its index: equal rows (columns) get bit-equal sums, and ties the
        # authors' plan holds exactly stay ties here.
        lines = x if dim == 2 else x.transpose(1, 2).contiguous()
        total = lines.sum(dim=2, keepdim=True)
        total = total if dim == 2 else total.transpose(1, 2)
        return torch.where(pair, x / torch.where(total > 0, total, 1.0), zero)

    first, second = (1, 2) if order == "columns-first" else (2, 1)
    xi = pi
    for _ in range(n_iter):
        xi = normalise(pi, first)
        pi = normalise(xi, second)
    return SinkhornPlans(pi, xi)


def sinkhorn_log_plans(
    f_sim: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    mu: float = 1.0,
    n_iter: int = 2,
    order: str = "columns-first",
) -> SinkhornPlans:
    """Log of the entropic transport plan between source and target tokens (XLM-Align §3.1),
    and of the plan half an iteration before it.

    The plan ``T = diag(u) K diag(v)`` with kernel ``K_ij = exp(f_sim(i, j) / μ)`` moves the
    uniform distribution ``a_i = 1/m`` over the real source tokens onto ``b_j = 1/n`` over the
    real target tokens.

    - ``columns-first`` (the default: the authors' pre-training task and released aligner,
      ``_sinkhorn_iter``, which normalise the columns then the rows of ``K``; also POT's
      ``ot.sinkhorn`` with cost ``M = -f_sim`` and ``reg = μ``): ``u⁰ = 1``, then each
      iteration ``v <- b / (Kᵀ u)``, ``u <- a / (K v)``; after the last one the row marginals
      are exact.
    - ``rows-first`` (Eq. 6 of the paper as written): ``v⁰ = 1``, then ``u <- a / (K v)``,
      ``v <- b / (Kᵀ u)``. The paper writes the updates with unit marginals; uniform
      marginals only scale the whole plan by a constant.

    With few iterations the two orders give different plans and can give different argmax
    links. One invariance holds exactly: in ``rows-first`` order a positive rescaling of the
    rows of ``K`` (``diag(r) K``) leaves the plan unchanged, and in ``columns-first`` order a
    rescaling of its columns does (tested). Working with ``log u``, ``log v`` and
    ``logsumexp`` keeps small ``μ`` from underflowing.

    f_sim [B, m, n] (float), src_mask [B, m] and tgt_mask [B, n] (bool, True at real tokens)
    -> ``SinkhornPlans`` of log π and log ξ [B, m, n], ``-inf`` wherever the row or the column
    is padding (everywhere in a pair with an empty side). ``n_iter = 0`` gives ``log K``
    (masked) for both.
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

    def plan(log_u: torch.Tensor, log_v: torch.Tensor) -> torch.Tensor:
        return torch.where(pair, log_u[:, :, None] + log_k + log_v[:, None, :], neg_inf)

    half = (log_u, log_v)  # the scalings between the last two updates
    for _ in range(n_iter):
        if order == "rows-first":
            log_u = rows(log_v)
            half = (log_u, log_v)
            log_v = columns(log_u)
        else:
            log_v = columns(log_u)
            half = (log_u, log_v)
            log_u = rows(log_v)
    return SinkhornPlans(plan(log_u, log_v), plan(*half))
