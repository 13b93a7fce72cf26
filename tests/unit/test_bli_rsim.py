"""BLI precision at k, the evaluation word set, RSIM and mean cosine on constructed embeddings."""

from __future__ import annotations

import string

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from crossalign.errors import CrossalignError
from crossalign.evals.bli import (
    BLISet,
    bli_scores,
    build_bli_set,
    induced_precision,
    normalise_word,
    precision_at,
)
from crossalign.evals.rsim import mean_cosine, rsim
from crossalign.lexicon.embed import TokenVectors, word_vectors
from crossalign.lexicon.induce import induce

from .test_csls import naive_csls, small_rotation

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def make_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    """A unigram tokenizer in XLM-R's conventions whose whole-word pieces are ``▁w`` for each
    of ``words``; anything else falls back to single letters (after a lone ``▁``)."""
    pieces = [(p, 0.0) for p in SPECIALS] + [("▁", -2.0)]
    pieces += [(f"▁{w}", -1.0) for w in words]
    pieces += [(c, -5.0) for c in string.ascii_letters]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        mask_token="<mask>",
        cls_token="<s>",
        sep_token="</s>",
    )


def test_tokenizer_helper_splits_as_expected():
    tok = make_tokenizer(["house", "Haus"])
    assert tok.convert_ids_to_tokens(
        tok("house Haus ab", add_special_tokens=False)["input_ids"]
    ) == ["▁house", "▁Haus", "▁", "a", "b"]


def test_word_vectors_whole_and_mean():
    tok = make_tokenizer(["hund", "Hund", "Haus", "house"])
    size = len(tok)
    table = torch.randn(size, 4, generator=torch.Generator().manual_seed(0))
    vec = TokenVectors(table, torch.arange(size))
    ids = tok.convert_tokens_to_ids
    kept, out = word_vectors(tok, ["hund", "haus", "ab", "house"], vec, "whole")
    assert kept == [0, 1, 3]
    assert torch.allclose(out[0], (table[ids("▁hund")] + table[ids("▁Hund")]) / 2)
    assert torch.allclose(out[1], table[ids("▁Haus")])  # only the capitalised form is a token
    kept, out = word_vectors(tok, ["ab", "haus"], vec, "mean")
    assert kept == [0, 1]
    assert torch.allclose(out[0], (table[ids("a")] + table[ids("b")]) / 2)  # lone ▁ dropped
    assert torch.allclose(out[1], table[ids("▁Haus")])  # the form with the fewest pieces
    # a token without a vector makes its form unusable
    row_of = torch.arange(size)
    row_of[ids("▁Haus")] = -1
    kept, _ = word_vectors(tok, ["haus", "hund"], TokenVectors(table, row_of), "whole")
    assert kept == [1]


def test_build_bli_set_gold_and_candidates():
    tok = make_tokenizer(["cat", "dog", "tree", "Katze", "hund", "baum", "haus"])
    size = len(tok)
    vec = TokenVectors(
        torch.randn(size, 4, generator=torch.Generator().manual_seed(1)), torch.arange(size)
    )
    test = [("cat", "katze"), ("cat", "mieze"), ("dog", "hund"), ("tree", "xyz"), ("sun", "sonne")]
    bli = build_bli_set(tok, vec, vec, test, ["katze", "hund", "haus", "mieze", "baum"], "whole")
    # mieze and xyz have no single-token form; sun is not a token; tree has no gold candidate
    assert bli.src_words == ["cat", "dog"]
    assert bli.tgt_words == ["katze", "hund", "haus", "baum"]
    assert bli.gold == [[0], [1]]
    assert bli.first_pairs()[1].shape == (2, 4)
    capped = build_bli_set(tok, vec, vec, test, ["katze", "hund"], "whole", max_words=1, seed=3)
    assert len(capped.src_words) == 1


def test_normalise_word_strips_arabic_marks_only():
    assert normalise_word("الزّاهد") == "الزاهد"
    assert normalise_word("Haus") == "haus"
    assert normalise_word("असामान्य") == "असामान्य"  # Devanagari vowel signs are kept


def test_precision_at_hand_computed():
    pred = torch.tensor([[3, 1, 2], [0, 2, 1], [4, 4, 4]])
    gold = [[1], [0, 5], [2]]
    assert precision_at(pred, gold, (1, 2)) == {
        1: pytest.approx(100 / 3),
        2: pytest.approx(200 / 3),
    }


