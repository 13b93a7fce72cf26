"""Similarity scores between the source and target subword states of a batch of pairs."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def dot_scores(src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Raw dot products ``h_iᵀ h_j`` of source and target states, as XLM-Align scores them.

    src [B, m, d], tgt [B, n, d] -> [B, m, n]. Rows and columns of padding positions hold
    whatever the padding states give; callers mask them.
    """
    return torch.bmm(src, tgt.transpose(1, 2))


def cosine_scores(src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """SimAlign's similarity ``(cos(h_i, h_j) + 1) / 2``, in [0, 1].

    src [B, m, d], tgt [B, n, d] -> [B, m, n].
    """
    return (dot_scores(F.normalize(src, dim=-1), F.normalize(tgt, dim=-1)) + 1.0) / 2.0
