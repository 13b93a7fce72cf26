"""ALIGN-MLM: masked LM plus a loss that aligns the word embeddings of dictionary translations
(Tang et al. 2022, "ALIGN-MLM: Word Embedding Alignment is Crucial for Multilingual
Pre-training", eq. 1-2):

    L = L_MLM + α · L_align,    L_align = −(1/|D|) Σ_{(a, b) ∈ D} cos(E[a], E[b])

where E is the input word-embedding matrix and D the training dictionary of token pairs
(α = 10). The dictionary's token ids are a registered buffer ([2, D]), so they move with the
module; the auxiliary term is logged as ``align_loss`` (= α · L_align) and ``align_cos`` (mean
cosine), and only the masked-LM part (``lm_loss``) enters perplexity.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel

from crossalign.errors import CrossalignError
from crossalign.objectives.base import OBJECTIVES, TokenContext
from crossalign.objectives.dict_mlm import dictionary_token_ids
from crossalign.objectives.mlm import MaskedLM
from crossalign.objectives.options import AlignMLMOptions, ObjectiveOptions


def dictionary_cosines(embeddings: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """cos(E[a], E[b]) of every dictionary pair (a, b) = ``pairs[:, d]``: embeddings [V, H],
    pairs [2, D] long -> [D], in fp32. One gather for both sides (one scatter in backward):
    the term costs about a millisecond per step for thousands of pairs."""
    rows = embeddings.index_select(0, pairs.reshape(-1)).view(2, -1, embeddings.shape[1])
    rows = rows.float()
    norms = rows.norm(dim=-1)
    return (rows[0] * rows[1]).sum(-1) / (norms[0] * norms[1]).clamp_min(1e-8)


def alignment_loss(cosines: torch.Tensor, alpha: float) -> torch.Tensor:
    """α · L_align = −α · mean cos over the dictionary pairs (eq. 2); cosines [D] -> scalar."""
    return -alpha * cosines.mean()


@OBJECTIVES.register("align_mlm")
class AlignMLM(MaskedLM):
    """ALIGN-MLM: masked LM + α · (−mean cosine of dictionary pairs' word embeddings)."""

    Options = AlignMLMOptions

    data = "mono"

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``AlignMLMOptions`` (MLM's, ``dictionary`` and ``alpha``)."""
        super().__init__(ctx, options, **values)
        dictionary, self.alpha = self.options.dictionary, self.options.alpha
        src, tgt = dictionary_token_ids("align_mlm", dictionary, ctx)
        pairs = [(a, b) for a, b in zip(src, tgt) if a != b]  # identical rows: cos = 1 always
        if not pairs:
            raise CrossalignError(f"{dictionary}: every pair maps a token to itself")
        self.register_buffer("dict_pairs", torch.tensor(pairs).T.contiguous(), persistent=False)

    def forward(
        self, model: PreTrainedModel, batch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked-LM logits [N, V], dictionary cosines [D])."""
        logits = super().forward(model, batch)
        weight = model.get_input_embeddings().weight
        return logits, dictionary_cosines(weight, self.dict_pairs)

    def loss(self, batch, outputs):
        """Masked-LM cross-entropy + α · L_align; metrics lm_loss, align_loss, align_cos."""
        logits, cosines = outputs
        lm, n, _ = super().loss(batch, logits)
        aux = alignment_loss(cosines, self.alpha)
        metrics = {
            "lm_loss": lm.detach(),
            "align_loss": aux.detach(),
            "align_cos": cosines.mean().detach(),
        }
        return lm + aux, n, metrics
