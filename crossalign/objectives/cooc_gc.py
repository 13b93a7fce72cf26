"""MLM-GC: masked LM plus a log-bilinear regression on global co-occurrence counts
(Ai & Fang, "Multilingual Pre-training with Self-supervision from Global Co-occurrence
Information", Findings of ACL 2023, Eq. 3; the Appendix D variant, Eq. 6, as an option).

For every masked position t and every neighbour k with 1 ≤ |t − k| ≤ n in the same segment
(no special token between them, never padding), with w the original tokens:

    GC = 1/N Σ_t Σ_k 1/(2n) · f(X[w_t, w_k]) · (h_tᵀ g_k / √d − log X[w_t, w_k])²,
    f(x) = min(1, (x / x_max)^α),

over pairs with X > 0 (N = masked positions). h_t is the final-layer hidden state at t (the
state the masked-LM head reads, as in the authors' code); g_k is the neighbour's final-layer
state h_k (Eq. 3) or, with ``neighbour: output_embedding``, the output embedding of w_k
(Eq. 6). The loss is MLM + λ·GC; the masked-LM part is reported as ``lm_loss``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from transformers import PreTrainedModel

from crossalign.cooc.matrix import CoocMatrix
from crossalign.data.masking import IGNORE_INDEX
from crossalign.errors import CrossalignError
from crossalign.objectives.base import OBJECTIVES, TokenContext
from crossalign.objectives.mlm import MaskedLM, encode, masked_lm_logits, masked_lm_loss
from crossalign.objectives.options import MLMGCOptions, ObjectiveOptions

if TYPE_CHECKING:
    from crossalign.config import RunConfig


@dataclass
class GCTerms:
    """The regression terms of one batch: N masked positions × 2n neighbour slots."""

    score: torch.Tensor
    """[N, 2n] h_tᵀ g_k / √d."""
    log_x: torch.Tensor
    """[N, 2n] log X[w_t, w_k] (0 where the pair does not count)."""
    weight: torch.Tensor
    """[N, 2n] f(X[w_t, w_k]) where the pair counts, else 0."""
    centres: int
    """N, the number of masked positions."""


def neighbour_slots(
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    special: torch.Tensor,
    mask_id: int,
    window: int,
    masked_neighbours: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (masked position, neighbour) pairs of Eq. 3.

    input_ids, labels: [B, L] (labels = original id at masked positions, else IGNORE_INDEX);
    special: [B, L] bool (special tokens and padding). Returns (b [N], t [N], k [N, 2n] clamped
    to [0, L), valid [N, 2n]): a slot is valid when t + offset is inside the row, in the same
    segment as t (no special token in between), not special, and, unless
    ``masked_neighbours``, not a ``<mask>`` input. Only ``<mask>`` inputs are skipped: a
    neighbour that was selected but replaced at random or kept still counts. ``gc_terms`` looks
    X up with the original ids of both ends (``labels`` where set), masked or not.
    """
    b, t = (labels != IGNORE_INDEX).nonzero(as_tuple=True)
    length = input_ids.shape[1]
    offsets = torch.cat([torch.arange(-window, 0), torch.arange(1, window + 1)]).to(t.device)
    k = t[:, None] + offsets
    inside = (k >= 0) & (k < length)
    k = k.clamp(0, length - 1)
    segment = special.long().cumsum(dim=1)
    bk = b[:, None]
    valid = inside & (segment[bk, k] == segment[b, t][:, None]) & ~special[bk, k]
    if not masked_neighbours:
        valid &= input_ids[bk, k] != mask_id
    return b, t, k, valid


