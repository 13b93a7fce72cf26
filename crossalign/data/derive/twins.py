"""The derived language's twin vocabulary (``trans``).

The training loop reads text and tokenizes it, so a derived word is written in a shifted script
that a *twin tokenizer* segments into exactly the twin ids: each character ``c`` of a twinned
piece becomes ``chr(0xF0000 + ord(c))`` (Unicode's supplementary private-use plane) and a word-
initial piece starts with the marker ``U+E000``. The twin tokenizer is the English unigram
tokenizer with its vocabulary copied: entry ``t + V`` is the shifted spelling of piece ``t``
with the same score (specials and shared types get placeholder entries that never match). A
shifted string can only be segmented by twin pieces, and the twin segmentations of a word
correspond one to one, at equal scores, to the English ones, so the twin tokenizer's Viterbi
path is the twin of the English path; with ``overlap``, shared pieces are written in plain
English and the same argument holds between the fixed plain/shifted boundaries.
``Transliterator.check`` measures this on the corpus (the derive command records the fraction
of exactly twinned words in ``card.json``). ``unshift_text`` inverts the spelling.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from crossalign.errors import CrossalignError

MARK = "\ue000"
"""Written before the first twinned piece of a word (the twin of a ``▁``-initial piece)."""
SHIFT = 0xF0000
"""Offset of the shifted script: ``c`` → ``chr(SHIFT + ord(c))`` for BMP characters."""
SHIFT_B = 0x100000
"""Offset of the shifted script for characters of plane 1 (``U+10000``-``U+1FFFF``)."""
SPACE = "▁"


def shift_char(c: str) -> str:
    """The shifted-script spelling of one character (see the module docstring)."""
    o = ord(c)
    if o < 0x10000:
        return chr(SHIFT + o)
    if o < 0x20000:
        return chr(SHIFT_B + o - 0x10000)
    raise CrossalignError(f"character U+{o:X} cannot be transliterated (beyond plane 1)")


def shift_text(text: str) -> str:
    """Every character of ``text`` in the shifted script."""
    return "".join(map(shift_char, text))


def unshift_text(text: str) -> str:
    """Inverse of the transliteration's spelling: markers dropped, shifted characters back."""
    out = []
    for c in text:
        o = ord(c)
        if c == MARK:
            continue
        if SHIFT_B <= o < SHIFT_B + 0x10000:
            out.append(chr(o - SHIFT_B + 0x10000))
        elif SHIFT <= o < SHIFT + 0x10000:
            out.append(chr(o - SHIFT))
        else:
            out.append(c)
    return "".join(out)


def check_plain(text: str, where: str) -> None:
    """Raise if ``text`` holds the marker or shifted characters (they would be ambiguous)."""
    for c in text:
        if c == MARK or ord(c) >= SHIFT:
            raise CrossalignError(
                f"{where}: character U+{ord(c):X} is reserved for transliterated text; "
                f"remove it from the English input"
            )


def twin_piece(piece: str) -> str:
    """The twin spelling of a vocabulary piece: ``▁the`` → ``▁`` + MARK + shifted ``the``."""
    if piece.startswith(SPACE):
        return SPACE + MARK + shift_text(piece[1:])
    return shift_text(piece)


def unigram_vocab(tokenizer: PreTrainedTokenizerBase) -> tuple[dict[str, Any], list[list]]:
    """The tokenizer's serialised pipeline and its unigram ``[piece, score]`` list; raises for
    another subword model."""
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    if data["model"]["type"] != "Unigram":
        raise CrossalignError(
            f"transliteration needs a unigram tokenizer, got {data['model']['type']}; train one "
            f"with tokenizer.kind: unigram"
        )
    vocab = data["model"]["vocab"]
    if len(vocab) != len(tokenizer):
        raise CrossalignError(
            f"tokenizer has {len(tokenizer)} tokens but its unigram model {len(vocab)}; added "
            f"tokens outside the model cannot be twinned"
        )
    return data, vocab


