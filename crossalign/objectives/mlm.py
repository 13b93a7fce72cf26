"""Masked language modelling on packed monolingual blocks (BERT; XLM's MLM on text streams) or on
one sentence per row (run_mlm's --line_by_line)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from crossalign.data.masking import IGNORE_INDEX, mask_tokens
from crossalign.data.packing import BLOCK_MASK, pack_rows
from crossalign.errors import CrossalignError
from crossalign.objectives.base import OBJECTIVES, Objective, RawBatch, TokenContext, row_batch
from crossalign.objectives.options import MaskedLMOptions, ObjectiveOptions


def masked_lm_logits(
    model: PreTrainedModel, hidden: torch.Tensor, selected: torch.Tensor
) -> torch.Tensor:
    """Vocabulary logits at the selected positions only: [N, V] for hidden [B, L, H] and
    ``selected`` [B, L] bool, or [N] long flat positions (b·L + t; no device sync). Skips the
    [B, L, V] product of the full head."""
    head = getattr(model, "cls", None) or getattr(model, "lm_head", None)
    if head is None:
        raise TypeError(f"{type(model).__name__}: no masked-LM head found (cls or lm_head)")
    if selected.dtype == torch.bool:
        return head(hidden[selected])
    return head(hidden.flatten(0, 1).index_select(0, selected))


def add_masked_index(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Add ``masked_index`` [N] (flat positions b·L + t of the predicted tokens) and
    ``masked_labels`` [N], computed on the CPU at collation so the GPU step needs no
    data-dependent indexing (which would wait for the device)."""
    flat = batch["labels"].flatten()
    batch["masked_index"] = (flat != IGNORE_INDEX).nonzero().squeeze(1)
    batch["masked_labels"] = flat[batch["masked_index"]]
    return batch


def encode(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Final hidden states [B, L, H] of the encoder for a collated batch (packed rows attend
    within their blocks: ``BLOCK_MASK``)."""
    hidden = model.base_model(input_ids=batch["input_ids"], **encoder_kwargs(model, batch))
    return hidden.last_hidden_state


def encoder_kwargs(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> dict:
    """The encoder's keyword inputs of a collated batch other than ``input_ids``: the
    attention mask (``BLOCK_MASK`` [B, 1, L, L] for packed rows, which need SDPA attention),
    ``position_ids`` and, when present, ``token_type_ids``."""
    mask = batch["attention_mask"]
    if BLOCK_MASK in batch:
        require_sdpa(model)
        mask = batch[BLOCK_MASK][:, None]
    kwargs = {"attention_mask": mask, "position_ids": batch["position_ids"]}
    if "token_type_ids" in batch:
        kwargs["token_type_ids"] = batch["token_type_ids"]
    return kwargs


def require_sdpa(model: PreTrainedModel) -> None:
    """Refuse packed rows for a model whose attention is not SDPA: another implementation
    would ignore or misread a boolean block mask."""
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation != "sdpa":
        raise CrossalignError(
            f"packed pairs need SDPA attention (a boolean block mask); this "
            f"{type(model).__name__} uses {implementation or '?'}: set packing: false, or load "
            "the model with attn_implementation='sdpa'"
        )


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy over predicted positions: logits [N, V], labels [N] (the labels at
    the selected positions). Returns (loss, N). Computed in fp32."""
    n = torch.tensor(labels.numel(), device=labels.device)
    if labels.numel() == 0:
        return logits.sum() * 0.0, n
    return F.cross_entropy(logits.float(), labels), n


@OBJECTIVES.register("mlm")
class MaskedLM(Objective):
    """Masked LM on monolingual text: 15% of tokens, 80% <mask> / 10% random / 10% kept."""

    data = "mono"
    Options = MaskedLMOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``MaskedLMOptions`` (``mask_prob``, ``replace_probs``, ``line_by_line``,
        ``packing``) or a subclass's ``MLMOptions``."""
        super().__init__(ctx, options, **values)
        self.mask_prob = self.options.mask_prob
        self.replace_probs = tuple(self.options.replace_probs)
        self.register_buffer("random_ids", ctx.random_ids(), persistent=False)
        if getattr(self.options, "line_by_line", False):
            self.data = "sentences"

    def mask(
        self, input_ids: torch.Tensor, generator: torch.Generator, language: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """80/10/10 masking of every non-special, non-pad token: (inputs, labels) [B, L].
        ``language``: the block's language (None for pairs); the same masking in every
        language here, subclasses may depend on it (DICT-MLM)."""
        maskable = ~torch.isin(input_ids, torch.tensor(self.ctx.special_ids))
        return mask_tokens(
            input_ids,
            maskable,
            self.ctx.mask_id,
            self.random_ids.cpu(),
            generator,
            self.mask_prob,
            self.replace_probs,
        )

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Packed blocks of one language (or sentences, ``sentence_batch``) → input_ids,
        attention_mask, position_ids, token_type_ids (language), labels; all [B, L]."""
        if raw.sentences is not None:
            return self.sentence_batch(raw, generator)
        ids = torch.from_numpy(raw.blocks.astype("int64"))
        inputs, labels = self.mask(ids, generator, raw.source)
        b, length = ids.shape
        batch = {
            "input_ids": inputs,
            "attention_mask": (ids != self.ctx.pad_id).long(),
            "position_ids": self.ctx.position_offset + torch.arange(length).expand(b, -1),
            "labels": labels,
        }
        if self.ctx.languages:
            batch["token_type_ids"] = torch.full_like(ids, self.ctx.language_id(raw.source))
        return add_masked_index(batch)

    def sentence_batch(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Sentences of one language, one per row: ``[cls] sentence [sep]`` (cut to
        ``max_length``), positions from 0, padded to the longest and masked as ``collate``
        masks blocks; with ``packing``, packed several to a row (``pack_rows``: [R, L'] plus
        ``BLOCK_MASK``), masked before packing so the same tokens are predicted."""
        ctx = self.ctx
        rows = [
            [ctx.cls_id, *map(int, ids[: ctx.max_length - 2]), ctx.sep_id] for ids in raw.sentences
        ]
        batch = row_batch(rows, ctx, raw.source)
        batch["input_ids"], batch["labels"] = self.mask(batch["input_ids"], generator, raw.source)
        if self.options.packing:
            pads = {"input_ids": ctx.pad_id, "labels": IGNORE_INDEX}
            batch = pack_rows(batch, ctx.max_length, pads)
        return add_masked_index(batch)

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits [N, V] at the N masked positions (``masked_index``)."""
        hidden = encode(model, batch)
        return masked_lm_logits(model, hidden, batch["masked_index"])

    def loss(self, batch, outputs):
        """Mean cross-entropy of the masked positions."""
        loss, n = masked_lm_loss(outputs, batch["masked_labels"])
        return loss, n, {}
