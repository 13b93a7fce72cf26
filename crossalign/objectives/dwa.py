"""Denoising word alignment (XLM-Align, Chi et al. ACL 2021, §3.2), with TLM on the same pass,
as the authors' pre-training task runs it (microsoft/unilm ``infoxlm/src-infoxlm/infoxlm``:
``tasks/xlm_align.py``, ``criterions/xlm_align.py``, ``data/xlm_align.py``).

Every step: (1) ``label``: self-label the unmasked pair, encoded as one sequence ``[cls] src
[sep] tgt [sep]`` with continuous positions, with the current model in eval mode — raw dot
products of layer ``layer``'s states, 2 Sinkhorn iterations columns first, SimAlign's IterMax
on the plan (2 rounds, α 0.9; ``crossalign.align``); (2) the pair is masked as TLM masks; (3)
a pointer network over the final-layer states of the masked pair predicts, for every masked
token that has a self-label, the position of its aligned token in the other sentence
(Eq. 10-11); the loss is the sum of the pointer's cross-entropies in both directions (Eq. 15),
pooled with TLM's summed masked-LM loss over the DWA queries and TLM tokens together (the
criterion's ``sample_size``). TLM's masked-LM loss uses the same forward.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from crossalign.align.extract import plan_links
from crossalign.align.similarity import dot_scores
from crossalign.align.sinkhorn import transport_plans
from crossalign.config import RunConfig
from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.packing import ORIGIN_LENGTHS, ORIGIN_ROW, repack_positions, unpack
from crossalign.errors import CrossalignError
from crossalign.objectives.base import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.mlm import (
    add_masked_index,
    encode,
    encoder_kwargs,
    masked_lm_logits,
    masked_lm_loss,
)
from crossalign.objectives.options import (
    DWA_REDUCTIONS,
    POINTER_LABELS,
    DWAOptions,
    ObjectiveOptions,
)
from crossalign.objectives.tlm import TranslationLM


def self_label_links(
    states: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    sinkhorn_iters: int = 2,
    filter_iters: int = 2,
    alpha: float = 0.9,
    mu: float = 1.0,
    sinkhorn_order: str = "columns-first",
    ot_filter: str = "itermax",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-labelled alignments of jointly encoded pairs (§3.1) and their transport plan.

    The plan between the source tokens (``src_mask``) and target tokens (``tgt_mask``) of one
    sequence comes from the dot products ``h_iᵀh_j`` by Sinkhorn (``transport_plans``:
    regularisation ``mu``, ``sinkhorn_order``; Eq. 6); links are extracted by ``ot_filter``
    (``itermax``: the authors' ``iter_max`` with ``max_count = filter_iters``; see
    ``crossalign.align.extract.plan_links``).
    With the defaults this is ``get_gold_or_silver_wa`` of the authors' pre-training task:
    ``_sinkhorn_iter`` (``S ≤ 0 → 1e-6``, columns then rows, 2 iterations) and ``iter_max``
    on the plan.

    states [B, L, H] (layer states of the unmasked pair), src_mask/tgt_mask [B, L] bool
    (real, non-special tokens of each side) -> (links [B, L, L] bool, plan [B, L, L]).
    """
    states = states.to(torch.promote_types(states.dtype, torch.float32))  # fp16/bf16 -> fp32
    scores = dot_scores(states, states)
    plan, half = transport_plans(scores, src_mask, tgt_mask, mu, sinkhorn_iters, sinkhorn_order)
    links = plan_links(plan, half, src_mask, tgt_mask, ot_filter, filter_iters, alpha)
    return links, plan


def links_to_pointers(
    links: torch.Tensor,
    plan: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    choice: str = "last-link",
) -> torch.Tensor:
    """One pointer label per token from its links: a source token points to a linked target
    position, a target token to a linked source position; unlinked tokens get IGNORE_INDEX.

    A token with several links points, with ``last-link``, where the authors' criterion
    points: its ``prepare_positions`` fills a dictionary from the links in row-major order, so
    the last one wins — the largest linked position, for a source and for a target token
    alike. ``max-plan`` picks the link with the largest plan value instead (the first on
    ties).

    links [B, L, L] bool, plan [B, L, L], src_mask/tgt_mask [B, L] -> labels [B, L] long.
    """
    if choice not in POINTER_LABELS:
        raise ValueError(f"unknown pointer label choice {choice!r}; expected {POINTER_LABELS}")
    if choice == "last-link":
        pos = torch.arange(links.shape[1], device=links.device)
        fwd = torch.where(links, pos[None, None, :], -1).amax(dim=2)  # source i -> target j
        bwd = torch.where(links, pos[None, :, None], -1).amax(dim=1)  # target j -> source i
        fwd_ok, bwd_ok = fwd >= 0, bwd >= 0
    else:
        linked_plan = torch.where(links, plan, torch.full_like(plan, -1.0))
        fwd_score, fwd = linked_plan.max(dim=2)
        bwd_score, bwd = linked_plan.max(dim=1)
        fwd_ok, bwd_ok = fwd_score >= 0, bwd_score >= 0
    labels = torch.full_like(fwd, IGNORE_INDEX)
    labels = torch.where(src_mask & fwd_ok, fwd, labels)
    return torch.where(tgt_mask & bwd_ok, bwd, labels)