def build_twin_tokenizer(
    tokenizer: PreTrainedTokenizerFast, shared: Iterable[int]
) -> PreTrainedTokenizerFast:
    """The English unigram tokenizer with a copied vocabulary: id ``t + V`` is the twin spelling
    of piece ``t`` (same score). Specials and ``shared`` ids get placeholders (MARK MARK t) that
    no text produces, so twin ids stay ``t + V`` for every twinned type."""
    data, vocab = unigram_vocab(tokenizer)
    special = set(tokenizer.all_special_ids)
    shared = set(shared)
    floor = min(score for _, score in vocab) - 10.0
    twins = [
        [f"{MARK}{MARK}{t}", floor] if t in special or t in shared else [twin_piece(p), s]
        for t, (p, s) in enumerate(vocab)
    ]
    data["model"]["vocab"] = vocab + twins
    tok = Tokenizer.from_str(json.dumps(data))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=tokenizer.bos_token,
        cls_token=tokenizer.cls_token,
        eos_token=tokenizer.eos_token,
        sep_token=tokenizer.sep_token,
        pad_token=tokenizer.pad_token,
        unk_token=tokenizer.unk_token,
        mask_token=tokenizer.mask_token,
    )


def choose_shared(tokenizer: PreTrainedTokenizerBase, overlap: float, seed: int) -> list[int]:
    """A seeded ``overlap`` fraction (0-1) of the non-special token types: shared, not twinned."""
    if not 0.0 <= overlap <= 1.0:
        raise CrossalignError(f"--overlap {overlap * 100:g} must be between 0 and 100 (percent)")
    special = set(tokenizer.all_special_ids)
    types = [t for t in range(len(tokenizer)) if t not in special]
    return sorted(random.Random(seed).sample(types, round(overlap * len(types))))


class Transliterator:
    """Maps English words to their transliterated spelling, through a twin tokenizer.

    ``tokenizer`` is the twin tokenizer (its first half is the English tokenizer; plain
    English text only ever matches that half). ``shared`` are the token ids not twinned.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerFast, shared: Iterable[int]) -> None:
        if len(tokenizer) % 2:
            raise CrossalignError(f"tokenizer of {len(tokenizer)} tokens is not a twin tokenizer")
        self.tokenizer = tokenizer
        self.english_size = len(tokenizer) // 2
        self.shared = frozenset(shared)
        self.special = frozenset(tokenizer.all_special_ids)
        self.pieces = tokenizer.convert_ids_to_tokens(list(range(self.english_size)))
        self.cache: dict[str, str] = {}

    def twin_id(self, t: int) -> int:
        """The derived language's id of English token ``t``."""
        return t if t in self.special or t in self.shared else t + self.english_size

    def twinned(self, t: int) -> bool:
        """Whether English token ``t`` has a distinct twin."""
        return t not in self.special and t not in self.shared

    def words(self, words: Sequence[str]) -> list[str]:
        """The transliterated spelling of each word (cached by word type)."""
        todo = sorted({w for w in words if w not in self.cache})
        if todo:
            enc = self.tokenizer(todo, add_special_tokens=False, return_offsets_mapping=True)
            for w, ids, offsets in zip(todo, enc["input_ids"], enc["offset_mapping"]):
                parts = []
                for t, (start, end) in zip(ids, offsets):
                    if t >= self.english_size:
                        raise CrossalignError(f"word {w!r} is already transliterated")
                    if t == self.tokenizer.unk_token_id:
                        parts.append(w[start:end])
                    elif self.twinned(t):
                        parts.append(twin_piece(self.pieces[t]))
                    else:
                        parts.append(self.pieces[t])
                text = "".join(parts)
                self.cache[w] = text[1:] if text.startswith(SPACE) else text
        return [self.cache[w] for w in words]

    def check(self, words: Sequence[str]) -> float:
        """Fraction of ``words`` (types) whose transliteration the tokenizer segments into
        exactly the twins of the English tokens: 1.0 when twinning is exact."""
        types = sorted(set(words))
        if not types:
            return 1.0
        derived = self.words(types)
        english = self.tokenizer(types, add_special_tokens=False)["input_ids"]
        twins = self.tokenizer(derived, add_special_tokens=False)["input_ids"]
        good = sum(list(map(self.twin_id, e)) == d for e, d in zip(english, twins))
        return good / len(types)


# ---------------------------------------------------------------- sentences
