"""ArgMax and IterMax against SimAlign's own functions; OT extraction on hand-made cases."""

import numpy as np
import pytest
import torch

from crossalign.align.extract import argmax_links, itermax_links, subword_links

simalign = pytest.importorskip("simalign.simalign")
SimAlign = simalign.SentenceAligner


def random_batch(rng: np.random.Generator, ties: bool):
    """Five score matrices of random shapes (1-8 x 1-8), padded into [5, 8, 8] with junk."""
    sizes = [tuple(int(x) for x in rng.integers(1, 9, size=2)) for _ in range(5)]
    mats = [rng.random(size) for size in sizes]
    if ties:
        mats = [np.round(x, 1) for x in mats]  # many equal scores: argmax must take the first
    scores = torch.from_numpy(rng.random((5, 8, 8)) * 2)  # padding larger than real scores
    for b, x in enumerate(mats):
        scores[b, : x.shape[0], : x.shape[1]] = torch.from_numpy(x)
    src_mask = torch.arange(8)[None] < torch.tensor([m for m, _ in sizes])[:, None]
    tgt_mask = torch.arange(8)[None] < torch.tensor([n for _, n in sizes])[:, None]
    return mats, scores, src_mask, tgt_mask


@pytest.mark.parametrize("ties", [False, True])
def test_argmax_equals_simalign(ties):
    rng = np.random.default_rng(int(ties))
    for _ in range(40):
        mats, scores, src_mask, tgt_mask = random_batch(rng, ties)
        links = argmax_links(scores, src_mask, tgt_mask)
        for b, x in enumerate(mats):
            forward, backward = SimAlign.get_alignment_matrix(x)
            m, n = x.shape
            np.testing.assert_array_equal(links[b, :m, :n].numpy(), (forward * backward) > 0)
            assert links[b].sum() == links[b, :m, :n].sum()  # nothing in the padding


@pytest.mark.parametrize("max_count", [2, 3])
@pytest.mark.parametrize("ties", [False, True])
def test_itermax_equals_simalign(ties, max_count):
    rng = np.random.default_rng(10 * max_count + int(ties))
    for _ in range(40):
        mats, scores, src_mask, tgt_mask = random_batch(rng, ties)
        links = itermax_links(scores, src_mask, tgt_mask, max_count, 0.9)
        for b, x in enumerate(mats):
            m, n = x.shape
            expected = SimAlign.iter_max(x, max_count=max_count) > 0
            np.testing.assert_array_equal(links[b, :m, :n].numpy(), expected)
            assert links[b].sum() == links[b, :m, :n].sum()


def test_itermax_by_hand():
    scores = torch.tensor([[[0.9, 0.1, 0.0], [0.8, 0.3, 0.1], [0.1, 0.2, 0.7]]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    # round 1: rows 0 and 1 both prefer column 0, which prefers row 0 -> {(0,0), (2,2)}
    first = {(0, 0), (2, 2)}
    assert set(map(tuple, argmax_links(scores, mask, mask)[0].nonzero().tolist())) == first
    # round 2: row 1 and column 1 are free. Reweighted row 1: 0.9*0.8=0.72, 1*0.3, 0.9*0.1;
    # column 0: 0*0.9, 0.72, 0*0.1 -> (1,0) is a mutual argmax with a free end: added
    links = itermax_links(scores, mask, mask, max_count=2, alpha=0.9)
    assert set(map(tuple, links[0].nonzero().tolist())) == first | {(1, 0)}
    assert set(map(tuple, itermax_links(scores, mask, mask, 1)[0].nonzero().tolist())) == first


def test_ot_recovers_a_permutation_and_ignores_padding():
    gen = torch.Generator().manual_seed(0)
    states = torch.randn(6, 16, generator=gen)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    src = torch.zeros(2, 6, 16)
    tgt = torch.randn(2, 7, 16, generator=gen)  # junk padding
    src[0], tgt[0, :6] = states, states[perm]
    src[1, :4], tgt[1, :4] = states[:4], states[:4]
    src_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2]).bool()
    tgt_mask = torch.tensor([[1] * 6 + [0], [1] * 4 + [0] * 3]).bool()
    for method in ("ot", "itermax", "argmax"):
        links = subword_links(src, tgt, src_mask, tgt_mask, method)
        expected0 = torch.zeros(6, 7, dtype=torch.bool)
        expected0[perm, torch.arange(6)] = True
        assert torch.equal(links[0], expected0), method
        assert torch.equal(links[1, :4, :4], torch.eye(4, dtype=torch.bool)), method
        assert links[1].sum() == 4


def test_unknown_method():
    x = torch.zeros(1, 1, 2)
    with pytest.raises(ValueError, match="unknown alignment method"):
        subword_links(x, x, torch.ones(1, 1).bool(), torch.ones(1, 1).bool(), "fast")
