"""Whitespace words <-> subwords: the word of every subword, and word links from subword links."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from crossalign.align.config import SUBWORD_MODES
from crossalign.errors import CrossalignError


class Link(NamedTuple):
    """A word link of a pair: 0-based source and target word indices and the link's score
    (``crossalign.align.extract.subword_alignment``: the transport plan entry for ``ot``, the
    mean of the two directional softmax probabilities for the other methods; the largest over
    the linked subword pairs of the two words)."""

    src: int
    tgt: int
    score: float


@dataclass
class Alignment:
    """The word links of one sentence pair and its alignment score (``pair_scores``)."""

    links: list[Link]
    """Sorted by (src, tgt)."""
    score: float
    """In [0, 1]: the mean over the words of both sentences of their best link's mean
    directional softmax probability (0 for an unaligned word), whatever the method."""


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


def word_max(
    values: torch.Tensor,
    src_words: torch.Tensor,
    tgt_words: torch.Tensor,
    n_src_words: int,
    n_tgt_words: int,
) -> torch.Tensor:
    """The largest subword value of each word pair, ``V_wv = max_{word(i)=w, word(j)=v} v_ij``
    (0 for a pair of words without subwords); padding subwords are ignored.

    values float [B, m, n] (>= 0); src_words [B, m] and tgt_words [B, n] long (-1 at padding)
    -> float [B, n_src_words, n_tgt_words].
    """
    b, m, n = values.shape
    # padding subwords go to an extra word slot (index n_*_words) that is cut off at the end
    tgt_slot = torch.where(tgt_words >= 0, tgt_words, n_tgt_words)[:, None, :].expand(b, m, n)
    by_tgt = values.new_zeros(b, m, n_tgt_words + 1)
    by_tgt = by_tgt.scatter_reduce(2, tgt_slot, values, "amax")  # [B, m, Wt + 1]
    src_slot = torch.where(src_words >= 0, src_words, n_src_words)[:, :, None]
    src_slot = src_slot.expand(b, m, n_tgt_words + 1)
    out = values.new_zeros(b, n_src_words + 1, n_tgt_words + 1)
    out = out.scatter_reduce(1, src_slot, by_tgt, "amax")  # [B, Ws + 1, Wt + 1]
    return out[:, :n_src_words, :n_tgt_words]


def pair_scores(
    word_probs: torch.Tensor, n_src_words: torch.Tensor, n_tgt_words: torch.Tensor
) -> torch.Tensor:
    """Alignment score of each pair, for filtering noisy bitext: the mean, over the words of
    both sentences, of the best probability among the word's links (0 for an unaligned word)::

        score = (Σ_w max_v p_wv + Σ_v max_w p_wv) / (|src| + |tgt|)

    with ``p_wv`` the link probability of words w and v (0 where they are not linked). 1 when
    every word has a link of probability 1; 0 for a pair with no words.

    word_probs float [B, Ws, Wt] (>= 0, 0 where not linked), n_src_words and n_tgt_words
    long [B] -> float [B].
    """
    total = torch.zeros(word_probs.shape[0], dtype=word_probs.dtype, device=word_probs.device)
    if word_probs.shape[1] and word_probs.shape[2]:
        total = word_probs.amax(2).sum(1) + word_probs.amax(1).sum(1)
    return total / (n_src_words + n_tgt_words).clamp(min=1).to(total.dtype)


def scored_link_lists(links: torch.Tensor, scores: torch.Tensor) -> list[list[Link]]:
    """The links of every pair as sorted ``Link`` lists. links bool [B, Ws, Wt], scores float
    [B, Ws, Wt]."""
    found = links.nonzero()
    values = scores[links].tolist()  # row-major, as nonzero
    out: list[list[Link]] = [[] for _ in range(links.shape[0])]
    for (b, i, j), v in zip(found.tolist(), values):
        out[b].append(Link(i, j, v))
    return out


def link_lists(links: torch.Tensor) -> list[list[tuple[int, int]]]:
    """The links of every pair as sorted ``(i, j)`` lists. links bool [B, Ws, Wt]."""
    found = links.nonzero().tolist()  # row-major, so sorted by (pair, i, j)
    out: list[list[tuple[int, int]]] = [[] for _ in range(links.shape[0])]
    for b, i, j in found:
        out[b].append((i, j))
    return out


def format_pharaoh(links: list[tuple[int, int]] | list[Link]) -> str:
    """One Pharaoh line: ``i-j`` pairs (0-based source and target word indices), sorted."""
    return " ".join(f"{x[0]}-{x[1]}" for x in sorted(links))


def format_probabilities(links: list[Link]) -> str:
    """One ``--output-prob`` line: ``i-j:score`` per link (score with 6 significant digits),
    in Pharaoh order."""
    return " ".join(f"{x.src}-{x.tgt}:{x.score:.6g}" for x in sorted(links))


WORD_SEP = "<sep>"
"""Separator of the two words of a link in ``--output-words`` (awesome-align's)."""


def format_words(links: list[Link], src: list[str], tgt: list[str]) -> str:
    """One ``--output-words`` line: ``src_word<sep>tgt_word`` per link, in Pharaoh order (the
    format of awesome-align's ``--output_word_file``)."""
    return " ".join(f"{src[x.src]}{WORD_SEP}{tgt[x.tgt]}" for x in sorted(links))
