"""Code-switched MASS (TCS-MASS, SCS-MASS): TCS/SCS-MLM's code-switching (Lu et al. 2023,
``crossalign.objectives.code_switch``) applied to MASS's encoder input
(``crossalign.objectives.seq2seq``), the MASS-initialised setting of the paper's UNMT
experiments.

A MASS batch masks a span of each sentence in the encoder; the context tokens outside the span
switch into a partner language as in TCS/SCS-MLM (the same language-specific vocabularies,
``switch_prob``, partner drawn per batch, the partner's language embedding at switched
positions), and the decoder predicts the same span from both encoder inputs:

    loss = MASS(original) + MASS(code-switched)

reported as ``mass_loss`` and ``cs_loss`` (both label-smoothed; ``nll`` is the original pass's
unsmoothed loss).

- ``tcs_mass``: a switched token becomes its translation in the dictionary induced by CSLS
  from the encoder (its embedding layer, or a layer's context-averaged states).
- ``scs_mass``: a switched token's input embedding becomes ŷ = Σ w_j e(c_j) over soft CSLS
  translations of x̂ = Σ p_i e(t_i), as in SCS-MLM. The paper does not say where MASS's
  distribution p at a context position comes from (MASS's encoder predicts nothing); here it
  is the decoder's output layer applied to the encoder's final state at that position. For a
  model initialised from a masked LM (both sides start from it, ``crossalign.models.seq2seq``)
  that layer is the masked LM's head and the encoder is the masked LM, so at the start p is
  the masked LM's own output, here on MASS's masked encoder input (SCS-MLM applies the same
  function to 15%-masked blocks); the two drift apart as the decoder trains. A MASS model
  trained from scratch never trains its encoder states against that layer, so there
  ``tcs_mass`` is the better-founded choice.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import EncoderDecoderModel

from crossalign.data.masking import IGNORE_INDEX
from crossalign.objectives.base import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.code_switch import SemanticSwitching, TokenSwitching
from crossalign.objectives.mlm import add_masked_index, masked_lm_logits
from crossalign.objectives.options import ObjectiveOptions, SCSMASSOptions, TCSMASSOptions
from crossalign.objectives.seq2seq import MaskedSeq2Seq, decoder_logits, encoder_states

DECODER_FIELDS = (
    "attention_mask",
    "cross_attention_mask",
    "decoder_input_ids",
    "decoder_attention_mask",
    "decoder_position_ids",
    "decoder_token_type_ids",
)


def doubled_decoder_batch(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The decoder fields of a [B, ...] batch repeated for a [2B, ...] pass (original rows
    first), with ``masked_index`` [2N] pointing into both halves."""
    out = {k: batch[k].repeat(2, 1) for k in DECODER_FIELDS if k in batch}
    index = batch["masked_index"]
    out["masked_index"] = torch.cat([index, index + batch["labels"].numel()])
    return out


class CodeSwitchMASS(MaskedSeq2Seq):
    """The MASS side of tcs_mass and scs_mass: MASS batches with switched context, the loss."""

    def collate_switch(
        self, raw: RawBatch, generator: torch.Generator, translatable: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], int]:
        """MASS batch plus the switch fields (``CodeSwitching.add_switch``) over the encoder
        positions outside the masked span, and ``pair`` [2] (language indices: sentence,
        partner); returns it with the partner's index."""
        a, b = self._partner(raw.source, generator)
        batch = add_masked_index(self.span_batch(raw, generator))
        ids = batch["input_ids"]  # outside the span: the original tokens
        context = (batch["encoder_labels"] == IGNORE_INDEX) & batch["attention_mask"].bool()
        batch = self.add_switch(batch, ids, context, b, translatable, generator)
        batch["pair"] = torch.tensor([a, b])
        return batch, b

    def loss(self, batch, outputs):
        """MASS(original) + MASS(code-switched) on the same span; ``outputs`` are the decoder
        logits [2N, V] of the N span positions, original rows first."""
        n = batch["masked_labels"].numel()
        mass, ntok, metrics = MaskedSeq2Seq.loss(self, batch, outputs[:n])
        cs, _, _ = MaskedSeq2Seq.loss(self, batch, outputs[n:])
        metrics = {
            **metrics,
            "mass_loss": mass.detach(),
            "cs_loss": cs.detach(),
            "switch_frac": batch["switch_frac"].float(),
        }
        return mass + cs, ntok, metrics


@OBJECTIVES.register("tcs_mass")
class TokenCodeSwitchMASS(TokenSwitching, CodeSwitchMASS):
    """MASS whose encoder context is token code-switched with self-induced translations."""

    Options = TCSMASSOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``TCSMASSOptions`` (MASS's, the switching's and TCS's)."""
        CodeSwitchMASS.__init__(self, ctx, options, **values)
        self.init_token()
        self.init_switching(ctx)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """The MASS batch plus ``cs_input_ids`` [B, S]: the encoder input with the switched
        context tokens replaced by their translations."""
        batch, b = self.collate_switch(raw, generator, self.translatable(raw.source))
        return self.switched_ids(batch, batch["input_ids"], raw.source, b)

    def forward(self, model: EncoderDecoderModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """One encoder pass over the original and code-switched inputs stacked as [2B, S], one
        decoder pass over the span twice; logits [2N, V] (original rows first)."""
        states = encoder_states(model, self.stacked_inputs(batch))
        return decoder_logits(model, doubled_decoder_batch(batch), states)


@OBJECTIVES.register("scs_mass")
class SemanticCodeSwitchMASS(SemanticSwitching, CodeSwitchMASS):
    """MASS whose encoder context is semantically code-switched (soft CSLS translations)."""

    Options = SCSMASSOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``SCSMASSOptions`` (MASS's, the switching's and SCS's)."""
        CodeSwitchMASS.__init__(self, ctx, options, **values)
        self.init_semantic()
        self.init_switching(ctx)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """The MASS batch plus ``switch`` [B, S] and ``pair`` [2]."""
        return self.collate_switch(raw, generator, self.translatable(raw.source))[0]

    def forward(self, model: EncoderDecoderModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The original encoder pass (with gradients) gives, detached, the decoder output
        layer's distribution at the switched positions; a second encoder pass runs on
        ``inputs_embeds`` with ŷ there; one decoder pass over both. Logits [2N, V]."""
        states = encoder_states(model, batch)
        encoder = model.get_encoder()
        with torch.no_grad():
            logits = masked_lm_logits(model.get_decoder(), states.detach(), batch["switch"])
        kwargs = self.switched_inputs(encoder.get_input_embeddings(), batch, logits)
        switched = encoder(**kwargs).last_hidden_state
        both = torch.cat([states, switched])
        return decoder_logits(model, doubled_decoder_batch(batch), both)
