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


def language_specific_vocab(
    counts_a: np.ndarray,
    counts_b: np.ndarray,
    threshold: int = 100,
    other_max: int = 0,
    exclude: Sequence[int] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens specific to each of two languages from their corpus counts.

    A token is specific to language a when it occurs more than ``threshold`` times in a's
    corpus and at most ``other_max`` times (default 0: never) in b's, and symmetrically for b.
    ``exclude`` (special ids) never qualify. counts_a, counts_b: [V] -> (ids_a [Na], ids_b
    [Nb]), sorted long tensors; the two sets are disjoint when ``other_max < threshold``.
    """
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
