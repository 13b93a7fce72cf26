"""Several short rows packed into one, so that no position of a batch is padding: each packed
row holds whole rows one after another, attends only within its own block (a block-diagonal
attention mask), and keeps its own position ids. One packed row computes what its rows
computed alone (the encoder sees the same tokens, positions and neighbours), so the loss and
gradients equal the padded batch's (tests/unit/test_packing.py)."""

from __future__ import annotations

import torch

from crossalign.data.masking import IGNORE_INDEX

BLOCK_MASK = "block_mask"
"""Batch key of the packed rows' attention: bool [B, L, L], True where a token may attend."""


def first_fit(lengths: list[int], capacity: int, also: list[int] | None = None) -> list[list[int]]:
    """Rows (indices into ``lengths``) packed into bins of ``capacity`` tokens, first fit in
    order of decreasing length (ties keep their order); each bin lists its rows in order. With
    ``also`` (a second length per row, e.g. a decoder's), a bin must have room for both."""
    bins: list[list[int]] = []
    room: list[int] = []
    room_also: list[int] = []
    second = also if also is not None else [0] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for b, free in enumerate(room):
            if lengths[i] <= free and second[i] <= room_also[b]:
                bins[b].append(i)
                room[b] -= lengths[i]
                room_also[b] -= second[i]
                break
        else:
            bins.append([i])
            room.append(capacity - lengths[i])
            room_also.append(capacity - second[i])
    return [sorted(b) for b in bins]


ORIGIN_ROW = "origin_row"
"""Batch key of packed rows (with ``origin``): long [R, L], the padded row each token came
from (-1 on padding)."""
ORIGIN_POSITION = "origin_position"
"""Batch key of packed rows (with ``origin``): long [R, L], the token's position in its padded
row (-1 on padding)."""
ORIGIN_LENGTHS = "origin_lengths"
"""Batch key of packed rows (with ``origin``): long [B], the real tokens of each padded row
(its shape gives B without reading the device)."""


def pack_rows(
    batch: dict[str, torch.Tensor], capacity: int, pads: dict[str, int], origin: bool = False
) -> dict[str, torch.Tensor]:
    """The [B, L] tensors of ``batch`` with real tokens where ``attention_mask`` is 1 (a
    prefix of each row) packed into [R, L'] rows of at most ``capacity`` tokens (L' the
    longest packed row), plus ``BLOCK_MASK`` [R, L', L'] (a padding position attends to
    itself alone). ``attention_mask`` stays [R, L'] (1 on real tokens); a key's padding
    value is ``pads[key]`` (default 0). Keys derived from positions (``masked_index``) must
    be computed after packing. With ``origin``, also ``ORIGIN_ROW``, ``ORIGIN_POSITION`` and
    ``ORIGIN_LENGTHS``, which ``unpack`` and ``repack_positions`` read."""
    lengths = batch["attention_mask"].sum(1).tolist()
    out, row_of, position_of = place(batch, first_fit(lengths, capacity), lengths, pads)
    out[BLOCK_MASK] = block_mask(row_of)
    if origin:
        out[ORIGIN_ROW], out[ORIGIN_POSITION] = row_of, position_of
        out[ORIGIN_LENGTHS] = torch.tensor(lengths, dtype=torch.long)
    return out


