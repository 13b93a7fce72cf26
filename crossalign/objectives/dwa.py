"""Denoising word alignment (XLM-Align, Chi et al. ACL 2021, §3.2), with TLM on the same pass.

Every step: (1) self-label the unmasked translation pair with the current model — hidden
states of layer ``layer``, optimal transport by Sinkhorn (Eq. 6), iterative alignment filtering
(Eq. 7-9, ``crossalign.align``); (2) mask the pair as TLM does; (3) a pointer network over the
final-layer states of the masked pair predicts, for every masked token that has a self-label,
the position of its aligned token in the other sentence (Eq. 10-11); the loss is the
cross-entropy of that pointer, in both directions (Eq. 15). TLM's masked-LM loss uses the same
forward.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from crossalign.align.config import OT_FILTERS, SINKHORN_ORDERS
from crossalign.align.extract import plan_links
from crossalign.align.similarity import dot_scores, log_clamped
from crossalign.align.sinkhorn import sinkhorn_log
from crossalign.checks import check_choice, check_flag, check_range
from crossalign.config import RunConfig
from crossalign.data.masking import IGNORE_INDEX
from crossalign.errors import CrossalignError
from crossalign.objectives.base import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.mlm import masked_lm_logits, masked_lm_loss
from crossalign.objectives.tlm import TranslationLM

DWA_REDUCTIONS = ("sum", "mean")


def self_label_pointers(
    states: torch.Tensor,
    src_mask: torch.Tensor,
    tgt_mask: torch.Tensor,
    sinkhorn_iters: int = 2,
    filter_iters: int = 2,
    alpha: float = 0.9,
    mu: float = 1.0,
    sinkhorn_order: str = "rows-first",
    ot_filter: str = "iterative",
) -> torch.Tensor:
    """Pointer labels from self-labelled alignments of jointly encoded pairs (§3.1).

    The transport plan T between the source tokens (``src_mask``) and target tokens
    (``tgt_mask``) of one sequence comes from ``f_sim = log max(ε, h_iᵀh_j)`` by Sinkhorn
    (regularisation ``mu``, ``sinkhorn_order``; Eq. 6); links are extracted by ``ot_filter``
    (``iterative``: Eq. 7-9; see ``crossalign.align.extract.plan_links``). A source token's
    label is the linked target position with the largest T, a target token's the linked source
    position likewise; unlinked tokens get IGNORE_INDEX.

    states [B, L, H] (layer states of the unmasked pair), src_mask/tgt_mask [B, L] bool
    (real, non-special tokens of each side) -> labels [B, L] long (positions in L).
    """
    f_sim = log_clamped(dot_scores(states.float(), states.float()))
    plan = sinkhorn_log(f_sim, src_mask, tgt_mask, mu, sinkhorn_iters, sinkhorn_order).exp()
    links = plan_links(plan, src_mask, tgt_mask, ot_filter, filter_iters, alpha)  # [B, L, L]
    linked_plan = torch.where(links, plan, torch.full_like(plan, -1.0))
    fwd_score, fwd = linked_plan.max(dim=2)  # source i -> target j
    bwd_score, bwd = linked_plan.max(dim=1)  # target j -> source i
    labels = torch.full_like(fwd, IGNORE_INDEX)
    labels = torch.where(src_mask & (fwd_score >= 0), fwd, labels)
    return torch.where(tgt_mask & (bwd_score >= 0), bwd, labels)


def pointer_loss(
    query: torch.Tensor,
    key: torch.Tensor,
    labels: torch.Tensor,
    segment_ids: torch.Tensor,
    pointable: torch.Tensor,
    reduction: str = "sum",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of the pointer network (Eq. 10-11, 15), computed in fp32.

    For each row i with a label, a_ij = softmax_j(q_iᵀk_j / √d) over the positions j of the
    *other* segment that are ``pointable`` (real, non-special tokens); same-segment and
    padding positions get probability 0. ``reduction``: ``sum`` (Eq. 15: the sum over the
    labelled masked positions P of each pair, averaged over the B pairs of the batch) or
    ``mean`` (the mean over all labelled positions of the batch: a summed loss divided by
    |P| per pair on average).

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
    scores = scores.masked_fill(~(other & pointable[b_idx]), float("-inf"))
    if reduction == "mean":
        return F.cross_entropy(scores, labels[b_idx, i_idx]), n
    return F.cross_entropy(scores, labels[b_idx, i_idx], reduction="sum") / query.shape[0], n


@OBJECTIVES.register("dwa")
class DenoisingWordAlignment(TranslationLM):
    """XLM-Align's denoising word alignment (pointer network on self-labels) plus TLM."""

    data = "parallel"

    def __init__(
        self,
        ctx: TokenContext,
        layer: int = 10,
        sinkhorn_iters: int = 2,
        filter_iters: int = 2,
        alpha: float = 0.9,
        mu: float = 1.0,
        sinkhorn_order: str = "rows-first",
        ot_filter: str = "iterative",
        reduction: str = "sum",
        tlm_weight: float = 1.0,
        allow_cold_start: bool = False,
        mask_prob: float = 0.15,
        replace_probs: tuple = (0.8, 0.1),
    ) -> None:
        """Options: ``layer`` (self-labelling layer; the paper's ablation varies it),
        ``sinkhorn_iters``, ``mu``, ``sinkhorn_order`` (Eq. 6), ``ot_filter`` (``iterative``:
        Eq. 7-9; ``union``: the ablation without filtering; ``itermax``), ``filter_iters``,
        ``alpha``, ``reduction`` of the pointer loss (``sum``: Eq. 15; ``mean``), ``tlm_weight``,
        ``allow_cold_start``. Ranges: layer, sinkhorn_iters >= 0; filter_iters >= 1; alpha in
        [0, 1]; mu > 0; tlm_weight >= 0."""
        super().__init__(ctx, mask_prob=mask_prob, replace_probs=replace_probs)
        for key, value, allowed in (
            ("sinkhorn_order", sinkhorn_order, SINKHORN_ORDERS),
            ("ot_filter", ot_filter, OT_FILTERS),
            ("reduction", reduction, DWA_REDUCTIONS),
        ):
            check_choice(self.option_where(key), value, allowed)
        for key, value, low in (
            ("layer", layer, 0),
            ("sinkhorn_iters", sinkhorn_iters, 0),
            ("filter_iters", filter_iters, 1),
        ):
            check_range(self.option_where(key), value, low, integer=True)
        check_range(self.option_where("alpha"), alpha, 0, 1)
        check_range(self.option_where("mu"), mu, 0, low_open=True)
        check_range(self.option_where("tlm_weight"), tlm_weight, 0)
        check_flag(self.option_where("allow_cold_start"), allow_cold_start)
        self.layer = layer
        self.sinkhorn_iters = sinkhorn_iters
        self.filter_iters = filter_iters
        self.alpha = alpha
        self.mu = mu
        self.sinkhorn_order = sinkhorn_order
        self.ot_filter = ot_filter
        self.reduction = reduction
        self.tlm_weight = tlm_weight
        self.allow_cold_start = allow_cold_start
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
        """TLM's batch plus ``original_ids`` (the unmasked pair, for self-labelling)."""
        batch = super().collate(raw, generator)
        labels = batch["labels"]
        batch["original_ids"] = torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])
        return batch

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> dict:
        """Self-label (no grad, eval mode, unmasked pair), then one forward of the masked pair:
        TLM logits at masked positions and pointer query/key states."""
        kwargs = {
            "attention_mask": batch["attention_mask"],
            "position_ids": batch["position_ids"],
        }
        if "token_type_ids" in batch:
            kwargs["token_type_ids"] = batch["token_type_ids"]
        special = torch.isin(
            batch["original_ids"], torch.tensor(self.ctx.special_ids, device=batch["labels"].device)
        )
        seg = batch["segment_ids"]
        pointable = ~special & (seg >= 0)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            states = model.base_model(
                input_ids=batch["original_ids"], output_hidden_states=True, **kwargs
            ).hidden_states[self.layer]
        model.train(was_training)
        pointers = self_label_pointers(
            states,
            pointable & (seg == 0),
            pointable & (seg == 1),
            self.sinkhorn_iters,
            self.filter_iters,
            self.alpha,
            self.mu,
            self.sinkhorn_order,
            self.ot_filter,
        )
        hidden = model.base_model(input_ids=batch["input_ids"], **kwargs).last_hidden_state
        masked = batch["labels"] != IGNORE_INDEX
        return {
            "logits": masked_lm_logits(model, hidden, masked),
            "query": self.query(hidden),
            "key": self.key(hidden),
            "pointer_labels": torch.where(masked, pointers, IGNORE_INDEX),
            "pointable": pointable,
        }

    def loss(self, batch, outputs):
        """tlm_weight · TLM + DWA; metrics ``lm_loss`` (TLM), ``dwa_loss``, ``labelled``
        (fraction of masked tokens with a self-label)."""
        labels = batch["labels"]
        tlm, n = masked_lm_loss(outputs["logits"], labels[labels != IGNORE_INDEX])
        dwa, n_rows = pointer_loss(
            outputs["query"],
            outputs["key"],
            outputs["pointer_labels"],
            batch["segment_ids"],
            outputs["pointable"],
            self.reduction,
        )
        metrics = {
            "lm_loss": tlm.detach(),
            "dwa_loss": dwa.detach(),
            "labelled": n_rows.float() / n.clamp(min=1),
        }
        return self.tlm_weight * tlm + dwa, n, metrics
