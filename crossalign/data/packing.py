"""Several short rows packed into one, so that no position of a batch is padding: each packed
row holds whole rows one after another, attends only within its own block (a block-diagonal
attention mask), and keeps its own position ids. One packed row computes what its rows
computed alone (the encoder sees the same tokens, positions and neighbours), so the loss and
gradients equal the padded batch's (tests/unit/test_packing.py)."""

from __future__ import annotations

import torch

BLOCK_MASK = "block_mask"
"""Batch key of the packed rows' attention: bool [B, L, L], True where a token may attend."""


def first_fit(lengths: list[int], capacity: int) -> list[list[int]]:
    """Rows (indices into ``lengths``) packed into bins of ``capacity`` tokens, first fit in
    order of decreasing length (ties keep their order); each bin lists its rows in order."""
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(capacity - lengths[i])
    return [sorted(b) for b in bins]


def pack_rows(
    batch: dict[str, torch.Tensor], capacity: int, pads: dict[str, int]
) -> dict[str, torch.Tensor]:
    """The [B, L] tensors of ``batch`` with real tokens where ``attention_mask`` is 1 (a
    prefix of each row) packed into [R, L'] rows of at most ``capacity`` tokens (L' the
    longest packed row), plus ``BLOCK_MASK`` [R, L', L']. ``attention_mask`` stays [R, L']
    (1 on real tokens); a key's padding value is ``pads[key]`` (default 0). Keys derived from
    positions (``masked_index``) must be computed after packing."""
    lengths = batch["attention_mask"].sum(1).tolist()
    bins = first_fit(lengths, capacity)
    width = max(sum(lengths[i] for i in b) for b in bins)
    out = {
        key: torch.full((len(bins), width), pads.get(key, 0), dtype=value.dtype)
        for key, value in batch.items()
    }
    block = torch.zeros((len(bins), width, width), dtype=torch.bool)
    for r, rows in enumerate(bins):
        start = 0
        for i in rows:
            n = lengths[i]
            for key, value in batch.items():
                out[key][r, start : start + n] = value[i, :n]
            block[r, start : start + n, start : start + n] = True
            start += n
    out[BLOCK_MASK] = block
    return out


def padding_fraction(batch: dict[str, torch.Tensor]) -> float:
    """Share of the batch's positions that are padding (attention_mask 0)."""
    mask = batch["attention_mask"]
    return 1.0 - float(mask.sum()) / mask.numel()
