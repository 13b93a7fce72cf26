"""Input noise of denoising auto-encoding for unsupervised MT (Lample et al. 2018, "Unsupervised
Machine Translation Using Monolingual Corpora Only", §2.3; XLM's ``add_noise``).

A sentence's tokens (no special tokens) are shuffled locally, then dropped, then blanked, in
that order, as XLM does; the noise works on subword tokens, as XLM's does on BPE units.
"""

from __future__ import annotations

import torch


def local_shuffle(tokens: torch.Tensor, alpha: float, generator: torch.Generator) -> torch.Tensor:
    """Slightly shuffled ``tokens`` [n]: token i is ranked by i + U(0, alpha), so no token moves
    ``alpha`` or more positions (XLM's ``word_shuffle``, alpha 3); 0 leaves them in place."""
    if alpha == 0 or len(tokens) < 2:
        return tokens
    scores = torch.arange(len(tokens)) + torch.rand(len(tokens), generator=generator) * alpha
    return tokens[scores.argsort()]


def drop_tokens(tokens: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """``tokens`` [n] with each one removed with probability ``p``; when all would go, one
    token drawn uniformly stays (XLM's ``word_dropout`` keeps at least one word)."""
    if p == 0 or len(tokens) == 0:
        return tokens
    keep = torch.rand(len(tokens), generator=generator) >= p
    if not keep.any():
        keep[torch.randint(len(tokens), (1,), generator=generator)] = True
    return tokens[keep]


def blank_tokens(
    tokens: torch.Tensor, p: float, blank_id: int, generator: torch.Generator
) -> torch.Tensor:
    """``tokens`` [n] with each one replaced by ``blank_id`` with probability ``p`` (XLM's
    ``word_blank``, with the mask token)."""
    if p == 0:
        return tokens
    blank = torch.rand(len(tokens), generator=generator) < p
    return torch.where(blank, torch.full_like(tokens, blank_id), tokens)


def add_noise(
    tokens: torch.Tensor,
    generator: torch.Generator,
    *,
    shuffle: float,
    drop: float,
    blank: float,
    blank_id: int,
) -> torch.Tensor:
    """C(x) of Lample et al. (2018): ``local_shuffle``, ``drop_tokens``, ``blank_tokens``."""
    tokens = local_shuffle(tokens, shuffle, generator)
    tokens = drop_tokens(tokens, drop, generator)
    return blank_tokens(tokens, blank, blank_id, generator)
