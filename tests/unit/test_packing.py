"""Packed TLM and DWA rows: the same pairs, masks, self-labels, loss and gradients as the padded
rows."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.packing import (
    BLOCK_MASK,
    ORIGIN_POSITION,
    ORIGIN_ROW,
    first_fit,
    pack_rows,
    padding_fraction,
    repack_positions,
    unpack,
)
from crossalign.objectives.base import RawBatch, TokenContext
from crossalign.objectives.dwa import DenoisingWordAlignment
from crossalign.objectives.mlm import MaskedLM
from crossalign.objectives.tlm import TranslationLM


def test_first_fit_packs_decreasing_lengths_into_the_first_bin_with_room():
    # 7 opens a bin (room 3), 5 and 4 share the second, 3 fills the first, 2 opens a third
    assert first_fit([5, 3, 7, 2, 4], 10) == [[1, 2], [0, 4], [3]]
    for bins in (first_fit([1] * 9, 4), first_fit([4, 4, 4], 4)):
        assert sorted(i for b in bins for i in b) == list(range(sum(map(len, bins))))


def test_pack_rows_keeps_every_real_token_and_blocks_attention():
    batch = {
        "input_ids": torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 9]]),
        "attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]),
    }
    # lengths 3, 2, 4 into rows of 5: the 4 alone, then the 3 and the 2 together
    packed = pack_rows(batch, capacity=5, pads={"input_ids": 0})
    assert packed["input_ids"].tolist() == [[6, 7, 8, 9, 0], [1, 2, 3, 4, 5]]
    assert packed["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    block = packed[BLOCK_MASK][1]
    assert block[:3, :3].all() and block[3:, 3:].all() and not block[:3, 3:].any()
    assert not block[3:, :3].any()
    # the padding position of row 0 attends to itself alone: no row of the mask is empty
    assert packed[BLOCK_MASK][0][4].tolist() == [False] * 4 + [True]
    assert packed[BLOCK_MASK].any(-1).all()
    assert padding_fraction(batch) == pytest.approx(3 / 12)
    assert padding_fraction(packed) == pytest.approx(1 / 10)


def context(languages: list[str]) -> TokenContext:
    special = [0, 1, 2, 3]
    return TokenContext(vocab_size=60, pad_id=1, mask_id=3, cls_id=0, sep_id=2,
                        special_ids=special, max_length=40, languages=languages,
                        position_offset=0)  # fmt: skip


def tiny_bert(vocab: int = 60) -> BertForMaskedLM:
    """A 2-layer BERT without dropout (seeded)."""
    config = BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    torch.manual_seed(0)
    return BertForMaskedLM(config)


@pytest.mark.parametrize("layout", ["tlm", "concat"])
@pytest.mark.parametrize("languages", [[], ["en", "es"]])
def test_packed_tlm_loss_and_gradients_equal_the_padded(layout, languages):
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(5, 60, n), rng.integers(5, 60, m))
             for n, m in [(3, 4), (9, 7), (2, 2), (12, 10), (5, 1), (4, 6)]]  # fmt: skip
    ctx = context(languages)
    assert_packs_as_padded(
        TranslationLM(ctx, layout=layout),
        TranslationLM(ctx, layout=layout, packing=True),
        RawBatch(source="en-es", pairs=pairs),
    )


def assert_packs_as_padded(
    padded_obj, packed_obj, raw: RawBatch, seed: int = 3, vocab: int = 60
) -> None:
    """``raw`` collated by both objectives with one seed: fewer rows and less padding packed,
    the same predicted tokens, and the same step (``assert_same_step``) on a ``tiny_bert`` of
    ``vocab`` ids."""
    padded = padded_obj.collate(raw, torch.Generator().manual_seed(seed))
    packed = packed_obj.collate(raw, torch.Generator().manual_seed(seed))
    assert packed["input_ids"].shape[0] < padded["input_ids"].shape[0]
    assert padding_fraction(packed) < padding_fraction(padded)
    assert sorted(packed["masked_labels"].tolist()) == sorted(padded["masked_labels"].tolist())
    assert_same_step(tiny_bert(vocab), (padded_obj, packed_obj), (padded, packed))


def assert_same_step(model, objectives, batches) -> None:
    """The padded batch on ``model`` and the packed one on a copy of it (each collated by its
    own objective of ``objectives``) give the same loss, token count, logged metrics and
    parameter gradients (a parameter no loss reaches has none, or zeros, in both)."""
    twin = copy.deepcopy(model)
    results = []
    for m, obj, batch in zip((model, twin), objectives, batches):
        loss, n, metrics = obj.loss(batch, obj(m, batch))
        loss.backward()
        results.append((loss, n, metrics))
    (padded_loss, padded_n, padded_metrics), (packed_loss, packed_n, packed_metrics) = results
    assert packed_n == padded_n
    assert packed_loss.item() == pytest.approx(padded_loss.item(), rel=1e-5)
    for key, value in padded_metrics.items():
        assert packed_metrics[key].item() == pytest.approx(value.item(), rel=1e-5), key
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        if a.grad is None:
            assert b.grad is None or not b.grad.any(), name
            continue
        assert torch.allclose(a.grad, b.grad, atol=1e-6, rtol=1e-4), name


def test_packed_rows_need_sdpa_attention():
    from crossalign.errors import CrossalignError

    ctx = context([])
    obj = TranslationLM(ctx, packing=True)
    pairs = [(np.arange(5, 9), np.arange(9, 12)), (np.arange(5, 7), np.arange(7, 9))]
    batch = obj.collate(RawBatch(source="en-es", pairs=pairs), torch.Generator().manual_seed(0))
    config = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, attn_implementation="eager")  # fmt: skip
    with pytest.raises(CrossalignError, match="packed pairs need SDPA attention"):
        obj(BertForMaskedLM(config), batch)


def test_unpack_and_repack_positions_invert_the_packing():
    batch = {
        "input_ids": torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 9]]),
        "attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]),
    }
    packed = pack_rows(batch, capacity=5, pads={}, origin=True)
    # packed rows [[6 7 8 9 .], [1 2 3 4 5]]: every token back at its own row and position
    values = packed["input_ids"][..., None].float().expand(-1, -1, 2)
    back = unpack(values, packed, fill=-1.0)
    assert back.shape == (3, 5, 2)
    assert back[..., 0].tolist() == [[1, 2, 3, -1, -1], [4, 5, -1, -1, -1], [6, 7, 8, 9, -1]]
    # row 0 points 0 -> 2, row 1 points 1 -> 0, row 2 points 3 -> 1; the rest none
    pointers = torch.full((3, 5), -1)
    pointers[0, 0], pointers[1, 1], pointers[2, 3] = 2, 0, 1
    moved = repack_positions(pointers, packed)
    expect = torch.full((2, 5), IGNORE_INDEX)
    expect[1, 0], expect[1, 4], expect[0, 3] = 2, 3, 1  # row 1 of the pack starts at 3
    assert moved.tolist() == expect.tolist()


@pytest.mark.parametrize(("layout", "reduction"),
                         [("concat", "pooled"), ("tlm", "pooled"), ("concat", "sum"),
                          ("concat", "mean")])  # fmt: skip
def test_packed_dwa_self_labels_loss_and_gradients_equal_the_padded(layout, reduction):
    rng = np.random.default_rng(1)
    pairs = [(rng.integers(5, 60, n), rng.integers(5, 60, m))
             for n, m in [(3, 4), (9, 7), (2, 2), (12, 10), (5, 1), (4, 6)]]  # fmt: skip
    raw = RawBatch(source="en-es", pairs=pairs)
    ctx = context([])
    model = tiny_bert()
    twin = copy.deepcopy(model)
    options = {"layer": 1, "layout": layout, "mask_prob": 0.5, "reduction": reduction}
    objectives = [DenoisingWordAlignment(ctx, **options),
                  DenoisingWordAlignment(ctx, **options, packing=True)]  # fmt: skip
    for obj in objectives:
        torch.manual_seed(1)
        obj.start(model)
    batches = [obj.label(m, obj.collate(raw, torch.Generator().manual_seed(3)))
               for m, obj in zip((model, twin), objectives)]  # fmt: skip
    padded, packed = batches
    assert packed["input_ids"].shape[0] < padded["input_ids"].shape[0]

    def links(batch):
        """(pair, query position, pointed position) over every labelled query, positions
        within the pair (packed rows: through where each token came from)."""
        ptr = batch["pointer_labels"]
        b, i = (ptr != IGNORE_INDEX).nonzero(as_tuple=True)
        j = ptr[b, i]
        if ORIGIN_ROW not in batch:
            return sorted(zip(b.tolist(), i.tolist(), j.tolist()))
        row, pos = batch[ORIGIN_ROW], batch[ORIGIN_POSITION]
        return sorted(zip(row[b, i].tolist(), pos[b, i].tolist(), pos[b, j].tolist()))

    assert len(links(padded)) > 5 and links(packed) == links(padded)
    results = []
    for m, obj, batch in zip((model, twin), objectives, batches):
        loss, n, metrics = obj.loss(batch, obj(m, batch))
        loss.backward()
        results.append((loss.item(), int(n), metrics["dwa_loss"].item()))
    assert results[1][1] == results[0][1]
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
    assert results[1][2] == pytest.approx(results[0][2], rel=1e-5)
    heads = zip(objectives[0].named_parameters(), objectives[1].parameters())
    for (name, a), b in [*zip(model.named_parameters(), twin.parameters()), *heads]:
        assert torch.allclose(a.grad, b.grad, atol=1e-6, rtol=1e-4), name


def test_line_by_line_mlm_rows_start_each_sentence_at_position_zero():
    ctx = context([])
    obj = MaskedLM(ctx, line_by_line=True, mask_prob=0.0)
    sentences = [np.arange(5, 8), np.arange(10, 60), np.arange(20, 22)]  # 3, 50 (cut) and 2 ids
    batch = obj.collate(RawBatch(source="en", sentences=sentences), torch.Generator())
    assert obj.data == "sentences" and MaskedLM(ctx).data == "mono"
    cls, sep, pad = ctx.cls_id, ctx.sep_id, ctx.pad_id
    assert batch["input_ids"][0].tolist() == [cls, 5, 6, 7, sep] + [pad] * (ctx.max_length - 5)
    assert batch["input_ids"][1].tolist() == [cls, *range(10, 10 + ctx.max_length - 2), sep]
    assert batch["attention_mask"].sum(1).tolist() == [5, ctx.max_length, 4]
    assert batch["position_ids"][2, :4].tolist() == [0, 1, 2, 3]
    assert batch["masked_index"].numel() == 0


@pytest.mark.parametrize("languages", [[], ["en", "es"]])
def test_packed_line_by_line_mlm_loss_and_gradients_equal_the_padded(languages):
    rng = np.random.default_rng(1)
    sentences = [rng.integers(5, 60, n) for n in (3, 9, 2, 12, 5, 4, 7)]
    ctx = context(languages)
    assert_packs_as_padded(
        MaskedLM(ctx, line_by_line=True),
        MaskedLM(ctx, line_by_line=True, packing=True),
        RawBatch(source="en", sentences=sentences),
    )


def test_mlm_packing_needs_line_by_line():
    from crossalign.errors import CrossalignError

    with pytest.raises(CrossalignError, match="needs line_by_line: true"):
        MaskedLM(context([]), packing=True)