def gc_terms(
    hidden: torch.Tensor,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    special: torch.Tensor,
    matrix: CoocMatrix,
    *,
    mask_id: int,
    window: int,
    x_max: float = 100.0,
    alpha: float = 0.75,
    masked_neighbours: bool = False,
    output_embeddings: torch.Tensor | None = None,
    lookup_device: torch.device | None = None,
) -> GCTerms:
    """Scores, targets and weights of Eq. 3 (Eq. 6 with ``output_embeddings`` [V, d]).

    hidden: [B, L, d] final-layer states; the other tensors [B, L] as in ``neighbour_slots``.
    X is looked up for all pairs at once on ``lookup_device`` (default: hidden's device).
    """
    b, t, k, valid = neighbour_slots(input_ids, labels, special, mask_id, window, masked_neighbours)
    original = torch.where(labels != IGNORE_INDEX, labels, input_ids)
    rows = original[b, t][:, None].expand_as(k)
    cols = original[b[:, None], k]
    device = lookup_device or hidden.device
    log_x, found = matrix.log_lookup(rows.to(device), cols.to(device))
    log_x, found = log_x.to(hidden.device), found.to(hidden.device)
    valid = valid & found
    f = torch.exp(alpha * (log_x - math.log(x_max))).clamp(max=1.0)
    h_t = hidden[b, t].float()
    g_k = (hidden[b[:, None], k] if output_embeddings is None else output_embeddings[cols]).float()
    with torch.autocast(hidden.device.type, enabled=False):  # the regression in fp32
        score = torch.einsum("nd,nkd->nk", h_t, g_k) / math.sqrt(hidden.shape[-1])
    return GCTerms(
        score=score,
        log_x=torch.where(valid, log_x, torch.zeros_like(log_x)),
        weight=torch.where(valid, f, torch.zeros_like(f)),
        centres=len(t),
    )


def gc_loss(terms: GCTerms, window: int) -> torch.Tensor:
    """Eq. 3 averaged over masked positions: Σ f · (score − log X)² / (2n) / N (0 if N = 0)."""
    per_pair = terms.weight * (terms.score - terms.log_x) ** 2
    return per_pair.sum() / (2 * window) / max(terms.centres, 1)