def test_rotated_copy_gives_full_precision_and_rsim_one():
    g = torch.Generator().manual_seed(2)
    src = torch.randn(60, 24, generator=g)
    tgt = src @ small_rotation(24, 0.2, g)
    distractors = torch.randn(200, 24, generator=g)
    bli = BLISet(
        [f"s{i}" for i in range(60)],
        [f"t{i}" for i in range(260)],
        src,
        torch.cat([tgt, distractors]),
        [[i] for i in range(60)],
    )
    scores = bli_scores(bli)
    for method in ("nn", "csls_knn_10"):
        assert scores[f"precision_at_1-{method}"] == 100.0
        assert scores[f"precision_at_5-{method}"] == 100.0
    assert scores["words"] == 60 and scores["candidates"] == 260
    assert rsim(*bli.first_pairs()) == pytest.approx(1.0, abs=1e-6)


def test_rsim_is_rotation_and_scale_invariant_but_hits_are_not():
    g = torch.Generator().manual_seed(3)
    src = torch.randn(50, 16, generator=g)
    q, _ = torch.linalg.qr(torch.randn(16, 16, generator=g))  # an arbitrary rotation
    tgt = 3.0 * src @ q
    assert rsim(src, tgt) == pytest.approx(1.0, abs=1e-6)
    bli = BLISet(list("x" * 50), list("y" * 50), src, tgt, [[i] for i in range(50)])
    assert bli_scores(bli)["precision_at_1-nn"] < 50  # a shared space is not rotation invariant


def test_rsim_equals_loop_pearson():
    g = torch.Generator().manual_seed(4)
    src, tgt = torch.randn(12, 5, generator=g), torch.randn(12, 7, generator=g)

    def cos(u, v):
        return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))

    s, t = src.double().numpy(), tgt.double().numpy()
    a = [cos(s[i], s[j]) for i in range(12) for j in range(i + 1, 12)]
    b = [cos(t[i], t[j]) for i in range(12) for j in range(i + 1, 12)]
    assert rsim(src, tgt) == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-6)
    assert mean_cosine(src[:, :5], src[:, :5] * 2) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        rsim(src[:2], tgt[:2])


def table1_precision(tok, table, src_ids, tgt_ids, gold, k):
    """Lu et al. 2023, Table 1, literally: each source word of the X-specific vocabulary is
    translated to its CSLS-nearest word of the English-specific vocabulary; the score is the
    share of translations found in the gold dictionary, over the source words it covers."""

    def word(i):
        return tok.convert_ids_to_tokens(int(i)).lstrip("▁").lower()

    csls = naive_csls(table[src_ids].double().numpy(), table[tgt_ids].double().numpy(), k)
    translation = {word(s): word(tgt_ids[int(row.argmax())]) for s, row in zip(src_ids, csls)}
    gold_of = {}
    for s, t in gold:
        gold_of.setdefault(s, []).append(t)
    covered = [s for s in translation if s in gold_of]
    return sum(translation[s] in gold_of[s] for s in covered) / len(covered)


def test_induced_precision_hand_made():
    es, en = ["gato", "perro", "casa", "Libro", "xyz"], ["cat", "dog", "house", "book", "tree"]
    tok = make_tokenizer(es + en)
    ids = tok.convert_tokens_to_ids
    src_ids = torch.tensor([ids(f"▁{w}") for w in es])
    tgt_ids = torch.tensor([ids(f"▁{w}") for w in en])
    g = torch.Generator().manual_seed(0)
    table = torch.randn(len(tok), 8, generator=g)
    # each Spanish token lies next to one English token; casa next to tree, a wrong translation
    near = {"gato": "cat", "perro": "dog", "casa": "tree", "Libro": "book", "xyz": "house"}
    for s, t in near.items():
        table[ids(f"▁{s}")] = table[ids(f"▁{t}")] + 0.01 * torch.randn(8, generator=g)
    vectors = TokenVectors(table, torch.arange(len(tok)))
    found = induce(vectors, vectors, src_ids, tgt_ids, k=2)
    assert [tok.convert_ids_to_tokens(i) for i in found.tgt_ids.tolist()] == [
        f"▁{near[w]}" for w in es
    ]
    gold = [
        ("gato", "cat"),
        ("perro", "hound"),
        ("perro", "dog"),  # any gold translation counts
        ("casa", "house"),
        ("libro", "book"),  # the token is the capitalised form ▁Libro
        ("sol", "sun"),  # no source token: not scored; xyz is not in the gold: not scored
    ]
    scores = induced_precision(tok, found, gold)
    assert scores == {"precision": 0.75, "correct": 3, "scored": 4, "pairs": 5}
    assert scores["precision"] == table1_precision(tok, table, src_ids, tgt_ids, gold, k=2)
    with pytest.raises(CrossalignError, match="none of the 5 induced source tokens"):
        induced_precision(tok, found, [(t, s) for s, t in gold])  # the wrong direction
