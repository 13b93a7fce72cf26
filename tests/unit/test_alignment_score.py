"""Alignment scores against constructed embeddings and per-token loops: the paper's score over
the derivation's token mapping, and the dictionary retrieval (NN and CSLS)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from crossalign.errors import CrossalignError
from crossalign.evals.alignment_score import (
    alignment_score,
    counterpart_alignment,
    token_mapping,
)


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


def _paper_alignment(emb, counterpart, derived_tokens):
    """The paper's alignment score, token by token: for each source token, its nearest
    neighbour by cosine among the derived-language tokens; the share that is its
    counterpart."""
    right = 0
    for src, tgt in counterpart.items():
        cosines = {t: F.cosine_similarity(emb[src], emb[t], dim=0).item() for t in derived_tokens}
        right += max(cosines, key=cosines.get) == tgt
    return right / len(counterpart)


def test_counterpart_alignment_matches_the_paper_token_by_token():
    # tokens 0-3 are English, 4-7 their twins; 8 is shared (a candidate only)
    emb = torch.tensor(
        [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.2],
         [2.0, 0.1], [0.1, 3.0], [0.0, 1.0], [-1.0, -1.0], [1.0, 0.9]]
    )  # fmt: skip
    counterpart = {0: 4, 1: 5, 2: 6, 3: 7}
    # 0 → 4 (right), 1 → 6 (exactly its direction: wrong), 2 → 8 (the shared token: wrong),
    # 3 → 7 (right)
    derived_tokens = [4, 5, 6, 7, 8]
    want = _paper_alignment(emb, counterpart, derived_tokens)
    assert want == 0.5
    src, tgt = torch.tensor([0, 1, 2, 3]), torch.tensor([4, 5, 6, 7])
    assert counterpart_alignment(emb, src, tgt, torch.tensor(derived_tokens)) == want
    # noisy twins: the vectorised score equals the loop
    twins, src_vocab, tgt_vocab = _twins(v=30, h=4, seed=3)
    twins[30:] += 0.8 * torch.randn(30, 4, generator=torch.Generator().manual_seed(4))
    got = counterpart_alignment(twins, src_vocab, tgt_vocab, tgt_vocab)
    loop = _paper_alignment(twins, dict(zip(src_vocab.tolist(), tgt_vocab.tolist())),
                            tgt_vocab.tolist())  # fmt: skip
    assert got == pytest.approx(loop) and 0.0 < got < 1.0
    with pytest.raises(CrossalignError, match="no source token"):
        counterpart_alignment(emb, torch.tensor([], dtype=torch.long), tgt, tgt)


def test_token_mapping_scores_every_twinned_token(tmp_path):
    from pathlib import Path

    from crossalign.config import TokenizerConfig
    from crossalign.data.derive.twins import Transliterator, build_twin_tokenizer
    from crossalign.data.tokenizer import train_tokenizer

    lines = (Path(__file__).resolve().parents[1] / "fixtures/tiny/en.txt").read_text().splitlines()
    base = train_tokenizer({"en": lines}, TokenizerConfig(vocab_size=120), seed=0)
    shared = [7, 9]
    tr = Transliterator(build_twin_tokenizer(base, shared), shared)
    src, tgt, tgt_vocab = token_mapping(tr)
    special = set(base.all_special_ids)
    v = len(base)
    assert src.tolist() == [t for t in range(v) if t not in special and t not in shared]
    assert tgt.tolist() == [t + v for t in src.tolist()]
    assert tgt_vocab.tolist() == sorted(shared + tgt.tolist())
    # identical twin embeddings: every source token finds its twin
    emb = torch.randn(v, 8, generator=torch.Generator().manual_seed(0))
    assert counterpart_alignment(torch.cat([emb, emb]), src, tgt, tgt_vocab) == 1.0