class GlobalCooccurrence:
    """The GC regression as a part of an objective (a mixin of an ``Objective``): its options
    and checks, and its terms on a batch's states. ``mlm_gc`` adds it to masked LM, ``mass_gc``
    to MASS (``crossalign.objectives.seq2seq``)."""

    def init_gc(self, ctx: TokenContext) -> None:
        """Keep the GC options (``GCOptions``, checked); open the matrix and check it was
        counted with the run's tokenizer."""
        name = OBJECTIVES.name_of(type(self))
        o = self.options
        cooc, window = o.cooc, o.window
        if not cooc:
            raise CrossalignError(
                f"objective {name} needs cooc: DIR, a matrix from 'crossalign cooc build "
                "--tokenizer <the run's tokenizer> ...'"
            )
        self.matrix = CoocMatrix(cooc)
        self.matrix.check_tokenizer(
            ctx.tokenizer,
            "this run's tokenizer",
            "rebuild it with 'crossalign cooc build --tokenizer <this run's tokenizer> ...' and "
            "train with that tokenizer (tokenizer.path)",
            vocab_size=ctx.vocab_size,
        )
        self.window = self.matrix.window if window is None else window
        if self.window > self.matrix.window:
            raise CrossalignError(
                f"objective {name}: window {window} must be between 1 and the window the "
                f"matrix {cooc} was counted with ({self.matrix.window})"
            )
        self.gc_weight = o.gc_weight
        self.x_max = o.x_max
        self.alpha = o.alpha
        self.masked_neighbours = o.masked_neighbours
        self.neighbour = o.neighbour
        self.lookup_device = o.lookup_device
        self.force_no_warmup = o.force_no_warmup

    def check_config(self, cfg: RunConfig) -> None:
        """Refuse GC without learning-rate warm-up (the paper reports collapse) unless
        ``force_no_warmup``."""
        if cfg.train.warmup_steps == 0 and not self.force_no_warmup:
            name = OBJECTIVES.name_of(type(self))
            raise CrossalignError(
                f"objective {name} with train.warmup_steps=0: the GC regression collapses "
                "without learning-rate warm-up (Ai & Fang 2023); set train.warmup_steps (e.g. "
                "10% of train.steps) or force_no_warmup: true in the objective entry"
            )

    def start(self, model: PreTrainedModel, data=None) -> None:
        """Check the model has an output embedding matrix when Eq. 6 is asked for."""
        if self.neighbour == "output_embedding" and model.get_output_embeddings() is None:
            raise CrossalignError(
                f"objective {OBJECTIVES.name_of(type(self))}: neighbour output_embedding needs "
                f"a model with output embeddings; {type(model).__name__} has none"
            )

    def gc_terms_of(
        self,
        model: PreTrainedModel,
        hidden: torch.Tensor,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor,
    ) -> GCTerms:
        """``gc_terms`` of states ``hidden`` [B, L, d] whose masked positions hold the
        original ids in ``labels`` [B, L] (IGNORE_INDEX elsewhere); ``input_ids`` and
        ``attention_mask`` [B, L] as the model read them."""
        original = torch.where(labels != IGNORE_INDEX, labels, input_ids)
        special = torch.isin(original, torch.tensor(self.ctx.special_ids, device=labels.device))
        special |= attention_mask == 0
        embeddings = None
        if self.neighbour == "output_embedding":
            embeddings = model.get_output_embeddings().weight
        return gc_terms(
            hidden,
            input_ids,
            labels,
            special,
            self.matrix,
            mask_id=self.ctx.mask_id,
            window=self.window,
            x_max=self.x_max,
            alpha=self.alpha,
            masked_neighbours=self.masked_neighbours,
            output_embeddings=embeddings,
            lookup_device=torch.device("cpu") if self.lookup_device == "cpu" else None,
        )

    def gc_part(self, terms: GCTerms) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(GC loss of ``terms``, metrics ``gc_loss`` and ``gc_pairs``: counted pairs per
        masked token)."""
        gc = gc_loss(terms, self.window)
        pairs = (terms.weight > 0).sum().float() / max(terms.centres, 1)
        return gc, {"gc_loss": gc.detach(), "gc_pairs": pairs}


@OBJECTIVES.register("mlm_gc")
class MaskedLMGlobalCooccurrence(GlobalCooccurrence, MaskedLM):
    """MLM + λ·GC: masked LM and a log-bilinear regression on global co-occurrence (MLM-GC).

    ``masked_neighbours`` defaults to false: a neighbour whose input is ``<mask>`` is skipped,
    as the authors' code regresses each masked state against "context only" states (inputs
    other than ``<mask>``); true pairs it too, by its original id.
    """

    Options = MLMGCOptions

    data = "mono"

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``MLMGCOptions`` (MLM's and GC's: ``cooc``, the matrix directory, ``gc_weight``
        λ, ``window``, ``x_max``, ``alpha``, ``neighbour``, ``lookup_device``,
        ``masked_neighbours``, ``force_no_warmup``)."""
        MaskedLM.__init__(self, ctx, options, **values)
        self.init_gc(ctx)

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]):
        """(logits [N, V] at the masked positions, GCTerms of the batch)."""
        hidden = encode(model, batch)
        labels = batch["labels"]
        logits = masked_lm_logits(model, hidden, labels != IGNORE_INDEX)
        terms = self.gc_terms_of(model, hidden, batch["input_ids"], labels, batch["attention_mask"])
        return logits, terms

    def loss(self, batch, outputs):
        """MLM + λ·GC; metrics ``lm_loss``, ``gc_loss`` and ``gc_pairs`` (counted pairs per
        masked token)."""
        logits, terms = outputs
        labels = batch["labels"]
        lm, n = masked_lm_loss(logits, labels[labels != IGNORE_INDEX])
        gc, metrics = self.gc_part(terms)
        return lm + self.gc_weight * gc, n, {"lm_loss": lm.detach(), **metrics}
