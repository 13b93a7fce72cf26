"""Whitespace words <-> subwords: the word of every subword, and word links from subword links."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from crossalign.align.config import SUBWORD_MODES
from crossalign.errors import CrossalignError


@dataclass
class Pieces:
    """The subwords of one whitespace-tokenized sentence, without special tokens."""

    ids: list[int]
    """Subword ids."""
    words: list[int]
    """Word index (0-based) of each subword."""
    n_words: int
    """Words in the sentence (a word may have no subword, e.g. one the normaliser deletes)."""

    def truncated(self, limit: int) -> Pieces:
        """The first ``limit`` subwords and the words they belong to: words after the last kept
        subword are dropped (they get no links), so a long sentence costs O(limit), not
        O(words). A sentence of at most ``limit`` subwords is returned unchanged."""
        if len(self.ids) <= limit:
            return self
        words = self.words[:limit]
        return Pieces(self.ids[:limit], words, words[-1] + 1 if words else 0)


def pieces_per_word(tokenizer: PreTrainedTokenizerBase, sentences: list[list[str]]) -> list[Pieces]:
    """Tokenize every word on its own (as SimAlign and the XLM-Align aligner do), so a subword
    never spans two words. Each distinct word is tokenized once, in one batched call."""
    vocab = list(dict.fromkeys(w for words in sentences for w in words))
    ids = dict(zip(vocab, tokenizer(vocab, add_special_tokens=False)["input_ids"])) if vocab else {}
    out = []
    for words in sentences:
        pieces = [ids[w] for w in words]
        out.append(
            Pieces(
                [t for p in pieces for t in p],
                [k for k, p in enumerate(pieces) for _ in p],
                len(words),
            )
        )
    return out


def pieces_from_word_ids(
    tokenizer: PreTrainedTokenizerBase, sentences: list[list[str]]
) -> list[Pieces]:
    """Tokenize each sentence as a whole from its words (``is_split_into_words=True``) and map
    subwords to words with the fast tokenizer's ``word_ids()``."""
    if not tokenizer.is_fast:
        raise CrossalignError(
            "--subwords word-ids needs a fast (Rust) tokenizer; use --subwords per-word"
        )
    enc = tokenizer(sentences, is_split_into_words=True, add_special_tokens=False)
    return [
        Pieces(enc["input_ids"][k], [w for w in enc.word_ids(k) if w is not None], len(words))
        for k, words in enumerate(sentences)
    ]


def to_pieces(
    tokenizer: PreTrainedTokenizerBase, sentences: list[list[str]], mode: str = "per-word"
) -> list[Pieces]:
    """Subwords of whitespace-tokenized sentences by ``mode``: ``per-word`` or ``word-ids``."""
    if mode == "per-word":
        return pieces_per_word(tokenizer, sentences)
    if mode == "word-ids":
        return pieces_from_word_ids(tokenizer, sentences)
    raise CrossalignError(
        f"unknown subword mode '{mode}'; choose one of {', '.join(SUBWORD_MODES)}"
    )


def word_links(
    sub_links: torch.Tensor,
    src_words: torch.Tensor,
    tgt_words: torch.Tensor,
    n_src_words: int,
    n_tgt_words: int,
) -> torch.Tensor:
    """Word links from subword links: words w and v are aligned if any subword of w is
    aligned to any subword of v, ``A_wv = OR_{word(i)=w, word(j)=v} a_ij``.

    sub_links bool [B, m, n]; src_words [B, m] and tgt_words [B, n] long, the word of each
    subword (-1 at padding) -> bool [B, n_src_words, n_tgt_words].
    """
    dtype = torch.float32
    src_map = F.one_hot(src_words.clamp(min=0), max(1, n_src_words)).to(dtype)
    tgt_map = F.one_hot(tgt_words.clamp(min=0), max(1, n_tgt_words)).to(dtype)
    src_map = src_map * (src_words >= 0)[..., None]  # [B, m, Ws]
    tgt_map = tgt_map * (tgt_words >= 0)[..., None]  # [B, n, Wt]
    counts = src_map.transpose(1, 2) @ sub_links.to(dtype) @ tgt_map
    return counts[:, :n_src_words, :n_tgt_words] > 0


def link_lists(links: torch.Tensor) -> list[list[tuple[int, int]]]:
    """The links of every pair as sorted ``(i, j)`` lists. links bool [B, Ws, Wt]."""
    found = links.nonzero().tolist()  # row-major, so sorted by (pair, i, j)
    out: list[list[tuple[int, int]]] = [[] for _ in range(links.shape[0])]
    for b, i, j in found:
        out[b].append((i, j))
    return out


def format_pharaoh(links: list[tuple[int, int]]) -> str:
    """One Pharaoh line: ``i-j`` pairs (0-based source and target word indices), sorted."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))
