"""Sentence retrieval and context-averaged token vectors on a tiny BERT: identity cases and
batched == per-sentence."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from crossalign.errors import CrossalignError
from crossalign.evals.options import RetrievalOptions
from crossalign.evals.retrieval import (
    evaluate_retrieval,
    layer_sentence_embeddings,
    retrieval_accuracy,
    sentence_embeddings,
)
from crossalign.lexicon.embed import contextual_token_vectors, embedding_layer

from .test_bli_rsim import make_tokenizer

WORDS = ["the", "cat", "dog", "sleeps", "runs", "el", "gato", "perro", "duerme", "corre"]
TEXTS = ["the cat sleeps", "the dog runs fast", "el gato duerme", "el perro corre", "cat cat"]


def tiny_model(vocab: int) -> BertForMaskedLM:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    return BertForMaskedLM(config).eval()


def test_identity_retrieval_is_perfect():
    x = torch.randn(30, 8, generator=torch.Generator().manual_seed(0))
    assert retrieval_accuracy(x, x.clone()) == {"acc_src_tgt": 1.0, "acc_tgt_src": 1.0, "n": 30}
    perm = torch.roll(torch.arange(30), 1)
    scores = retrieval_accuracy(x, x[perm])
    assert scores["acc_src_tgt"] == 0.0 and scores["acc_tgt_src"] == 0.0


def test_duplicate_sentences_count_by_text():
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    x[1] = x[0]  # pairs 0 and 1 are the same sentence pair twice
    y = x.clone()
    keys = ["a", "a", "b", "c"]
    assert retrieval_accuracy(x, y, keys, keys)["acc_src_tgt"] == 1.0
    assert retrieval_accuracy(x, y)["acc_src_tgt"] == 0.75  # row 1 finds row 0's copy


def test_sentence_embeddings_batched_equal_single():
    tok = make_tokenizer(WORDS)
    model = tiny_model(len(tok))
    batched = sentence_embeddings(model, tok, TEXTS, layer=1, batch_size=4)
    for i, text in enumerate(TEXTS):
        enc = tok([text], return_tensors="pt")
        states = model.base_model(**enc, output_hidden_states=True).hidden_states[1][0]
        assert torch.allclose(batched[i], states.mean(dim=0), atol=1e-5)
    last = sentence_embeddings(model, tok, TEXTS[:1], layer=-1)
    assert torch.allclose(last, sentence_embeddings(model, tok, TEXTS[:1], layer=2))


def test_every_layer_from_one_pass_equals_each_layer_alone(tmp_path):
    """``--all-layers``: one encoding pass gives each layer's embeddings and scores exactly as
    ``--layer N`` does, under ``L<N>/`` names."""
    tok = make_tokenizer(WORDS)
    model = tiny_model(len(tok))
    both = layer_sentence_embeddings(model, tok, TEXTS, [0, 2, -1], batch_size=2)
    for k, layer in enumerate([0, 2, 2]):
        assert torch.equal(both[k], sentence_embeddings(model, tok, TEXTS, layer, batch_size=2))
        for i, text in enumerate(TEXTS):  # against the model's own states, one sentence each
            enc = tok([text], return_tensors="pt")
            states = model.base_model(**enc, output_hidden_states=True).hidden_states[layer][0]
            assert torch.allclose(both[k, i], states.mean(dim=0), atol=1e-5)
    assert not torch.allclose(both[0], both[1])
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("the cat sleeps\nthe dog runs\ncat cat\n")
    tgt.write_text("el gato duerme\nel perro corre\ngato gato\n")
    files = {"src_file": str(src), "tgt_file": str(tgt)}
    every = evaluate_retrieval(str(tmp_path / "m"), RetrievalOptions(**files, all_layers=True))
    names = [f"L{layer}/{key}" for layer in (0, 1, 2) for key in ("acc_src_tgt", "acc_tgt_src")]
    assert sorted(every.metrics) == [*names, "n"]
    for layer in (0, 1, 2):
        alone = evaluate_retrieval(str(tmp_path / "m"), RetrievalOptions(**files, layer=layer))
        for key in ("acc_src_tgt", "acc_tgt_src"):
            assert every.metrics[f"L{layer}/{key}"] == alone.metrics[key]
    with pytest.raises(CrossalignError, match="--layer or --all-layers"):
        RetrievalOptions(**files, layer=2, all_layers=True)
    with pytest.raises(CrossalignError, match="-1 for the last layer"):
        RetrievalOptions(**files, layer=-2)


def test_contextual_token_vectors_equal_loop():
    tok = make_tokenizer(WORDS)
    model = tiny_model(len(tok))
    wanted = torch.tensor(tok.convert_tokens_to_ids(["▁cat", "▁the", "▁gato", "▁perro"]))
    got = contextual_token_vectors(model, tok, TEXTS, [1, 2], wanted, batch_size=2)
    for layer in (1, 2):
        sums: dict[int, torch.Tensor] = {}
        counts: dict[int, int] = {}
        for text in TEXTS:
            enc = tok([text], return_tensors="pt")
            states = model.base_model(**enc, output_hidden_states=True).hidden_states[layer][0]
            for pos, t in enumerate(enc["input_ids"][0].tolist()):
                if t in wanted.tolist():
                    sums[t] = sums.get(t, 0) + states[pos]
                    counts[t] = counts.get(t, 0) + 1
        vec = got[layer]
        for t in wanted.tolist():
            assert torch.allclose(vec.get(torch.tensor(t)), sums[t] / counts[t], atol=1e-5)
        assert int((vec.row_of >= 0).sum()) == 4
    with pytest.raises(Exception, match="layer 3 does not exist"):
        contextual_token_vectors(model, tok, TEXTS, [3], wanted)
    assert embedding_layer(model).table.shape == (len(tok), 16)


def test_long_texts_are_truncated_to_the_model_positions():
    from pathlib import Path

    from transformers import BertConfig, BertModel

    from crossalign.config import TokenizerConfig
    from crossalign.data.tokenizer import train_tokenizer
    from crossalign.evals.retrieval import sentence_embeddings

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "en.txt"
    lines = fixture.read_text().splitlines()
    tokenizer = train_tokenizer({"en": lines}, TokenizerConfig(vocab_size=120))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=12,
    )
    model = BertModel(config)
    out = sentence_embeddings(model, tokenizer, [" ".join(lines)], max_length=128)
    assert out.shape == (1, 16) and out.isfinite().all()
