"""Subword <-> word mapping and word links from subword links, on hand-made cases."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from crossalign.align.words import (
    Pieces,
    format_pharaoh,
    link_lists,
    pieces_from_word_ids,
    pieces_per_word,
    to_pieces,
    word_links,
)
from crossalign.errors import CrossalignError


@pytest.fixture(scope="module")
def wordpiece() -> PreTrainedTokenizerFast:
    vocab = [
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[PAD]",
        "the",
        "cat",
        "sleep",
        "##s",
        "un",
        "##believ",
        "##able",
    ]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")


def test_pieces_per_word_and_word_ids_agree(wordpiece):
    sentences = [["the", "cat", "sleeps"], ["unbelievable", "cat"], []]
    per_word = pieces_per_word(wordpiece, sentences)
    assert per_word[0] == Pieces([4, 5, 6, 7], [0, 1, 2, 2], 3)
    assert per_word[1] == Pieces([8, 9, 10, 5], [0, 0, 0, 1], 2)
    assert per_word[2] == Pieces([], [], 0)
    assert pieces_from_word_ids(wordpiece, sentences) == per_word
    assert to_pieces(wordpiece, sentences, "word-ids") == per_word


def test_unknown_subword_mode(wordpiece):
    with pytest.raises(CrossalignError, match="unknown subword mode 'bpe'"):
        to_pieces(wordpiece, [["the"]], "bpe")


def test_truncated_keeps_word_count():
    assert Pieces([1, 2, 3], [0, 1, 1], 2).truncated(2) == Pieces([1, 2], [0, 1], 2)


def test_word_links_from_subword_links():
    # source words: w0 = s0, w1 = s1 s2; target words: v0 = t0 t1, v1 = t2, v2 (no subword)
    sub = torch.zeros(2, 3, 3, dtype=torch.bool)
    sub[0, 2, 1] = True  # second piece of w1 - second piece of v0
    sub[0, 0, 2] = True  # w0 - v1
    sub[1, 0, 0] = True
    sub[1, 1, 1] = True  # padding subword in pair 1: must be ignored
    src_words = torch.tensor([[0, 1, 1], [0, -1, -1]])
    tgt_words = torch.tensor([[0, 0, 1], [0, -1, -1]])
    words = word_links(sub, src_words, tgt_words, 2, 3)
    assert words.shape == (2, 2, 3)
    assert link_lists(words) == [[(0, 1), (1, 0)], [(0, 0)]]


def test_pharaoh_lines_are_sorted():
    assert format_pharaoh([(2, 0), (0, 1), (0, 0)]) == "0-0 0-1 2-0"
    assert format_pharaoh([]) == ""
