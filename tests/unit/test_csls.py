"""CSLS, nearest neighbours, language-specific vocabularies and induction against naive loops
and constructed cases."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from crossalign.errors import CrossalignError
from crossalign.lexicon.csls import csls_terms, csls_topk, neighbourhood_means, nn_topk
from crossalign.lexicon.embed import TokenVectors
from crossalign.lexicon.induce import induce
from crossalign.lexicon.vocab import language_specific_vocab

HAS_FAISS = importlib.util.find_spec("faiss") is not None


def naive_csls(src: np.ndarray, tgt: np.ndarray, k: int) -> np.ndarray:
    """The full CSLS matrix with per-element loops (Conneau et al. 2018, eq. 6)."""
    s = src / np.linalg.norm(src, axis=1, keepdims=True)
    t = tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
    n, m = len(s), len(t)
    cos = np.array([[float(s[i] @ t[j]) for j in range(m)] for i in range(n)])
    r_t = [np.mean(sorted(cos[i], reverse=True)[:k]) for i in range(n)]
    r_s = [np.mean(sorted(cos[:, j], reverse=True)[:k]) for j in range(m)]
    return np.array([[2 * cos[i, j] - r_t[i] - r_s[j] for j in range(m)] for i in range(n)])


@pytest.fixture
def sets():
    g = torch.Generator().manual_seed(0)
    return torch.randn(23, 6, generator=g), torch.randn(31, 6, generator=g) * 3.0


@pytest.mark.parametrize(
    "backend",
    [
        "torch",
        pytest.param(
            "faiss", marks=pytest.mark.skipif(not HAS_FAISS, reason="faiss not installed")
        ),
    ],
)
@pytest.mark.parametrize("chunk", [1, 5, 4096])
def test_csls_equals_naive(sets, backend, chunk):
    src, tgt = sets
    full = naive_csls(src.double().numpy(), tgt.double().numpy(), k=4)
    scores, idx = csls_topk(src, tgt, k=4, topn=3, chunk=chunk, backend=backend)
    expect_idx = np.argsort(-full, axis=1)[:, :3]
    assert (idx.numpy() == expect_idx).all()
    np.testing.assert_allclose(scores.numpy(), np.take_along_axis(full, expect_idx, 1), atol=1e-5)


def test_neighbourhood_terms_equal_naive(sets):
    src, tgt = sets
    s = torch.nn.functional.normalize(src, dim=1)
    t = torch.nn.functional.normalize(tgt, dim=1)
    cos = (s @ t.T).numpy()
    r_src, r_tgt = csls_terms(src, tgt, k=3, chunk=7)
    np.testing.assert_allclose(r_src, [np.sort(row)[-3:].mean() for row in cos], atol=1e-6)
    np.testing.assert_allclose(r_tgt, [np.sort(col)[-3:].mean() for col in cos.T], atol=1e-6)
    # k larger than the key set is capped at its size
    assert torch.allclose(neighbourhood_means(src, tgt[:2], k=10), torch.tensor(cos[:, :2].mean(1)))


@pytest.mark.skipif(not HAS_FAISS, reason="faiss not installed")
def test_faiss_terms_equal_torch(sets):
    src, tgt = sets
    a = neighbourhood_means(src, tgt, 5, backend="torch")
    b = neighbourhood_means(src, tgt, 5, backend="faiss")
    assert torch.allclose(a, b, atol=1e-5)


def test_cached_terms_are_used(sets):
    src, tgt = sets
    terms = csls_terms(src, tgt, k=4)
    shifted = (terms[0], terms[1] + torch.arange(tgt.shape[0]) * 10.0)  # favour the last target
    _, idx = csls_topk(src, tgt, k=4, topn=1, terms=shifted)
    assert (idx[:, 0] == 0).all()


def test_nn_topk_equals_argsort(sets):
    src, tgt = sets
    cos = torch.nn.functional.normalize(src, dim=1) @ torch.nn.functional.normalize(tgt, dim=1).T
    scores, idx = nn_topk(src, tgt, topn=4, chunk=3)
    assert (idx == cos.argsort(dim=1, descending=True)[:, :4]).all()
    assert torch.allclose(scores, cos.gather(1, idx))


def small_rotation(dim: int, angle: float, generator: torch.Generator) -> torch.Tensor:
    """An orthogonal matrix near the identity: exp(angle * A) for a skew-symmetric A."""
    a = torch.randn(dim, dim, generator=generator)
    a = (a - a.T) / (a - a.T).norm() * dim**0.5
    return torch.linalg.matrix_exp(angle * a)


def test_rotated_copy_is_induced_exactly():
    g = torch.Generator().manual_seed(1)
    emb = torch.randn(40, 16, generator=g)
    q = small_rotation(16, 0.2, g)
    assert torch.allclose(q @ q.T, torch.eye(16), atol=1e-5)
    table = torch.cat([emb, emb @ q])  # ids 0..39 one language, 40..79 its rotated copy
    vectors = TokenVectors(table, torch.arange(80))
    found = induce(vectors, vectors, torch.arange(40), torch.arange(40, 80), k=5)
    assert (found.tgt_ids == torch.arange(40, 80)).all()
    assert found.table(80)[:40].tolist() == list(range(40, 80))
    assert (found.table(80)[40:] == -1).all()


def test_induce_skips_tokens_without_vectors():
    table = torch.eye(4)
    row_of = torch.tensor([0, 1, -1, 2, 3, -1])
    found = induce(
        TokenVectors(table, row_of),
        TokenVectors(table, row_of),
        torch.tensor([0, 2]),
        torch.tensor([3, 4, 5]),
        k=1,
    )
    assert found.src_ids.tolist() == [0]
    with pytest.raises(CrossalignError, match="cannot induce"):
        induce(
            TokenVectors(table, row_of),
            TokenVectors(table, row_of),
            torch.tensor([2]),
            torch.tensor([3]),
        )


def paper_specific(counts_x: np.ndarray, counts_y: np.ndarray) -> list[int]:
    """Lu et al. 2023, §3.1, literally: the tokens with frequency > 100 in language X and
    <= 100 in language Y."""
    return [t for t in range(len(counts_x)) if counts_x[t] > 100 and counts_y[t] <= 100]


def test_language_specific_vocab_defaults_are_the_papers():
    a = np.array([500, 200, 101, 100, 300, 0, 900, 101, 150])
    b = np.array([0, 3, 100, 0, 101, 150, 900, 100, 100])
    ia, ib = language_specific_vocab(a, b)
    assert ia.tolist() == paper_specific(a, b) == [0, 1, 2, 7, 8]
    assert ib.tolist() == paper_specific(b, a) == [5]


def test_language_specific_vocab():
    a = np.array([500, 200, 101, 100, 300, 0, 900])
    b = np.array([0, 3, 0, 0, 0, 150, 900])
    ia, ib = language_specific_vocab(a, b, threshold=100, other_max=0, exclude=[0])
    assert ia.tolist() == [2, 4]  # 0 excluded, 1 seen in b, 3 not above the threshold
    assert ib.tolist() == [5]
    ia, _ = language_specific_vocab(a, b, threshold=100, other_max=5)
    assert ia.tolist() == [0, 1, 2, 4]
    with pytest.raises(CrossalignError, match="differ in size"):
        language_specific_vocab(a, b[:3])
    with pytest.raises(CrossalignError, match="other_max=100 is above threshold=20"):
        language_specific_vocab(a, b, threshold=20)  # a token could be specific to both
