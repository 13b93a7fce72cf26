"""awesome-align's softmax extraction against a per-pair numpy transcription of its definition;
link scores (word level) and the pair score against loops and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossalign.align.extract import (
    awesome_align_probabilities,
    softmax_links,
    softmax_probabilities,
    subword_alignment,
)
from crossalign.align.sinkhorn import sinkhorn_log_plans
from crossalign.align.words import pair_scores, word_max


def naive_softmax(src: np.ndarray, tgt: np.ndarray, threshold: float):
    """Per pair, from the definition: S = src tgtᵀ, softmax over the target axis and over the
    source axis, a link where both exceed the threshold."""
    s = src @ tgt.T
    src2tgt = np.exp(s - s.max(1, keepdims=True))
    src2tgt /= src2tgt.sum(1, keepdims=True)
    tgt2src = np.exp(s - s.max(0, keepdims=True))
    tgt2src /= tgt2src.sum(0, keepdims=True)
    return src2tgt, tgt2src, (src2tgt > threshold) & (tgt2src > threshold)


def naive_awesome_probability(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """awesome-align's BertGuideHead output_prob, per pair: the two softmaxes of S tempered by
    sqrt of the other side's length, then 2ab / (a + b + 1e-9)."""
    s = src @ tgt.T
    m, n = s.shape
    a = np.exp(s / np.sqrt(n) - (s / np.sqrt(n)).max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)
    b = np.exp(s / np.sqrt(m) - (s / np.sqrt(m)).max(0, keepdims=True))
    b /= b.sum(0, keepdims=True)
    return 2 * a * b / (a + b + 1e-9)


def random_states(rng: np.random.Generator, scale: float):
    """Six pairs of random lengths (1-7 x 1-7), padded into [6, 7, d] with large junk."""
    d = 5
    sizes = [tuple(int(x) for x in rng.integers(1, 8, size=2)) for _ in range(6)]
    pairs = [(rng.normal(size=(m, d)) * scale, rng.normal(size=(n, d)) * scale) for m, n in sizes]
    src = torch.from_numpy(rng.normal(size=(6, 7, d)) * 50)  # padding: junk that would win
    tgt = torch.from_numpy(rng.normal(size=(6, 7, d)) * 50)
    for b, (s, t) in enumerate(pairs):
        src[b, : len(s)], tgt[b, : len(t)] = torch.from_numpy(s), torch.from_numpy(t)
    src_mask = torch.arange(7)[None] < torch.tensor([m for m, _ in sizes])[:, None]
    tgt_mask = torch.arange(7)[None] < torch.tensor([n for _, n in sizes])[:, None]
    return pairs, src, tgt, src_mask, tgt_mask


@pytest.mark.parametrize("threshold", [1e-3, 0.2])
@pytest.mark.parametrize("scale", [0.3, 2.0])
def test_batched_softmax_equals_the_definition_per_pair(threshold, scale):
    rng = np.random.default_rng(int(10 * scale + 100 * threshold))
    for _ in range(8):
        pairs, src, tgt, src_mask, tgt_mask = random_states(rng, scale)
        src2tgt, tgt2src = softmax_probabilities(src, tgt, src_mask, tgt_mask)
        found = subword_alignment(
            src, tgt, src_mask, tgt_mask, "softmax", softmax_threshold=threshold
        )
        for b, (s, t) in enumerate(pairs):
            m, n = len(s), len(t)
            p1, p2, links = naive_softmax(s, t, threshold)
            np.testing.assert_allclose(src2tgt[b, :m, :n].numpy(), p1, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(tgt2src[b, :m, :n].numpy(), p2, rtol=1e-9, atol=1e-12)
            np.testing.assert_array_equal(found.links[b, :m, :n].numpy(), links)
            np.testing.assert_allclose(
                found.scores[b, :m, :n].numpy(), naive_awesome_probability(s, t), rtol=1e-9
            )
            np.testing.assert_allclose(found.probs[b, :m, :n].numpy(), (p1 + p2) / 2, rtol=1e-9)
        # padding receives no probability mass and no link
        valid = src_mask[:, :, None] & tgt_mask[:, None, :]
        for x in (src2tgt, tgt2src, found.scores):
            assert not x[~valid].any()
        assert not found.links[~valid].any()
        torch.testing.assert_close(
            src2tgt.sum(2)[src_mask], torch.ones(int(src_mask.sum()), dtype=src.dtype)
        )
        torch.testing.assert_close(
            tgt2src.sum(1)[tgt_mask], torch.ones(int(tgt_mask.sum()), dtype=src.dtype)
        )


def test_a_constructed_case_with_a_known_answer():
    # source words a, b; target words b', a', and a null word (the zero vector)
    src = torch.tensor([[[10.0, 0.0], [0.0, 10.0]]])
    tgt = torch.tensor([[[0.0, 10.0], [10.0, 0.0], [0.0, 0.0]]])
    mask_s, mask_t = torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)
    # S = [[0, 100, 0], [100, 0, 0]]: P_src→tgt of row 0 is (e^-100, 1, e^-100) / Z; the null
    # column has P_tgt→src = (1/2, 1/2) > 1e-3 but P_src→tgt ≈ e^-100 < 1e-3: not linked
    links = subword_alignment(src, tgt, mask_s, mask_t, "softmax").links
    assert links[0].tolist() == [[False, True, False], [True, False, False]]
    # with small dot products every probability is large: threshold 1e-3 links all 6 pairs,
    # but P_src→tgt = 1/3 and P_tgt→src = 1/2 everywhere, so 0.4 keeps none
    flat = torch.zeros(1, 2, 2), torch.zeros(1, 3, 2)
    p1, p2 = softmax_probabilities(*flat, mask_s, mask_t)
    assert torch.allclose(p1, torch.full((1, 2, 3), 1 / 3))
    assert torch.allclose(p2, torch.full((1, 2, 3), 1 / 2))
    assert softmax_links(p1, p2, 1e-3).all() and not softmax_links(p1, p2, 0.4).any()
    assert softmax_links(p1, p2, 0.3).all()  # both 1/3 and 1/2 exceed 0.3


