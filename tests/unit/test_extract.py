"""ArgMax and IterMax against SimAlign's own functions; XLM-Align's alignment filtering
read literally (Eq. 7-9, ``eq9-literal``) and the union ablation against literal loops; OT
extraction on hand-made cases. The released aligner's extraction is checked against its
transcription in ``test_xlm_align_released.py``."""

import numpy as np
import pytest
import torch

from crossalign.align.extract import (
    argmax_links,
    eq9_literal_links,
    itermax_links,
    subword_alignment,
    union_links,
)

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
    options = {"ot": {}, "itermax": {}, "argmax": {}}
    for method, extra in options.items():
        links = subword_alignment(src, tgt, src_mask, tgt_mask, method, **extra).links
        expected0 = torch.zeros(6, 7, dtype=torch.bool)
        expected0[perm, torch.arange(6)] = True
        assert torch.equal(links[0], expected0), method
        assert torch.equal(links[1, :4, :4], torch.eye(4, dtype=torch.bool)), method
        assert links[1].sum() == 4
    # Eq. 8-9 read literally add the largest unlinked score of a round: a superset
    links = subword_alignment(src, tgt, src_mask, tgt_mask, "ot", ot_filter="eq9-literal").links
    assert links[0, perm, torch.arange(6)].all() and links[0].sum() > 6
    assert not links[0, :, 6].any() and not links[1, 4:].any() and not links[1, :, 4:].any()


def test_unknown_method():
    x = torch.zeros(1, 1, 2)
    with pytest.raises(ValueError, match="unknown alignment method"):
        subword_alignment(x, x, torch.ones(1, 1).bool(), torch.ones(1, 1).bool(), "fast")


def eq7(a: np.ndarray, allowed: np.ndarray) -> set[tuple[int, int]]:
    """Mutual argmaxes (first maximum on ties) among the ``allowed`` entries, by loops."""
    m, n = a.shape
    out = set()
    for i in range(m):
        for j in range(n):
            if not allowed[i, j]:
                continue
            row = max((a[i, k], -k) for k in range(n) if allowed[i, k])
            col = max((a[k, j], -k) for k in range(m) if allowed[k, j])
            if -row[1] == j and -col[1] == i:
                out.add((i, j))
    return out


def eq7_9(t: np.ndarray, rounds: int, alpha: float) -> set[tuple[int, int]]:
    """XLM-Align Eq. 7-9 transcribed: A* = T; links = Eq. 7; then per round A*_ij <- α A*_ij
    when row i or column j holds a link (Eq. 9), and the mutual argmaxes of A* among unlinked
    pairs are added (Eq. 8)."""
    a = t.astype(float).copy()
    links = eq7(a, np.ones_like(a, dtype=bool))
    for _ in range(rounds - 1):
        rows = {i for i, _ in links}
        cols = {j for _, j in links}
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                if i in rows or j in cols:
                    a[i, j] *= alpha
        allowed = np.ones_like(a, dtype=bool)
        for i, j in links:
            allowed[i, j] = False
        links |= eq7(a, allowed)
    return links


def test_eq9_literal_issue_example():
    a = torch.tensor([[[0.9, 0.5, 0.1], [0.5, 0.8, 0.1], [0.1, 0.1, 0.05]]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    links = eq9_literal_links(a, mask, mask, rounds=2, alpha=0.9)
    assert set(map(tuple, links[0].nonzero().tolist())) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert eq7_9(a[0].numpy(), 2, 0.9) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    # IterMax (weight 0 when both ends are aligned, a free end required) links row 2 and
    # column 2 instead
    itermax = set(map(tuple, itermax_links(a, mask, mask, 2, 0.9)[0].nonzero().tolist()))
    assert itermax == {(0, 0), (1, 1), (0, 2), (2, 0)}


@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("ties", [False, True])
def test_eq9_literal_equals_a_transcription_of_eq7_9(ties, rounds):
    rng = np.random.default_rng(100 + 10 * rounds + int(ties))
    for _ in range(40):
        mats, scores, src_mask, tgt_mask = random_batch(rng, ties)
        links = eq9_literal_links(scores, src_mask, tgt_mask, rounds, 0.9)
        for b, x in enumerate(mats):
            m, n = x.shape
            got = set(map(tuple, links[b, :m, :n].nonzero().tolist()))
            assert got == eq7_9(x, rounds, 0.9)
            assert links[b].sum() == len(got)  # nothing in the padding


def test_union_equals_both_directions_by_loops():
    rng = np.random.default_rng(5)
    mats, scores, src_mask, tgt_mask = random_batch(rng, ties=True)
    links = union_links(scores, src_mask, tgt_mask)
    for b, x in enumerate(mats):
        m, n = x.shape
        expected = {(i, int(x[i].argmax())) for i in range(m)}
        expected |= {(int(x[:, j].argmax()), j) for j in range(n)}
        assert set(map(tuple, links[b].nonzero().tolist())) == expected


def test_ot_filters_contain_the_mutual_argmaxes_and_differ():
    gen = torch.Generator().manual_seed(3)
    src, tgt = torch.randn(1, 6, 8, generator=gen), torch.randn(1, 7, 8, generator=gen)
    sm, tm = torch.ones(1, 6, dtype=torch.bool), torch.ones(1, 7, dtype=torch.bool)
    filters = ("eq9-literal", "itermax", "union")
    found = {f: subword_alignment(src, tgt, sm, tm, "ot", ot_filter=f).links for f in filters}
    base = subword_alignment(src, tgt, sm, tm, "ot", ot_filter="eq9-literal", filter_iters=1).links
    for links in found.values():
        assert bool((links | base).eq(links).all())  # all contain the plan's mutual argmaxes
    assert found["union"].any(2).all() and found["union"].any(1).all()  # every token linked
    assert not torch.equal(found["eq9-literal"], found["itermax"])
