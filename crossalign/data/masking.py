"""BERT-style masking for masked-LM objectives (Devlin et al. 2019, §3.1)."""

from __future__ import annotations

import torch

IGNORE_INDEX = -100


def mask_tokens(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    mask_id: int,
    random_ids: torch.Tensor,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    replace_probs: tuple[float, float] = (0.8, 0.1),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Select each maskable token with ``mask_prob``; of those, 80% become ``mask_id``, 10% a
    random id from ``random_ids`` and 10% stay (``replace_probs`` = (mask, random)).

    input_ids: [B, L] long; maskable: [B, L] bool (False for specials and padding);
    random_ids: [R] long, the ids random replacements are drawn from.
    Returns (inputs [B, L], labels [B, L]) with labels = IGNORE_INDEX where not selected.
    """
    shape = input_ids.shape
    selected = (torch.rand(shape, generator=generator) < mask_prob) & maskable
    u = torch.rand(shape, generator=generator)
    to_mask = selected & (u < replace_probs[0])
    to_random = selected & (u >= replace_probs[0]) & (u < replace_probs[0] + replace_probs[1])
    pick = torch.randint(len(random_ids), shape, generator=generator)
    inputs = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(to_random, random_ids[pick], inputs)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return inputs, labels
