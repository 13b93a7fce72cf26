"""Alignment score (NN and CSLS) against constructed embeddings and a per-query loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from crossalign.evals.alignment_score import alignment_score
from crossalign.study import ranks, spearman


def _twins(v=30, h=8, seed=0):
    """Embeddings of 2v tokens where token t + v copies token t."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(v, h, generator=g)
    return torch.cat([base, base]), torch.arange(v), torch.arange(v, 2 * v)


@pytest.mark.parametrize("method", ["nn", "csls"])
def test_identical_twin_embeddings_score_100_percent(method):
    emb, src_vocab, tgt_vocab = _twins()
    src, tgt = src_vocab[::3], tgt_vocab[::3]
    assert alignment_score(emb, src, tgt, src_vocab, tgt_vocab, method) == 1.0


def test_a_constructed_half_aligned_case():
    emb, src_vocab, tgt_vocab = _twins(v=20)
    # point the first ten dictionary entries at the wrong twin: exactly half are right
    src = torch.arange(20)
    tgt = torch.cat([torch.arange(20, 30).roll(1), torch.arange(30, 40)])
    assert alignment_score(emb, src, tgt, src_vocab, tgt_vocab, "nn") == 0.5
    # several translations per source: right when the neighbour is any of them
    src2 = torch.cat([src, torch.arange(10)])
    tgt2 = torch.cat([tgt, torch.arange(20, 30)])
    assert alignment_score(emb, src2, tgt2, src_vocab, tgt_vocab, "nn") == 1.0


def _naive(emb, src, tgt, src_vocab, tgt_vocab, method, k=10):
    """Per-query loop: cosine (or CSLS with neighbourhoods over whole vocabularies)."""
    unit = F.normalize(emb.float(), dim=-1)
    gold = {}
    for a, b in zip(src.tolist(), tgt.tolist()):
        gold.setdefault(a, set()).add(b)

    def r(x, keys):
        sims = sorted((float(unit[x] @ unit[y]) for y in keys), reverse=True)
        return sum(sims[:k]) / min(k, len(sims))

    right = 0
    for a in sorted(gold):
        best, best_score = None, -float("inf")
        for b in tgt_vocab.tolist():
            score = float(unit[a] @ unit[b])
            if method == "csls":
                score = 2 * score - r(a, tgt_vocab.tolist()) - r(b, src_vocab.tolist())
            if score > best_score:
                best, best_score = b, score
        right += best in gold[a]
    return right / len(gold)


@pytest.mark.parametrize("method", ["nn", "csls"])
def test_matches_a_per_query_loop_on_noisy_twins(method):
    emb, src_vocab, tgt_vocab = _twins(v=40, h=6, seed=1)
    emb[40:] += 0.9 * torch.randn(40, 6, generator=torch.Generator().manual_seed(2))
    src, tgt = src_vocab[:25], tgt_vocab[:25]
    got = alignment_score(emb, src, tgt, src_vocab, tgt_vocab, method, k=5)
    assert got == pytest.approx(_naive(emb, src, tgt, src_vocab, tgt_vocab, method, k=5))
    assert 0.0 < got < 1.0


def test_spearman_matches_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(0)
    for n in (2, 4, 7, 30):
        x = torch.randint(0, 5, (n,), generator=g).tolist()
        y = torch.randn(n, generator=g).tolist()
        if len(set(x)) > 1:  # Spearman's ρ is undefined for a constant side
            assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
