"""Translation language modelling (XLM, Conneau & Lample 2019, §3.3)."""

from __future__ import annotations

from typing import Any

import torch

from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.packing import pack_rows
from crossalign.data.pair_layout import pair_row, special_count, truncate_pair
from crossalign.objectives.base import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.mlm import MaskedLM, add_masked_index
from crossalign.objectives.options import ObjectiveOptions, TLMOptions


@OBJECTIVES.register("tlm")
class TranslationLM(MaskedLM):
    """Translation LM on sentence pairs: both sides masked, positions restart, per-side language."""

    Options = TLMOptions

    data = "parallel"

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``TLMOptions`` (MLM's and ``layout``)."""
        super().__init__(ctx, options, **values)
        self.layout = self.options.layout

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """``pair_batch``'s rows, packed with ``packing`` (``pack``), and their masked
        positions (``add_masked_index``)."""
        batch = self.pair_batch(raw, generator)
        if self.options.packing:
            batch = self.pack(batch)
        return add_masked_index(batch)

    def pack(
        self, batch: dict[str, torch.Tensor], origin: bool = False, **pads: int
    ) -> dict[str, torch.Tensor]:
        """``pair_batch``'s rows packed several to a row of ``max_length`` tokens
        (``pack_rows``: ``block_mask`` [R, L, L], and with ``origin`` where each token came
        from); ``pads``: the padding values of keys other than TLM's."""
        pads = {"input_ids": self.ctx.pad_id, "segment_ids": -1, "labels": IGNORE_INDEX, **pads}
        return pack_rows(batch, self.ctx.max_length, pads, origin)

    def pair_batch(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Pairs → rows of ``layout`` (``[cls] src [sep] [cls] tgt [sep]`` with position_ids
        restarting at the target for TLM) padded to the longest, with token_type_ids =
        language per side, segment_ids (0 source, 1 target, -1 padding), and 80/10/10 masking
        of both sides. All [B, L]."""
        ctx = self.ctx
        src_lang, tgt_lang = raw.source.split("-", 1)
        rows, positions, segments = [], [], []
        budget = ctx.max_length - special_count(self.layout)
        for src, tgt in raw.pairs:
            ns, nt = truncate_pair(len(src), len(tgt), budget)
            src_ids, tgt_ids = src[:ns].tolist(), tgt[:nt].tolist()
            row = pair_row(src_ids, tgt_ids, ctx.cls_id, ctx.sep_id, self.layout)
            rows.append(row.ids)
            positions.append(row.positions)
            segments.append(row.segments)
        length = max(map(len, rows))
        b = len(rows)
        ids = torch.full((b, length), ctx.pad_id, dtype=torch.long)
        pos = torch.zeros((b, length), dtype=torch.long)
        seg = torch.full((b, length), -1, dtype=torch.long)
        for i, (r, p, s) in enumerate(zip(rows, positions, segments)):
            ids[i, : len(r)] = torch.tensor(r)
            pos[i, : len(p)] = torch.tensor(p)
            seg[i, : len(s)] = torch.tensor(s)
        inputs, labels = self.mask(ids, generator)
        batch = {
            "input_ids": inputs,
            "attention_mask": (seg >= 0).long(),
            "position_ids": ctx.position_offset + pos,
            "segment_ids": seg,
            "labels": labels,
        }
        if ctx.languages:
            batch["token_type_ids"] = torch.where(
                seg == 1, ctx.language_id(tgt_lang), ctx.language_id(src_lang)
            )
        return batch
