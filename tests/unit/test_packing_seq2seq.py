"""Packed sequence-to-sequence rows (mass, mass_gc, dae, mt): the same examples, masks, loss
and gradients as the padded rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossalign.config import ModelConfig
from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.packing import (
    BLOCK_MASK,
    CROSS_BLOCK_MASK,
    DECODER_BLOCK_MASK,
    first_fit,
    pack_seq2seq,
    padding_fraction,
)
from crossalign.errors import CrossalignError
from crossalign.models.seq2seq import build_seq2seq
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from tests.unit.test_gc_loss import save_matrix
from tests.unit.test_packing import assert_same_step

CLS, PAD, SEP, MASK = 0, 1, 2, 4
VOCAB = 40


def context(max_length: int = 24) -> TokenContext:
    return TokenContext(
        pad_id=PAD, mask_id=MASK, cls_id=CLS, sep_id=SEP, special_ids=[0, 1, 2, 3, 4],
        vocab_size=VOCAB, languages=["en", "es"], position_offset=0, max_length=max_length,
    )  # fmt: skip


def tiny_seq2seq():
    torch.manual_seed(0)
    model = build_seq2seq(ModelConfig(arch="bert", preset="tiny"), VOCAB, (CLS, SEP, PAD),
                          ["en", "es"], 24)  # fmt: skip
    return model.eval()  # no dropout: both passes read the same states


def test_first_fit_with_a_second_length_needs_room_for_both():
    # by the first lengths alone rows 0 and 1 share a bin; their second lengths do not fit
    assert first_fit([5, 4], 10) == [[0, 1]]
    assert first_fit([5, 4], 10, also=[6, 6]) == [[0], [1]]
    assert first_fit([5, 4, 1], 10, also=[6, 6, 4]) == [[0, 2], [1]]


def test_pack_seq2seq_packs_both_sides_pair_by_pair():
    batch = {
        "input_ids": torch.tensor([[5, 6, 7, 1], [8, 9, 1, 1], [10, 11, 12, 13]]),
        "attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]),
        "cross_attention_mask": torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]),
        "decoder_input_ids": torch.tensor([[20, 21], [22, 1], [23, 24]]),
        "decoder_attention_mask": torch.tensor([[1, 1], [1, 0], [1, 1]]),
        "labels": torch.tensor([[30, 31], [32, -100], [33, 34]]),
    }
    packed = pack_seq2seq(batch, capacity=5, pads={"input_ids": PAD, "labels": IGNORE_INDEX})
    # encoder lengths 3, 2, 4 into rows of 5: the 4 alone, the 3 and the 2 together; the
    # decoder rows follow their pairs
    assert packed["input_ids"].tolist() == [[10, 11, 12, 13, 1], [5, 6, 7, 8, 9]]
    assert packed["decoder_input_ids"].tolist() == [[23, 24, 0], [20, 21, 22]]
    assert packed["labels"].tolist() == [[33, 34, -100], [30, 31, 32]]
    self_mask = packed[DECODER_BLOCK_MASK][1].int().tolist()
    assert self_mask == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]  # causal within each pair
    cross = packed[CROSS_BLOCK_MASK][1].int().tolist()
    # pair 0's decoder reads its own encoder tokens where cross_attention_mask is 1
    assert cross == [[1, 0, 1, 0, 0], [1, 0, 1, 0, 0], [0, 0, 0, 1, 1]]
    # row 0's decoder padding position reads the first encoder position: no empty row
    assert packed[CROSS_BLOCK_MASK][0][2].int().tolist() == [1, 0, 0, 0, 0]
    assert packed[DECODER_BLOCK_MASK][0][2].int().tolist() == [0, 0, 1]
    for key in (BLOCK_MASK, DECODER_BLOCK_MASK, CROSS_BLOCK_MASK):
        assert packed[key].any(-1).all(), key


def test_packed_rows_leave_room_for_the_decoder_too():
    """mt pairs whose targets are longer than their sources: packing by the encoder's lengths
    alone would overfill the decoder's rows; every packed row of both sides fits."""
    rng = np.random.default_rng(2)
    pairs = list(zip(sentences(rng, [2, 3, 2, 3]), sentences(rng, [8, 9, 7, 8])))
    obj = OBJECTIVES.get("mt")(context(max_length=14), packing=True, direction="forward")
    packed = obj.collate(RawBatch("en-es", pairs=pairs), torch.Generator().manual_seed(0))
    encoder_bins = first_fit([4, 5, 4, 5], 14)  # <s> x </s>: the encoder alone packs 3 + 1
    assert len(encoder_bins) == 2
    assert packed["input_ids"].shape[0] == 4  # a target of 8-10 tokens each: one pair a row
    assert packed["decoder_input_ids"].shape[1] <= 14
    assert packed["input_ids"].shape[1] <= 14


def sentences(rng, lengths):
    return [rng.integers(5, VOCAB, n).astype(np.int32) for n in lengths]


LENGTHS = [3, 9, 2, 12, 5, 4, 7]


def raw_of(name: str, rng) -> RawBatch:
    if name == "mt":
        pairs = list(zip(sentences(rng, LENGTHS), sentences(rng, [4, 6, 3, 10, 2, 5, 8])))
        return RawBatch("en-es", pairs=pairs)
    return RawBatch("en", sentences=sentences(rng, LENGTHS))


def make(name: str, tmp_path, **options):
    if name != "mass_gc":
        return OBJECTIVES.get(name)(context(), **options)
    rng = np.random.default_rng(5)
    x = {}
    for a, b in rng.integers(5, VOCAB, (200, 2)).tolist():
        x[a, b] = x[b, a] = float(rng.integers(1, 300))
    save_matrix(tmp_path / "m", x, VOCAB, window=2)
    return OBJECTIVES.get(name)(context(), cooc=str(tmp_path / "m"), gc_weight=0.5, **options)


@pytest.mark.parametrize("name", ["mass", "mass_gc", "dae", "mt"])
def test_packed_seq2seq_loss_and_gradients_equal_the_padded(name, tmp_path):
    raw = raw_of(name, np.random.default_rng(0))
    padded_obj = make(name, tmp_path)
    packed_obj = make(name, tmp_path, packing=True)
    padded = padded_obj.collate(raw, torch.Generator().manual_seed(3))
    packed = packed_obj.collate(raw, torch.Generator().manual_seed(3))
    assert packed["input_ids"].shape[0] < padded["input_ids"].shape[0]
    assert padding_fraction(packed) < padding_fraction(padded)
    assert sorted(packed["masked_labels"].tolist()) == sorted(padded["masked_labels"].tolist())
    model = tiny_seq2seq()
    for obj in (padded_obj, packed_obj):
        obj.start(model)
    assert_same_step(model, (padded_obj, packed_obj), (padded, packed))


def test_code_switched_mass_and_back_translation_have_no_packing():
    for name in ("tcs_mass", "scs_mass", "bt"):
        with pytest.raises(CrossalignError, match="packing"):
            OBJECTIVES.get(name)(context(), packing=True)
