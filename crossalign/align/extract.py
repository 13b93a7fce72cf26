"""Links from a score matrix: SimAlign's ArgMax and IterMax, XLM-Align's optimal-transport
extraction (the released aligner's mutual argmax, and the paper's alignment filtering, Eq. 7-9,
read literally), and awesome-align's softmax extraction. All batched: scores [B, m, n] with
masks src_mask [B, m] and tgt_mask [B, n] (True at real tokens); links are bool [B, m, n]."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from crossalign.align.config import METHODS, OT_FILTERS
from crossalign.align.similarity import cosine_scores, dot_scores
from crossalign.align.sinkhorn import transport_plans


def _mutual_argmax(scores: torch.Tensor, column_scores: torch.Tensor | None = None) -> torch.Tensor:
    """bool [B, m, n]: (i, j) where j is the argmax of row i of ``scores`` and i the argmax of
    column j of ``column_scores`` (default ``scores``), the first maximum on ties, as
    ``numpy.argmax`` and ``torch.argmax``."""
    m, n = scores.shape[1:]
    if m == 0 or n == 0:
        return torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
    if column_scores is None:
        column_scores = scores
    forward = F.one_hot(scores.argmax(dim=2), n).bool()  # [B, m, n]
    backward = F.one_hot(column_scores.argmax(dim=1), m).bool().transpose(1, 2)  # [B, m, n]
    return forward & backward


def argmax_links(
    scores: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
) -> torch.Tensor:
    """SimAlign's ArgMax: the intersection of the forward and backward argmax alignments,
    ``A = {(i, j) : j = argmax_k s_ik  and  i = argmax_k s_kj}``, over real tokens only.

    scores [B, m, n], src_mask [B, m], tgt_mask [B, n] -> bool [B, m, n].
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    return _mutual_argmax(scores.masked_fill(~valid, float("-inf"))) & valid


