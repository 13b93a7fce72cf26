"""Translation language modelling (XLM, Conneau & Lample 2019, §3.3)."""

from __future__ import annotations

import torch

from crossalign.objectives.base import OBJECTIVES, RawBatch
from crossalign.objectives.mlm import MaskedLM, add_masked_index


def truncate_pair(n_src: int, n_tgt: int, budget: int) -> tuple[int, int]:
    """Lengths to keep so that n_src + n_tgt <= budget, trimming the longer side first."""
    while n_src + n_tgt > budget:
        if n_src >= n_tgt:
            n_src -= 1
        else:
            n_tgt -= 1
    return n_src, n_tgt


@OBJECTIVES.register("tlm")
class TranslationLM(MaskedLM):
    """Translation LM on sentence pairs: both sides masked, positions restart, per-side language."""

    data = "parallel"

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Pairs → ``[cls] src [sep] [cls] tgt [sep]`` padded to the longest, with
        position_ids restarting at the target, token_type_ids = language per side,
        segment_ids (0 source, 1 target, -1 padding), and 80/10/10 masking of both sides.
        All [B, L]."""
        ctx = self.ctx
        src_lang, tgt_lang = raw.source.split("-", 1)
        rows, positions, segments = [], [], []
        for src, tgt in raw.pairs:
            ns, nt = truncate_pair(len(src), len(tgt), ctx.max_length - 4)
            rows.append([ctx.cls_id, *src[:ns].tolist(), ctx.sep_id])
            rows[-1] += [ctx.cls_id, *tgt[:nt].tolist(), ctx.sep_id]
            positions.append([*range(ns + 2), *range(nt + 2)])
            segments.append([0] * (ns + 2) + [1] * (nt + 2))
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
        return add_masked_index(batch)