def test_a_pair_with_an_empty_side_gets_nothing():
    src, tgt = torch.randn(2, 3, 4), torch.randn(2, 2, 4)
    src_mask = torch.tensor([[True] * 3, [False] * 3])
    tgt_mask = torch.tensor([[True] * 2, [True] * 2])
    found = subword_alignment(src, tgt, src_mask, tgt_mask, "softmax")
    assert not found.links[1].any() and not found.scores[1].any()
    assert not torch.isnan(found.scores).any()


def test_scores_of_each_method():
    gen = torch.Generator().manual_seed(3)
    src, tgt = torch.randn(2, 4, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    sm = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]).bool()
    tm = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]).bool()
    p1, p2 = softmax_probabilities(src, tgt, sm, tm)
    for method in ("softmax", "argmax", "itermax"):
        found = subword_alignment(src, tgt, sm, tm, method)
        expected = awesome_align_probabilities(src, tgt, sm, tm) if method == "softmax" else None
        torch.testing.assert_close(found.scores, (p1 + p2) / 2 if expected is None else expected)
        torch.testing.assert_close(found.probs, (p1 + p2) / 2)
    found = subword_alignment(src, tgt, sm, tm, "ot")
    f_sim = torch.bmm(src, tgt.transpose(1, 2)).clamp(min=1e-6).log()
    torch.testing.assert_close(found.scores, sinkhorn_log_plans(f_sim, sm, tm, 1.0, 2).plan.exp())
    torch.testing.assert_close(found.probs, (p1 + p2) / 2)


def test_word_max_equals_a_loop():
    rng = np.random.default_rng(0)
    for _ in range(20):
        b, m, n = 3, 6, 5
        values = torch.from_numpy(rng.random((b, m, n)))
        src_words = torch.tensor([sorted(rng.integers(0, 4, size=m)) for _ in range(b)])
        tgt_words = torch.tensor([sorted(rng.integers(0, 3, size=n)) for _ in range(b)])
        src_words[0, 4:] = -1  # padding
        tgt_words[1, 3:] = -1
        got = word_max(values, src_words, tgt_words, 4, 3)
        expected = np.zeros((b, 4, 3))
        for k in range(b):
            for i in range(m):
                for j in range(n):
                    w, v = int(src_words[k, i]), int(tgt_words[k, j])
                    if w >= 0 and v >= 0:
                        expected[k, w, v] = max(expected[k, w, v], float(values[k, i, j]))
        np.testing.assert_allclose(got.numpy(), expected)


def test_pair_score_by_hand():
    # 2 source words, 3 target words; links (0,0) p=0.9 and (1,1) p=0.5; target 2 unaligned:
    # (0.9 + 0.5 [sources] + 0.9 + 0.5 + 0 [targets]) / (2 + 3) = 0.56
    probs = torch.tensor([[[0.9, 0.0, 0.0], [0.0, 0.5, 0.0]]])
    got = pair_scores(probs, torch.tensor([2]), torch.tensor([3]))
    torch.testing.assert_close(got, torch.tensor([0.56]))
    # a word linked twice counts its best link once; an empty pair scores 0
    probs = torch.tensor([[[0.2, 0.8]], [[0.0, 0.0]]])
    got = pair_scores(probs, torch.tensor([1, 0]), torch.tensor([2, 0]))
    torch.testing.assert_close(got, torch.tensor([(0.8 + 0.2 + 0.8) / 3, 0.0]))


@pytest.mark.parametrize("method", ["softmax", "argmax", "itermax", "ot"])
def test_a_clean_pair_scores_above_a_mismatched_one(method):
    """Constructed states: a translation whose target states are its source states permuted
    (every word has one confident counterpart) against a pair whose target states are
    unrelated to its source states."""
    gen = torch.Generator().manual_seed(7)
    words = torch.randn(6, 16, generator=gen) * 2
    perm = torch.tensor([2, 0, 1, 5, 3, 4])
    src = torch.stack([words, words])
    tgt = torch.stack([words[perm], torch.randn(6, 16, generator=gen) * 0.1])
    mask = torch.ones(2, 6, dtype=torch.bool)
    found = subword_alignment(src, tgt, mask, mask, method)
    ids = torch.arange(6).expand(2, 6)
    probs = word_max(found.probs.masked_fill(~found.links, 0.0), ids, ids, 6, 6)
    clean, mismatched = pair_scores(probs, torch.tensor([6, 6]), torch.tensor([6, 6])).tolist()
    assert clean > 0.95 and mismatched < 0.35 and clean > mismatched
