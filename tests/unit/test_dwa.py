import math

import numpy as np
import pytest
import torch

from crossalign.data.masking import IGNORE_INDEX
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.dwa import pointer_loss, self_label_pointers


def naive_pointer_loss(query, key, labels, segments, pointable, reduction="sum"):
    """Eq. 15 by loops: per pair, the sum over its labelled positions; ``sum`` averages those
    sums over the pairs, ``mean`` averages over all labelled positions."""
    losses = []
    for b in range(query.shape[0]):
        for i in range(query.shape[1]):
            if labels[b, i] == IGNORE_INDEX:
                continue
            allowed = [
                j for j in range(query.shape[1])
                if segments[b, j] == 1 - segments[b, i] and pointable[b, j]
            ]  # fmt: skip
            logits = [float(query[b, i] @ key[b, j]) / math.sqrt(query.shape[2]) for j in allowed]
            top = max(logits)
            log_z = top + math.log(sum(math.exp(x - top) for x in logits))
            losses.append(log_z - logits[allowed.index(int(labels[b, i]))])
    return sum(losses) / (query.shape[0] if reduction == "sum" else len(losses))


def example():
    torch.manual_seed(0)
    # two pairs: <s> a b </s> <s> c d e </s> and <s> f </s> <s> g </s> <pad>...
    segments = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, -1, -1, -1]])
    special = torch.tensor([[1, 0, 0, 1, 1, 0, 0, 0, 1], [1, 0, 1, 1, 0, 1, 1, 1, 1]]).bool()
    pointable = ~special & (segments >= 0)
    labels = torch.full((2, 9), IGNORE_INDEX)
    labels[0, 1], labels[0, 6], labels[1, 1], labels[1, 4] = 5, 2, 4, 1
    return torch.randn(2, 9, 8), torch.randn(2, 9, 8), labels, segments, pointable


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_pointer_loss_equals_naive_loop(reduction):
    q, k, labels, seg, pointable = example()
    loss, n = pointer_loss(q, k, labels, seg, pointable, reduction)
    assert n == 4
    expected = naive_pointer_loss(q, k, labels, seg, pointable, reduction)
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_dwa_rejects_unknown_options_and_a_layer_beyond_the_model():
    from transformers import BertConfig, BertForMaskedLM

    from crossalign.errors import CrossalignError

    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=[], position_offset=0, max_length=16,
    )  # fmt: skip
    with pytest.raises(CrossalignError, match="ot_filter 'intersect' is unknown"):
        OBJECTIVES.get("dwa")(ctx, ot_filter="intersect")
    model = BertForMaskedLM(
        BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=16)
    )  # fmt: skip
    with pytest.raises(CrossalignError, match="layer=10, but the model has layers 0-2"):
        OBJECTIVES.get("dwa")(ctx).start(model)
    OBJECTIVES.get("dwa")(ctx, layer=2).start(model)


def test_pointer_loss_ignores_padding_and_same_segment():
    q, k, labels, seg, pointable = example()
    before, _ = pointer_loss(q, k, labels, seg, pointable)
    k2 = k.clone()
    k2[0, 2] += 100.0  # a source token: same segment as row (0, 1), excluded for it...
    k2[1, 6:] = 1e4  # padding
    k2[0, 0] = 1e4  # <s>: not pointable
    q_rows_from_source = labels.clone()
    q_rows_from_source[0, 6] = IGNORE_INDEX  # ...but row (0, 6) may point at (0, 2)
    a, _ = pointer_loss(q, k, q_rows_from_source, seg, pointable)
    b, _ = pointer_loss(q, k2, q_rows_from_source, seg, pointable)
    assert a.item() == pytest.approx(b.item(), rel=1e-6)
    assert torch.isfinite(before)


def test_pointer_loss_without_labels_is_zero():
    q, k, labels, seg, pointable = example()
    loss, n = pointer_loss(q, k, torch.full_like(labels, IGNORE_INDEX), seg, pointable)
    assert n == 0 and loss.item() == 0.0


def test_self_labels_find_a_planted_permutation():
    # Source tokens 1..4 carry one-hot vectors; target tokens 6..9 carry the same vectors
    # in the order 3, 1, 4, 2: every source token must point at its twin and back.
    states = torch.zeros(1, 11, 8)
    perm = [3, 1, 4, 2]
    for i in range(4):
        states[0, 1 + i, i] = 5.0
        states[0, 6 + perm.index(i + 1), i] = 5.0
    states += 0.01
    src = torch.zeros(1, 11, dtype=torch.bool)
    tgt = torch.zeros(1, 11, dtype=torch.bool)
    src[0, 1:5] = True
    tgt[0, 6:10] = True
    labels = self_label_pointers(states, src, tgt)[0].tolist()
    for i in range(4):
        j = 6 + perm.index(i + 1)
        assert labels[1 + i] == j and labels[j] == 1 + i
    assert labels[0] == labels[5] == labels[10] == IGNORE_INDEX


def test_self_labels_batched_equal_per_pair():
    torch.manual_seed(1)
    states = torch.randn(3, 12, 16).abs()
    src = torch.zeros(3, 12, dtype=torch.bool)
    tgt = torch.zeros(3, 12, dtype=torch.bool)
    for b, (ns, nt) in enumerate([(4, 5), (2, 3), (5, 5)]):
        src[b, 1 : 1 + ns] = True
        tgt[b, 3 + ns : 3 + ns + nt] = True
    batched = self_label_pointers(states, src, tgt)
    for b in range(3):
        single = self_label_pointers(states[b : b + 1], src[b : b + 1], tgt[b : b + 1])
        assert torch.equal(batched[b : b + 1], single)


def test_dwa_collate_keeps_original_ids():
    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=["en", "es"], position_offset=0, max_length=16,
    )  # fmt: skip
    dwa = OBJECTIVES.get("dwa")(ctx, mask_prob=0.5)
    raw = RawBatch("en-es", pairs=[(np.array([10, 11, 12]), np.array([20, 21]))])
    batch = dwa.collate(raw, torch.Generator().manual_seed(0))
    assert batch["original_ids"][0].tolist() == [0, 10, 11, 12, 2, 0, 20, 21, 2]
    assert (batch["labels"] != IGNORE_INDEX).any()


def test_self_labels_follow_the_filter_option():
    """Without filtering (the union of both argmax directions) every real token gets a label;
    the paper's filtering leaves some unlabelled on a random pair."""
    torch.manual_seed(2)
    states = torch.randn(1, 12, 16).abs()
    src = torch.zeros(1, 12, dtype=torch.bool)
    tgt = torch.zeros(1, 12, dtype=torch.bool)
    src[0, 1:6], tgt[0, 7:11] = True, True
    union = self_label_pointers(states, src, tgt, ot_filter="union")
    assert (union[src | tgt] != IGNORE_INDEX).all()
    mutual = self_label_pointers(states, src, tgt, filter_iters=1)
    assert (mutual[src | tgt] == IGNORE_INDEX).any()