def place(
    batch: dict[str, torch.Tensor],
    bins: list[list[int]],
    lengths: list[int],
    pads: dict[str, int],
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """The first ``lengths[i]`` tokens of each row i of the [B, L] tensors of ``batch`` laid
    one after another, bin by bin, into [R, L'] rows (``pads[key]``, default 0, elsewhere).
    Returns them with the row each token came from and its position there, [R, L'] long each
    (-1 on padding)."""
    width = max(sum(lengths[i] for i in b) for b in bins)
    out = {
        key: torch.full((len(bins), width), pads.get(key, 0), dtype=value.dtype)
        for key, value in batch.items()
    }
    row_of = torch.full((len(bins), width), -1, dtype=torch.long)
    position_of = torch.full((len(bins), width), -1, dtype=torch.long)
    for r, rows in enumerate(bins):
        start = 0
        for i in rows:
            n = lengths[i]
            for key, value in batch.items():
                out[key][r, start : start + n] = value[i, :n]
            row_of[r, start : start + n] = i
            position_of[r, start : start + n] = torch.arange(n)
            start += n
    return out, row_of, position_of


def block_mask(row_of: torch.Tensor) -> torch.Tensor:
    """Attention of packed rows, [R, L', L'] bool: a token attends to the tokens of its own
    row (``row_of`` [R, L'], -1 on padding); a padding position attends to itself alone, so no
    row of the mask is empty (an empty row gives NaN states on some attention kernels, and NaN
    gradients through them)."""
    real = row_of >= 0
    same = (row_of[:, :, None] == row_of[:, None, :]) & real[:, :, None]
    eye = torch.eye(row_of.shape[1], dtype=torch.bool)
    return same | (eye & ~real[:, :, None])


DECODER_BLOCK_MASK = "decoder_block_mask"
"""Batch key of packed sequence-to-sequence rows: the decoder's self-attention, bool
[R, T', T'], causal within each pair's block."""
CROSS_BLOCK_MASK = "cross_block_mask"
"""Batch key of packed sequence-to-sequence rows: the decoder's cross-attention to the encoder,
bool [R, T', S'], within each pair's blocks."""


def is_decoder_key(key: str) -> bool:
    """Whether a collated sequence-to-sequence batch's ``key`` is laid out along the decoder's
    positions (``decoder_*`` and ``labels``) rather than the encoder's."""
    return key.startswith("decoder_") or key == "labels"


def pack_seq2seq(
    batch: dict[str, torch.Tensor], capacity: int, pads: dict[str, int]
) -> dict[str, torch.Tensor]:
    """A sequence-to-sequence batch's [B, S] encoder and [B, T] decoder tensors (real tokens:
    prefixes where ``attention_mask`` and ``decoder_attention_mask`` are 1) packed pair by pair
    into the same [R, S'] and [R, T'] rows, each side at most ``capacity`` tokens, plus
    ``BLOCK_MASK`` [R, S', S'] (the encoder's), ``DECODER_BLOCK_MASK`` [R, T', T'] (causal
    within a pair) and ``CROSS_BLOCK_MASK`` [R, T', S'] (a decoder token reads its own pair's
    encoder tokens where ``cross_attention_mask``, else ``attention_mask``, is 1; a decoder
    padding position reads the first encoder position, so no row of a mask is empty).
    ``masked_index`` must be computed after packing."""
    enc = {k: v for k, v in batch.items() if not is_decoder_key(k)}
    dec = {k: v for k, v in batch.items() if is_decoder_key(k)}
    enc_lengths = batch["attention_mask"].sum(1).tolist()
    dec_lengths = batch["decoder_attention_mask"].sum(1).tolist()
    bins = first_fit(enc_lengths, capacity, also=dec_lengths)
    out_enc, enc_row, _ = place(enc, bins, enc_lengths, pads)
    out_dec, dec_row, _ = place(dec, bins, dec_lengths, pads)
    causal = torch.ones(dec_row.shape[1], dec_row.shape[1], dtype=torch.bool).tril()
    keys = out_enc.get("cross_attention_mask", out_enc["attention_mask"]).bool()
    real = dec_row >= 0
    cross = (dec_row[:, :, None] == enc_row[:, None, :]) & real[:, :, None] & keys[:, None, :]
    cross[..., 0] |= ~real
    return {
        **out_enc,
        **out_dec,
        BLOCK_MASK: block_mask(enc_row),
        DECODER_BLOCK_MASK: block_mask(dec_row) & causal,
        CROSS_BLOCK_MASK: cross,
    }


def _flat_origin(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int, int]:
    """Each packed token's flat index b·L' + t in the padded [B, L'] layout (B·L' on padding,
    a slot that is dropped), with B and L' (L' the packed width, at least every row's length)."""
    row, pos = batch[ORIGIN_ROW], batch[ORIGIN_POSITION]
    n_rows, width = batch[ORIGIN_LENGTHS].shape[0], row.shape[1]
    flat = torch.where(row >= 0, row * width + pos, n_rows * width)
    return flat, n_rows, width


def unpack(
    values: torch.Tensor, batch: dict[str, torch.Tensor], fill: float | bool = 0
) -> torch.Tensor:
    """Packed values [R, L', ...] of a batch packed with ``origin`` back in the padded layout
    [B, L', ...] (each row's tokens at their own positions, ``fill`` elsewhere). Runs on the
    values' device without reading it."""
    flat, n_rows, width = _flat_origin(batch)
    rest = values.shape[2:]
    out = values.new_full((n_rows * width + 1, *rest), fill)
    out[flat.flatten()] = values.flatten(0, 1)
    return out[:-1].view(n_rows, width, *rest)


def repack_positions(positions: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-token positions in the padded layout, [B, L'] long (a position within the same
    padded row, or negative for none), as positions within the packed rows, [R, L']
    (``IGNORE_INDEX`` for none and on padding)."""
    flat, _, _ = _flat_origin(batch)
    padded = torch.cat([positions.flatten(), positions.new_full((1,), -1)])
    at = padded[flat]
    start = torch.arange(flat.shape[1], device=at.device) - batch[ORIGIN_POSITION]
    return torch.where(at >= 0, at + start, IGNORE_INDEX)


def padding_fraction(batch: dict[str, torch.Tensor]) -> float:
    """Share of the batch's positions that are padding (attention_mask 0)."""
    mask = batch["attention_mask"]
    return 1.0 - float(mask.sum()) / mask.numel()
