"""Language-specific vocabularies: the subword tokens one language uses and the other does not
(Lu et al. 2023, §3.1), the search space of dictionary induction and code-switching."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from crossalign.errors import CrossalignError


def token_counts(
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    vocab_size: int | None = None,
    batch_size: int = 2048,
) -> np.ndarray:
    """How often each token id occurs in ``texts`` (no special tokens added).

    Returns int64 [V] with V = ``vocab_size`` (default ``len(tokenizer)``).
    """
    size = vocab_size or len(tokenizer)
    counts = np.zeros(size, dtype=np.int64)
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(list(texts[start : start + batch_size]), add_special_tokens=False)
        flat = np.fromiter((t for ids in enc["input_ids"] for t in ids), dtype=np.int64, count=-1)
        counts += np.bincount(flat, minlength=size)[:size]
    return counts


def check_thresholds(threshold: int, other_max: int) -> None:
    """Raise a one-line CrossalignError when ``other_max`` exceeds ``threshold``: a token
    could then be specific to both languages."""
    if other_max > threshold:
        raise CrossalignError(
            f"other_max={other_max} is above threshold={threshold}, so a token could be specific "
            f"to both languages; use other_max <= threshold (the paper: 100 and 100)"
        )


def language_specific_vocab(
    counts_a: np.ndarray,
    counts_b: np.ndarray,
    threshold: int = 100,
    other_max: int = 100,
    exclude: Sequence[int] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens specific to each of two languages from their corpus counts.

    A token is specific to language a when it occurs more than ``threshold`` times in a's
    corpus and at most ``other_max`` times in b's, and symmetrically for b. The defaults are
    the paper's: frequency > 100 in one language and <= 100 in the other. ``exclude``
    (special ids) never qualify. counts_a, counts_b: [V] -> (ids_a [Na], ids_b [Nb]), sorted
    long tensors, disjoint (``other_max`` may not exceed ``threshold``).
    """
    check_thresholds(threshold, other_max)
    if counts_a.shape != counts_b.shape:
        raise CrossalignError(
            f"token counts of the two languages differ in size ({counts_a.shape[0]} vs "
            f"{counts_b.shape[0]}); count both with the same tokenizer"
        )
    a = (counts_a > threshold) & (counts_b <= other_max)
    b = (counts_b > threshold) & (counts_a <= other_max)
    a[list(exclude)] = False
    b[list(exclude)] = False
    return torch.from_numpy(np.flatnonzero(a)), torch.from_numpy(np.flatnonzero(b))
