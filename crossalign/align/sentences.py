"""The Python API of the word aligner: ``crossalign.Aligner``.

    >>> from crossalign import Aligner
    >>> aligner = Aligner.from_pretrained("runs/my-model", layer=8, method="softmax")
    >>> aligner.align("das Haus ist klein", "the house is small")
    [Link(src=0, tgt=0, score=0.97), Link(src=1, tgt=1, score=0.99), ...]

``crossalign align`` goes through the same object (``crossalign.align.files.align_files``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from crossalign.align.aligner import Pair, WordAligner, load_aligner
from crossalign.align.config import AlignConfig
from crossalign.align.words import Alignment, Link
from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean

Sentence = str | Sequence[str]
"""A sentence: a string (split on whitespace) or its words."""


def _words(sentence: Sentence) -> list[str]:
    """The words of a sentence: ``str.split()`` of a string, the list of a token sequence."""
    return sentence.split() if isinstance(sentence, str) else list(sentence)


def align_config(method: str = "ot", **options: Any) -> AlignConfig:
    """``AlignConfig(method=method, **options)``; an unknown option is a CrossalignError
    naming the nearest one."""
    known = [f.name for f in dataclasses.fields(AlignConfig)]
    for key in options:
        if key not in known:
            raise CrossalignError(
                f"unknown aligner option '{key}'{did_you_mean(key, known)}; "
                f"options: {', '.join(known)}"
            )
    return AlignConfig(method=method, **options)


class Aligner:
    """Word alignment of sentence pairs with one layer of an encoder.

    Every method returns sorted ``Link(src, tgt, score)`` lists (0-based word indices). A
    link's ``score`` is, for ``ot``, its entry of the transport plan (the plan of a pair sums
    to 1); for ``softmax``, ``argmax`` and ``itermax``, the mean of awesome-align's two
    directional softmax probabilities of the dot products, ``(P_src→tgt + P_tgt→src) / 2``;
    for words of several subwords, the largest over their linked subword pairs.
    ``score``/``score_batch`` give one number per pair for filtering noisy bitext
    (``crossalign.align.words.pair_scores``).
    """

    def __init__(self, word_aligner: WordAligner, layer: int) -> None:
        self.word_aligner = word_aligner
        """The batched aligner underneath (model, tokenizer, ``cfg``, timings)."""
        self.layer = layer
        """The hidden layer aligned (0 = embeddings)."""

    @classmethod
    def from_pretrained(
        cls,
        name_or_dir: str | Path,
        layer: int = 8,
        method: str = "ot",
        *,
        languages: tuple[str, str] | None = None,
        device: str | None = None,
        **options: Any,
    ) -> Aligner:
        """An aligner for the ``save_pretrained`` model and tokenizer in ``name_or_dir``,
        aligning with hidden layer ``layer`` by ``method`` (ot, itermax, argmax, softmax).
        ``options`` are the other fields of ``AlignConfig`` (``batch_size=64``,
        ``softmax_threshold=1e-3``, ``encoding="concat"``, ...); ``languages`` (source,
        target) picks the language embeddings of a model trained with them; ``device``
        defaults to CUDA when available. Only the layers up to ``layer`` are loaded."""
        return cls.from_config(
            name_or_dir, align_config(method, **options), layer, languages, device
        )

    @classmethod
    def from_config(
        cls,
        name_or_dir: str | Path,
        cfg: AlignConfig,
        layer: int = 8,
        languages: tuple[str, str] | None = None,
        device: str | None = None,
    ) -> Aligner:
        """``from_pretrained`` with the options as one ``AlignConfig`` (what the CLI builds)."""
        return cls(load_aligner(name_or_dir, cfg, [layer], languages, device), layer)

    def align_pairs(
        self, pairs: Iterable[Pair], progress: bool = False
    ) -> Iterator[tuple[Pair, Alignment]]:
        """Each pair of whitespace-split words with its ``Alignment``, in input order, read
        lazily a chunk at a time (memory bounded however many pairs ``pairs`` yields)."""
        return self.word_aligner.align_stream(pairs, self.layer, progress)

    def _alignments(self, srcs: Sequence[Sentence], tgts: Sequence[Sentence]) -> list[Alignment]:
        if len(srcs) != len(tgts):
            raise CrossalignError(
                f"{len(srcs)} source and {len(tgts)} target sentences; give one target per source"
            )
        pairs = [(_words(s), _words(t)) for s, t in zip(srcs, tgts)]
        return [a for _, a in self.align_pairs(pairs)]

    def align(self, src: Sentence, tgt: Sentence) -> list[Link]:
        """The word links of one pair, sorted by (src, tgt)."""
        return self._alignments([src], [tgt])[0].links

    def align_batch(self, srcs: Sequence[Sentence], tgts: Sequence[Sentence]) -> list[list[Link]]:
        """The word links of each pair ``(srcs[k], tgts[k])``, batched on the device."""
        return [a.links for a in self._alignments(srcs, tgts)]

    def score(self, src: Sentence, tgt: Sentence) -> float:
        """The alignment score of one pair, in [0, 1]: the mean over the words of both
        sentences of their best link probability ``(P_src→tgt + P_tgt→src) / 2`` (0 for an
        unaligned word), whatever the method. A translation whose words find confident
        counterparts scores near 1; a mismatched pair near ``1 / length``."""
        return self._alignments([src], [tgt])[0].score

    def score_batch(self, srcs: Sequence[Sentence], tgts: Sequence[Sentence]) -> list[float]:
        """``score`` of each pair ``(srcs[k], tgts[k])``, batched."""
        return [a.score for a in self._alignments(srcs, tgts)]

    def truncation_warning(self) -> str | None:
        """A one-line warning counting the pairs truncated so far, or None."""
        return self.word_aligner.truncation_warning()