def released_argmax_links(
    plan: torch.Tensor, half: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
) -> torch.Tensor:
    """The released XLM-Align aligner's extraction (``extract_wa_from_pi_xi`` of
    ``word_aligner/xlmalign-ot-aligner.py``): one mutual argmax, the forward argmax of each row
    of the final plan π and the backward argmax of each column of ξ, the plan before the last
    Sinkhorn update, with no further filtering::

        A = {(i, j) : j = argmax_k π_ik  and  i = argmax_k ξ_kj}

    In ``columns-first`` order ξ is π before its rows are normalised, so the row argmaxes of
    π and ξ agree and ``A`` is the mutual argmax of ξ; in ``rows-first`` order it is the
    mutual argmax of π. The first maximum wins ties, as in the released code.

    plan, half [B, m, n] (π and ξ, or their logs: only argmaxes are taken), src_mask [B, m],
    tgt_mask [B, n] -> bool [B, m, n].
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    neg_inf = float("-inf")
    return (
        _mutual_argmax(plan.masked_fill(~valid, neg_inf), half.masked_fill(~valid, neg_inf)) & valid
    )


def itermax_links(
    scores: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    max_count: int = 2,
    alpha: float = 0.9,
) -> torch.Tensor:
    """SimAlign's IterMax (its ``iter_max``); ``ot_filter="itermax"`` applies it to the transport
    plan, as the authors' pre-training task does to self-label (``iter_max`` of
    ``infoxlm/tasks/xlm_align.py`` in microsoft/unilm, the same function with ``max_count =
    --wa_max_count``, "the number of iterative alignment filtering").

    Round 1 is ArgMax. Each further round (``max_count - 1`` of them) extracts ArgMax links
    again from the scores reweighted by what is already aligned::

        s'_ij = s_ij · min(1, α·[i unaligned] + α·[j unaligned])

    (1 if both tokens are still free, α if one is, 0 if neither), keeping only new links with
    at least one free end. A pair with at most 2 tokens on a side, or whose source or target
    tokens are all aligned, gets no further links, as in SimAlign. SimAlign stops early when a
    round adds nothing; every later round would add nothing either, so running all rounds
    gives the same links.

    scores [B, m, n] (non-negative: SimAlign's similarity or a transport plan), src_mask
    [B, m], tgt_mask [B, n] -> bool [B, m, n].
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    links = argmax_links(scores, src_mask, tgt_mask)
    long_enough = (src_mask.sum(1) > 2) & (tgt_mask.sum(1) > 2)  # [B]
    for _ in range(max_count - 1):
        row_free = ~links.any(2) & src_mask  # [B, m]
        col_free = ~links.any(1) & tgt_mask  # [B, n]
        free_x = row_free[:, :, None].to(scores.dtype)
        free_y = col_free[:, None, :].to(scores.dtype)
        weight = (alpha * free_x + alpha * free_y).clamp(max=1.0)
        reweighted = torch.where(valid, scores * weight, float("-inf"))
        one_end_free = row_free[:, :, None] | col_free[:, None, :]
        active = long_enough & row_free.any(1) & col_free.any(1)
        links = links | (_mutual_argmax(reweighted) & one_end_free & active[:, None, None])
    return links


def union_links(
    scores: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
) -> torch.Tensor:
    """The union of the forward and backward argmax alignments,
    ``{(i, j) : j = argmax_k s_ik  or  i = argmax_k s_kj}`` (XLM-Align's ablation without
    alignment filtering).

    scores [B, m, n], src_mask [B, m], tgt_mask [B, n] -> bool [B, m, n].
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    m, n = scores.shape[1:]
    if m == 0 or n == 0:
        return torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
    masked = scores.masked_fill(~valid, float("-inf"))
    forward = F.one_hot(masked.argmax(dim=2), n).bool()
    backward = F.one_hot(masked.argmax(dim=1), m).bool().transpose(1, 2)
    return (forward | backward) & valid


def eq9_literal_links(
    scores: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    rounds: int = 2,
    alpha: float = 0.9,
) -> torch.Tensor:
    """XLM-Align's iterative alignment filtering (§3.1, Eq. 7-9) read literally, on a
    transport plan (``ot_filter="eq9-literal"``). Not what the authors ran: their pre-training
    task follows IterMax (``itermax_links``), as the paper says just before Eq. 8 ("we follow
    the procedure of Itermax"), and their aligner takes one mutual argmax
    (``released_argmax_links``). This reading adds a link per round to every pair, even a
    perfect one-to-one alignment, so its precision is lower.

    Round 1 (Eq. 7) takes the mutual argmaxes of ``A* = T``. Each further round (``rounds - 1``
    of them) discounts the scores of every token already aligned (Eq. 9)::

        A*_ij <- α · A*_ij   if row i or column j holds a link,   A*_ij otherwise

    and adds the mutual argmaxes of ``A*`` among the pairs not yet linked to the links
    (Eq. 8). Unlike IterMax, a pair whose two ends are both aligned still competes (with its
    score discounted), a new link needs no free end, and short sentences get no special
    case: on ``[[.9, .5, .1], [.5, .8, .1], [.1, .1, .05]]`` with α = 0.9, two rounds give
    ``{(0,0), (1,1)}`` then add ``(0,1)`` and ``(1,0)``, where IterMax adds ``(0,2)`` and
    ``(2,0)``. Each round adds at least the largest score among unlinked pairs.

    scores [B, m, n] (non-negative), src_mask [B, m], tgt_mask [B, n] -> bool [B, m, n].
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    links = argmax_links(scores, src_mask, tgt_mask)
    weighted = scores
    for _ in range(rounds - 1):
        touched = links.any(2)[:, :, None] | links.any(1)[:, None, :]
        weighted = torch.where(touched, alpha * weighted, weighted)
        candidates = valid & ~links
        new = _mutual_argmax(weighted.masked_fill(~candidates, float("-inf")))
        links = links | (new & candidates)
    return links


def softmax_probabilities(
    src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """awesome-align's two directional alignment probabilities (Dou & Neubig, EACL 2021, §2.1).

    With ``S = h_src h_tgtᵀ`` (dot products of the real subwords of a pair)::

        P_src→tgt = softmax(S) over the target axis,   P_tgt→src = softmax(S) over the source axis

    Padding takes no probability mass: both are 0 on every row or column of padding (and on
    a pair with an empty side).

    src [B, m, d], tgt [B, n, d], src_mask [B, m], tgt_mask [B, n]
    -> (P_src→tgt, P_tgt→src), each float [B, m, n].
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    scores = dot_scores(src, tgt).masked_fill(~valid, float("-inf"))
    # rows or columns of padding are all -inf: their softmax is NaN, replaced by 0
    src2tgt = torch.softmax(scores, dim=2).masked_fill(~valid, 0.0)
    tgt2src = torch.softmax(scores, dim=1).masked_fill(~valid, 0.0)
    return src2tgt, tgt2src


def awesome_align_probabilities(
    src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
) -> torch.Tensor:
    """The link probability awesome-align writes with ``--output_prob_file`` (its
    ``BertGuideHead``: a harmonic mean of the two directional softmaxes, each tempered by the
    square root of the other side's length)::

        a = softmax(S / sqrt(n)) over the target axis,  b = softmax(S / sqrt(m)) over the
        source axis,  p = 2ab / (a + b + 1e-9)

    with ``S = h_src h_tgtᵀ`` over the real subwords (m source, n target). src [B, m, d],
    tgt [B, n, d], src_mask [B, m], tgt_mask [B, n] -> float [B, m, n], 0 at padding.
    """
    valid = src_mask[:, :, None] & tgt_mask[:, None, :]
    scores = dot_scores(src, tgt)
    n_src = src_mask.sum(1).clamp(min=1).to(scores.dtype)[:, None, None]
    n_tgt = tgt_mask.sum(1).clamp(min=1).to(scores.dtype)[:, None, None]
    a = torch.softmax((scores / n_tgt.sqrt()).masked_fill(~valid, float("-inf")), dim=2)
    b = torch.softmax((scores / n_src.sqrt()).masked_fill(~valid, float("-inf")), dim=1)
    a, b = a.masked_fill(~valid, 0.0), b.masked_fill(~valid, 0.0)
    return (2 * a * b / (a + b + 1e-9)).masked_fill(~valid, 0.0)


def softmax_links(
    src2tgt: torch.Tensor, tgt2src: torch.Tensor, threshold: float = 1e-3
) -> torch.Tensor:
    """awesome-align's softmax extraction: ``A = {(i, j) : P_src→tgt(i, j) > c  and
    P_tgt→src(i, j) > c}`` for the threshold ``c`` (awesome-align: 1e-3).

    src2tgt, tgt2src [B, m, n] (from ``softmax_probabilities``; 0 at padding, so a
    threshold >= 0 links no padding) -> bool [B, m, n].
    """
    return (src2tgt > threshold) & (tgt2src > threshold)


class SubwordAlignment(NamedTuple):
    """Subword links of a batch of pairs and a score for each subword pair (see
    ``subword_alignment``)."""

    links: torch.Tensor
    """bool [B, m, n]."""
    scores: torch.Tensor
    """float [B, m, n], >= 0: the score the method gives each link (0 at padding)."""
    probs: torch.Tensor
    """float [B, m, n]: ``(P_src→tgt + P_tgt→src) / 2`` of ``softmax_probabilities``, the same
    for every method (``scores`` is this tensor for all but ``ot``)."""


def subword_alignment(
    src: torch.Tensor,
    tgt: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    method: str = "ot",
    sinkhorn_iters: int = 2,
    mu: float = 1.0,
    eps: float = 1e-6,
    filter_iters: int = 2,
    alpha: float = 0.9,
    sinkhorn_order: str = "columns-first",
    ot_filter: str = "argmax",
    softmax_threshold: float = 1e-3,
) -> SubwordAlignment:
    """Subword links of a batch of pairs from their hidden states, with a score per link.

    - ``ot`` (XLM-Align §3.1): transport plan ``T`` of the raw dot products ``h_iᵀ h_j``, those
      ``<= 0`` set to ``eps`` (``transport_plans``), by ``sinkhorn_iters`` Sinkhorn iterations
      in ``sinkhorn_order`` with regularisation ``μ``; then ``ot_filter`` extracts links from
      ``T`` (``plan_links``): ``argmax`` (the released aligner's mutual argmax), ``itermax``
      (IterMax on ``T``, the authors' self-labelling, ``filter_iters`` rounds, discount
      ``α``), ``eq9-literal`` (Eq. 7-9 read literally) or ``union`` (no filtering).
      A link's score is its entry ``T_ij`` of the plan scaled to sum to 1 over the pair (after
      the last update in the default order its rows hold 1/m each).
    - ``itermax``: SimAlign's IterMax on ``(cos + 1) / 2`` with ``max_count = filter_iters``.
    - ``argmax``: SimAlign's ArgMax on ``(cos + 1) / 2``.
    - ``softmax`` (awesome-align): both directional softmaxes of the dot products above
      ``softmax_threshold`` (``softmax_probabilities``, ``softmax_links``); a link's score is
      the probability awesome-align writes (``awesome_align_probabilities``).

    For ``itermax`` and ``argmax`` a link's score is the mean of the two directional
    probabilities, ``(P_src→tgt + P_tgt→src) / 2``, in [0, 1] (``probs``, which the pair score
    uses for every method).

    src [B, m, d], tgt [B, n, d], src_mask [B, m], tgt_mask [B, n] -> ``SubwordAlignment``
    of [B, m, n] tensors.
    """
    if method not in METHODS:
        raise ValueError(f"unknown alignment method {method!r}; expected one of {METHODS}")
    src2tgt, tgt2src = softmax_probabilities(src, tgt, src_mask, tgt_mask)
    probs = (src2tgt + tgt2src) / 2
    if method == "ot":
        plan, half = transport_plans(
            dot_scores(src, tgt), src_mask, tgt_mask, mu, sinkhorn_iters, sinkhorn_order, eps
        )
        links = plan_links(plan, half, src_mask, tgt_mask, ot_filter, filter_iters, alpha)
        total = plan.sum(dim=(1, 2), keepdim=True)
        return SubwordAlignment(links, plan / torch.where(total > 0, total, 1.0), probs)
    if method == "softmax":
        links = softmax_links(src2tgt, tgt2src, softmax_threshold)
        scores = awesome_align_probabilities(src, tgt, src_mask, tgt_mask)
        return SubwordAlignment(links, scores, probs)
    if method == "itermax":
        links = itermax_links(cosine_scores(src, tgt), src_mask, tgt_mask, filter_iters, alpha)
    else:
        links = argmax_links(cosine_scores(src, tgt), src_mask, tgt_mask)
    return SubwordAlignment(links, probs, probs)


def plan_links(
    plan: torch.Tensor,
    half: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    ot_filter: str = "argmax",
    rounds: int = 2,
    alpha: float = 0.9,
) -> torch.Tensor:
    """Links from a transport plan by ``ot_filter``:

    - ``argmax``: the released XLM-Align aligner's one mutual argmax, rows of π and columns of
      ξ (``released_argmax_links``; ``rounds`` and ``alpha`` unused);
    - ``itermax``: SimAlign's IterMax on π with ``max_count = rounds``, as the authors'
      pre-training task self-labels (``itermax_links``);
    - ``eq9-literal``: the paper's Eq. 7-9 read literally (``eq9_literal_links``);
    - ``union``: forward ∪ backward argmax of π, the paper's ablation without filtering.

    plan [B, m, n] (π), half [B, m, n] (ξ, the plan before the last Sinkhorn update, or its
    log), src_mask [B, m], tgt_mask [B, n] -> bool [B, m, n].
    """
    if ot_filter == "argmax":
        return released_argmax_links(plan, half, src_mask, tgt_mask)
    if ot_filter == "eq9-literal":
        return eq9_literal_links(plan, src_mask, tgt_mask, rounds, alpha)
    if ot_filter == "itermax":
        return itermax_links(plan, src_mask, tgt_mask, rounds, alpha)
    if ot_filter == "union":
        return union_links(plan, src_mask, tgt_mask)
    raise ValueError(f"unknown ot filter {ot_filter!r}; expected one of {OT_FILTERS}")
