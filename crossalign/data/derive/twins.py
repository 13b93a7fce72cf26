"""The derived language's twin vocabulary (``trans``).

The training loop reads text and tokenizes it, so a derived word is written in a shifted script
that a *twin tokenizer* segments into exactly the twin ids: each character ``c`` of a twinned
piece becomes ``chr(0xF0000 + ord(c))`` (Unicode's supplementary private-use plane) and a word-
initial piece starts with the marker ``U+E000``. The twin tokenizer is the English tokenizer with
its vocabulary copied: entry ``t + V`` is the shifted spelling of piece ``t`` (specials and
shared types get placeholder entries that never match).

- **Unigram.** Each twin piece keeps its piece's score. A shifted string can only be segmented
  by twin pieces, and the twin segmentations of a word correspond one to one, at equal scores,
  to the English ones, so the twin tokenizer's Viterbi path is the twin of the English path;
  with ``overlap``, shared pieces are written in plain English and the same argument holds
  between the fixed plain/shifted boundaries.
- **BPE.** Each English merge ``(a, b)`` is followed by its twin ``(twin a, twin b)``, so every
  merge keeps its rank among the merges of its own script; the twin of a word-initial piece
  starts with ``▁`` + MARK, made by one merge ranked first (MARK itself takes the unused twin
  slot of the first special token). BPE applies merges by rank, and the shifted and plain
  alphabets never meet in a merge, so a shifted word is merged exactly as its English spelling.
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


def tokenizer_model(tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """The tokenizer's serialised pipeline; raises unless its model is Unigram or BPE with
    every token inside the model."""
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    kind = data["model"]["type"]
    if kind not in ("Unigram", "BPE"):
        raise CrossalignError(
            f"transliteration needs a unigram or BPE tokenizer, got {kind}; train one with "
            f"crossalign data derive --tokenizer-kind unigram|bpe"
        )
    size = len(data["model"]["vocab"])
    if size != len(tokenizer):
        raise CrossalignError(
            f"tokenizer has {len(tokenizer)} tokens but its {kind} model {size}; added "
            f"tokens outside the model cannot be twinned"
        )
    return data


def build_twin_tokenizer(
    tokenizer: PreTrainedTokenizerFast, shared: Iterable[int]
) -> PreTrainedTokenizerFast:
    """The English unigram or BPE tokenizer with a copied vocabulary: id ``t + V`` is the twin
    spelling of piece ``t`` (see the module docstring). Specials and ``shared`` ids get
    placeholders (MARK MARK t) that no text produces, so twin ids stay ``t + V`` for every
    twinned type."""
    data = tokenizer_model(tokenizer)
    special = set(tokenizer.all_special_ids)
    shared = set(shared)
    if data["model"]["type"] == "Unigram":
        data["model"]["vocab"] = _twin_unigram(data["model"]["vocab"], special | shared)
    else:
        _twin_bpe(data["model"], special)
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


def _twin_unigram(vocab: list[list], untwinned: set[int]) -> list[list]:
    """The unigram ``[piece, score]`` list followed by its twins (same scores)."""
    floor = min(score for _, score in vocab) - 10.0
    twins = [
        [f"{MARK}{MARK}{t}", floor] if t in untwinned else [twin_piece(p), s]
        for t, (p, s) in enumerate(vocab)
    ]
    return vocab + twins


def _twin_bpe(model: dict[str, Any], special: set[int]) -> None:
    """Add the twins to a serialised BPE model in place: vocabulary ``t + V`` and each merge
    followed by its twin, after the first merge ``(▁, MARK)``; MARK takes the twin slot of the
    first special token. A shared type's twin slot holds its twin spelling too: the twin merges
    pass through it, but a shifted word never ends on it (a shared piece is written in plain
    English). Merges stay in the format they came in (pairs or "a b" strings)."""
    vocab: dict[str, int] = model["vocab"]
    v = len(vocab)
    pieces = sorted(vocab, key=vocab.get)
    if [vocab[p] for p in pieces] != list(range(v)):
        raise CrossalignError("BPE tokenizer ids are not 0..V-1; it cannot be twinned")
    if not special:
        raise CrossalignError("the BPE tokenizer has no special token to give MARK its id")
    twins = {
        (f"{MARK}{MARK}{t}" if t in special else twin_piece(piece)): t + v
        for t, piece in enumerate(pieces)
    }
    twins[MARK] = twins.pop(f"{MARK}{MARK}{min(special)}")
    as_strings = bool(model["merges"]) and isinstance(model["merges"][0], str)
    merges: list[list[str]] = [[SPACE, MARK]]
    for merge in model["merges"]:
        a, b = merge.split(" ", 1) if as_strings else merge
        merges += [[a, b], [twin_piece(a), twin_piece(b)]]
    vocab.update(twins)
    model["merges"] = [" ".join(m) for m in merges] if as_strings else merges


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
