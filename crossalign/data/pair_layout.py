"""How a sentence pair becomes one encoder row: the layouts, their special tokens and their
length budget. One rule for every place that encodes a pair (TLM, DWA, the aligner)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

PAIR_LAYOUTS = ("tlm", "concat")
"""``tlm``: ``[cls] src [sep] [cls] tgt [sep]``, positions restarting at the target (XLM's TLM);
``concat``: ``[cls] src [sep] tgt [sep]``, continuous positions (``<s> src </s> tgt </s>`` for
XLM-R: XLM-Align's pre-training data and released aligner)."""


class PairRow(NamedTuple):
    """One pair as a model input row (lists of equal length)."""

    ids: list[int]
    positions: list[int]
    """Position of each token counted from 0 (callers add the model's position offset)."""
    segments: list[int]
    """0 for the source side (its specials included), 1 for the target side."""
    tgt_first: int
    """Index of the first target subword in the row."""


def special_count(layout: str) -> int:
    """Special tokens a pair row of ``layout`` adds: 4 (``tlm``) or 3 (``concat``)."""
    if layout not in PAIR_LAYOUTS:
        raise ValueError(f"unknown pair layout {layout!r}; expected one of {PAIR_LAYOUTS}")
    return 4 if layout == "tlm" else 3


def truncate_pair(n_src: int, n_tgt: int, budget: int) -> tuple[int, int]:
    """Lengths to keep so that n_src + n_tgt <= budget, trimming the longer side first (the
    source when both are equally long)."""
    while n_src + n_tgt > budget:
        if n_src >= n_tgt:
            n_src -= 1
        else:
            n_tgt -= 1
    return n_src, n_tgt


def pair_row(
    src: Sequence[int], tgt: Sequence[int], cls_id: int, sep_id: int, layout: str = "tlm"
) -> PairRow:
    """The row of the pair ``src``, ``tgt`` (subword ids without specials) in ``layout``."""
    n_src = len(src) + 2  # [cls] src [sep]
    if special_count(layout) == 4:
        ids = [cls_id, *src, sep_id, cls_id, *tgt, sep_id]
        positions = [*range(n_src), *range(len(tgt) + 2)]
        tgt_first = n_src + 1
    else:
        ids = [cls_id, *src, sep_id, *tgt, sep_id]
        positions = list(range(len(ids)))
        tgt_first = n_src
    return PairRow(ids, positions, [0] * n_src + [1] * (len(ids) - n_src), tgt_first)