def pointer_loss(
    query: torch.Tensor,
    key: torch.Tensor,
    labels: torch.Tensor,
    segment_ids: torch.Tensor,
    pointable: torch.Tensor,
    reduction: str = "pooled",
    pair_ids: torch.Tensor | None = None,
    n_pairs: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of the pointer network (Eq. 10-11, 15), computed in fp32.

    For each row i with a label, a_ij = softmax_j(q_iᵀk_j / √d) over the positions j of the
    *other* segment that are ``pointable`` (real, non-special tokens); same-segment and
    padding positions get probability 0 (and, with ``pair_ids`` [B, L] for rows that pack
    several pairs, the positions of other pairs; ``n_pairs`` then counts the pairs for
    ``sum``, default B). ``reduction``: ``pooled`` (the sum over every
    labelled row of the batch, as the authors' criterion sums it; the objective then divides
    it, with TLM's summed loss, by the rows and TLM tokens together), ``sum`` (Eq. 15: the sum
    over the labelled masked positions P of each pair, averaged over the B pairs of the batch)
    or ``mean`` (the mean over all labelled rows of the batch).

    query/key [B, L, d], labels [B, L] (target position or IGNORE_INDEX), segment_ids [B, L]
    (0 source, 1 target, -1 padding), pointable [B, L] bool -> (loss, number of rows).
    """
    if reduction not in DWA_REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; expected one of {DWA_REDUCTIONS}")
    rows = labels != IGNORE_INDEX  # [B, L]
    n = rows.sum()
    if n == 0:
        return query.sum() * 0.0, n
    b_idx, i_idx = rows.nonzero(as_tuple=True)
    all_scores = torch.bmm(query.float(), key.float().transpose(1, 2))  # [B, L, L]
    scores = all_scores[b_idx, i_idx] / math.sqrt(query.shape[-1])  # [N, L]
    other = segment_ids[b_idx] == (1 - segment_ids[b_idx, i_idx])[:, None]  # [N, L]
    if pair_ids is not None:
        other &= pair_ids[b_idx] == pair_ids[b_idx, i_idx][:, None]
    scores = scores.masked_fill(~(other & pointable[b_idx]), float("-inf"))
    total = F.cross_entropy(scores, labels[b_idx, i_idx], reduction="sum")
    if reduction == "mean":
        return total / n, n
    return (total if reduction == "pooled" else total / (n_pairs or query.shape[0])), n


@OBJECTIVES.register("dwa")
class DenoisingWordAlignment(TranslationLM):
    """XLM-Align's denoising word alignment (pointer network on self-labels) plus TLM."""

    Options = DWAOptions

    data = "parallel"

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``DWAOptions`` (defaults: the authors' pre-training task)."""
        super().__init__(ctx, options, **values)
        o = self.options
        self.layer = o.layer
        self.sinkhorn_iters = o.sinkhorn_iters
        self.filter_iters = o.filter_iters
        self.alpha = o.alpha
        self.mu = o.mu
        self.sinkhorn_order = o.sinkhorn_order
        self.ot_filter = o.ot_filter
        self.pointer_label = o.pointer_label
        self.reduction = o.reduction
        self.tlm_weight = o.tlm_weight
        self.allow_cold_start = o.allow_cold_start
        self.query: nn.Linear | None = None
        self.key: nn.Linear | None = None

    def check_config(self, cfg: RunConfig) -> None:
        """Self-labels from a random model are noise: require a pretrained start."""
        if cfg.model.path is None and not self.allow_cold_start:
            raise CrossalignError(
                "objective dwa self-labels alignments with the model being trained: start "
                "from a checkpoint (model.path=runs/.../model or an exported backbone), or "
                "set allow_cold_start: true on the dwa objective"
            )

    def start(self, model: PreTrainedModel, data=None) -> None:
        """Create the pointer network's query and key projections (hidden -> hidden); a
        self-labelling ``layer`` the model does not have is an error."""
        depth = model.config.num_hidden_layers
        if not 0 <= self.layer <= depth:
            raise CrossalignError(
                f"objective dwa: layer={self.layer}, but the model has layers 0-{depth} "
                f"(0 = embeddings); set layer: {depth} or lower (XLM-Align: layer 10 of 12)"
            )
        hidden = model.config.hidden_size
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """TLM's padded rows in ``layout`` (``pair_batch``) plus ``original_ids`` (the
        unmasked pair, for self-labelling) and ``pointable`` (real, non-special tokens, [B, L]
        bool); with ``packing``, packed with where each token came from (``pack``), which
        ``label`` reads."""
        batch = self.pair_batch(raw, generator)
        labels = batch["labels"]
        batch["original_ids"] = torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])
        special = torch.isin(batch["original_ids"], torch.tensor(self.ctx.special_ids))
        batch["pointable"] = ~special & (batch["segment_ids"] >= 0)
        if self.options.packing:
            batch = self.pack(batch, origin=True, original_ids=self.ctx.pad_id)
        return add_masked_index(batch)

    def label(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> dict:
        """Self-label the unmasked pair (no grad, eval mode) and add ``pointer_labels`` [B, L]:
        the aligned position of every masked token that has a self-label, IGNORE_INDEX
        elsewhere. Packed rows are labelled pair by pair: their states are laid out as padded
        rows (``unpack``), and the pointers moved back to packed positions."""
        kwargs = encoder_kwargs(model, batch)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            states = model.base_model(
                input_ids=batch["original_ids"], output_hidden_states=True, **kwargs
            ).hidden_states[self.layer]
        model.train(was_training)
        seg, pointable = batch["segment_ids"], batch["pointable"]
        packed = ORIGIN_ROW in batch
        if packed:
            states, seg = unpack(states, batch), unpack(seg, batch, -1)
            pointable = unpack(pointable, batch, False)
        src, tgt = pointable & (seg == 0), pointable & (seg == 1)
        links, plan = self_label_links(
            states, src, tgt, self.sinkhorn_iters, self.filter_iters, self.alpha, self.mu,
            self.sinkhorn_order, self.ot_filter,
        )  # fmt: skip
        pointers = links_to_pointers(links, plan, src, tgt, self.pointer_label)
        if packed:
            pointers = repack_positions(pointers, batch)
        masked = batch["labels"] != IGNORE_INDEX
        return {**batch, "pointer_labels": torch.where(masked, pointers, IGNORE_INDEX)}

    def token_count(self, batch: dict[str, torch.Tensor]) -> int:
        """TLM's predicted tokens, plus the labelled DWA queries with ``pooled`` reduction
        (the batch must have been through ``label``)."""
        n = super().token_count(batch)
        if self.reduction != "pooled":
            return n
        if "pointer_labels" not in batch:
            raise RuntimeError("dwa: token_count needs a labelled batch (call label first)")
        return n + int((batch["pointer_labels"] != IGNORE_INDEX).sum())

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> dict:
        """One forward of the masked pair: TLM logits at masked positions and pointer
        query/key states (a batch that has not been through ``label`` is labelled first)."""
        if "pointer_labels" not in batch:
            batch = self.label(model, batch)
        hidden = encode(model, batch)
        masked = batch["labels"] != IGNORE_INDEX
        return {
            "logits": masked_lm_logits(model, hidden, masked),
            "query": self.query(hidden),
            "key": self.key(hidden),
            "pointer_labels": batch["pointer_labels"],
            "pointable": batch["pointable"],
        }

    def loss(self, batch, outputs):
        """TLM and the pointer loss. ``pooled``: ``(tlm_weight · Σ CE_tlm + Σ CE_dwa) /
        (N_tlm + N_dwa)`` with count ``N_tlm + N_dwa`` (the authors' criterion, one
        ``sample_size``); ``sum``/``mean``: ``tlm_weight · mean CE_tlm + DWA`` with count
        ``N_tlm``. Metrics ``lm_loss`` (TLM's mean), ``lm_tokens`` (N_tlm), ``dwa_loss`` (the
        pointer loss: its mean over queries when pooled), ``labelled`` (fraction of masked
        tokens with a self-label)."""
        labels = batch["labels"]
        tlm, n = masked_lm_loss(outputs["logits"], labels[labels != IGNORE_INDEX])
        dwa, n_rows = pointer_loss(
            outputs["query"],
            outputs["key"],
            outputs["pointer_labels"],
            batch["segment_ids"],
            outputs["pointable"],
            self.reduction,
            batch.get(ORIGIN_ROW),
            batch[ORIGIN_LENGTHS].shape[0] if ORIGIN_LENGTHS in batch else None,
        )
        metrics = {
            "lm_loss": tlm.detach(),
            "lm_tokens": n.float(),
            "labelled": n_rows.float() / n.clamp(min=1),
        }
        if self.reduction == "pooled":
            total = n + n_rows
            metrics["dwa_loss"] = dwa.detach() / n_rows.clamp(min=1)
            return (self.tlm_weight * tlm * n + dwa) / total.clamp(min=1), total, metrics
        metrics["dwa_loss"] = dwa.detach()
        return self.tlm_weight * tlm + dwa, n, metrics
