"""Counting co-occurrences as sorted sparse runs: the distance weights of a window, the pairs of
one batch of encoded lines (``count_pairs``), and merging runs into one count vector
(``merge_counts``, ``CountRuns``) and into the upper-triangle CSR matrix (``upper_csr``)."""

from __future__ import annotations

import numpy as np

from crossalign.errors import CrossalignError


def distance_weights(window: int) -> np.ndarray:
    """[window + 1] float64: weight 1 / (d + 1) of a neighbour at distance d (index 0 unused)."""
    w = 1.0 / (np.arange(window + 1, dtype=np.float64) + 1.0)
    w[0] = 0.0
    return w


def check_key_space(vocab_size: int, window: int, n_lang: int) -> None:
    """Raise if (pair, distance) or (pair, language, merge tag) keys could overflow int64."""
    bits = int(window).bit_length()
    if vocab_size * vocab_size * max(1 << bits, 2 * n_lang) >= 2**62:
        raise CrossalignError(
            f"vocabulary {vocab_size} × window {window} × {n_lang} languages is too large for "
            f"64-bit pair keys"
        )


_NO_PAIR = np.iinfo(np.int64).max
"""Key of a position pair that crosses a line: sorted to the end and dropped."""


def count_pairs(
    ids: np.ndarray,
    lengths: np.ndarray,
    window: int,
    vocab_size: int,
    lang: int = 0,
    n_lang: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted co-occurrences of one chunk of lines, as upper-triangle counts.

    ids: [N] token ids of the chunk's lines, concatenated; lengths: [lines] tokens per line.
    Every pair of positions (p, p + d) in one line with 1 ≤ d ≤ ``window`` adds 1 / (d + 1)
    to U[min(a, b), max(a, b)] for its tokens a, b; then X = U + Uᵀ (so X[a, a] = 2 U[a, a]).
    Returns (keys, values): sorted unique int64 keys ``(min · V + max) · n_lang + lang`` and
    float64 summed weights. One sort of N · window int64 codes; no loop over tokens.
    """
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    bits = int(window).bit_length()
    ends = np.repeat(np.cumsum(lengths), lengths)
    room = ends - np.arange(n) - 1  # tokens after position p in its line
    dists = range(1, min(window, n - 1) + 1)
    coded = np.empty(sum(n - d for d in dists), dtype=np.int64)
    scaled = ids * vocab_size
    swapped = np.empty(n, dtype=np.int64)
    at = 0
    for d in dists:
        # min(a, b) · V + max(a, b) = min(a · V + b, b · V + a)
        out = coded[at : at + n - d]
        np.add(scaled[: n - d], ids[d:], out=out)
        np.add(scaled[d:], ids[: n - d], out=swapped[: n - d])
        np.minimum(out, swapped[: n - d], out=out)
        out <<= bits
        out |= d
        out[room[: n - d] < d] = _NO_PAIR
        at += n - d
    coded.sort()
    coded = coded[: np.searchsorted(coded, _NO_PAIR)]
    if len(coded) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    new = np.empty(len(coded), dtype=bool)
    new[0] = True
    np.not_equal(coded[1:], coded[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    coded = coded[starts]
    values = np.diff(starts, append=len(new)) * distance_weights(window)[coded & ((1 << bits) - 1)]
    keys, values = _sum_runs(coded >> bits, values)
    return keys * n_lang + lang, values


def _sum_runs(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``values`` over runs of equal sorted ``keys``: (unique keys, sums)."""
    if len(keys) == 0:
        return keys, values
    new = np.empty(len(keys), dtype=bool)
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    if new.all():
        return keys, values
    starts = np.flatnonzero(new)
    return keys[starts], np.add.reduceat(values, starts)


def merge_counts(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Sum two sparse count vectors given as sorted unique (keys, values) with keys < 2⁶².

    The keys are tagged with their source in the lowest bit and merged by a stable sort
    (one timsort merge of two runs); the tags then place the values, so no argsort and no
    binary search is needed. O(|a| + |b|)."""
    (ak, av), (bk, bv) = a, b
    if len(bk) == 0:
        return ak, av
    if len(ak) == 0:
        return bk, bv
    keys = np.empty(len(ak) + len(bk), dtype=np.int64)
    np.left_shift(ak, 1, out=keys[: len(ak)])
    np.left_shift(bk, 1, out=keys[len(ak) :])
    keys[len(ak) :] |= 1
    keys.sort(kind="stable")
    from_b = (keys & 1).astype(bool)
    values = np.empty(len(keys), dtype=np.result_type(av, bv))
    values[~from_b] = av
    values[from_b] = bv
    del from_b
    keys >>= 1
    same = np.flatnonzero(keys[1:] == keys[:-1])  # keys[i] == keys[i + 1]: one from each
    if len(same) == 0:
        return keys, values
    values[same] += values[same + 1]
    keep = np.ones(len(keys), dtype=bool)
    keep[same + 1] = False
    return keys[keep], values[keep]


class _BinaryRuns:
    """Sorted runs merged like a binary counter: a new run is merged into the previous one
    while that one is not more than twice as large (each count merged O(log runs) times)."""

    def __init__(self) -> None:
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        self.runs.append((keys, values))
        while len(self.runs) > 1 and len(self.runs[-2][0]) <= 2 * len(self.runs[-1][0]):
            b = self.runs.pop()
            self.runs.append(merge_counts(self.runs.pop(), b))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        out: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.float64))
        while self.runs:
            out = merge_counts(self.runs.pop(), out)
        return out


class CountRuns:
    """A sparse count vector that grows by sorted unique (keys, values) runs, keys
    ``pair · n_lang + lang``.

    The key range is cut into buckets at quantiles of the first run (at pair boundaries, so
    all languages of a pair share a bucket), and each bucket keeps its own binary-counter
    runs (``_BinaryRuns``): merges work on arrays of a few MB that stay in cache, instead of
    repeatedly streaming (and page-faulting) arrays of the whole size, and ``to_csr``
    converts and frees one bucket at a time. Memory stays O(distinct keys)."""

    KEYS_PER_BUCKET = 50_000

    def __init__(self, n_lang: int = 1) -> None:
        self.n_lang = n_lang
        self.bounds: np.ndarray | None = None
        self.buckets: list[_BinaryRuns] = []

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add sorted unique ``keys`` with ``values``."""
        if len(keys) == 0:
            return
        if self.bounds is None:
            n = int(np.clip(len(keys) // self.KEYS_PER_BUCKET, 1, 256))
            cut = keys[(np.arange(1, n) * len(keys)) // n]
            self.bounds = np.unique(cut - cut % self.n_lang)
            self.buckets = [_BinaryRuns() for _ in range(len(self.bounds) + 1)]
        cuts = [0, *np.searchsorted(keys, self.bounds).tolist(), len(keys)]
        for bucket, lo, hi in zip(self.buckets, cuts[:-1], cuts[1:]):
            if hi > lo:  # copies: a slice would keep the whole chunk's arrays alive
                bucket.add(keys[lo:hi].copy(), values[lo:hi].copy())

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """All runs merged: sorted unique keys and their summed values (empties the runs)."""
        parts = [bucket.result() for bucket in self.buckets]
        self.buckets, self.bounds = [], None
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        return np.concatenate([k for k, _ in parts]), np.concatenate([v for _, v in parts])

    def to_csr(
        self, scales: np.ndarray, vocab_size: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored matrix: the upper triangle of X (row ≤ column) as CSR arrays.

        Keys are ``(min · V + max) · n_lang + lang`` with upper-triangle counts U; each count
        is multiplied by its language's scale c_lang (``scales`` [n_lang]) and summed over
        languages, and the diagonal is doubled (X = U + Uᵀ). Returns indptr [V + 1] int64,
        indices [nnz] int32 (sorted within each row), data [nnz] float32. Empties the runs.
        """
        rows_per = np.zeros(vocab_size, dtype=np.int64)
        indices, data = [], []
        while self.buckets:
            keys, values = self.buckets.pop(0).result()
            pair, lang = np.divmod(keys, len(scales))
            del keys
            pair, values = _sum_runs(pair, values * scales[lang])
            del lang
            rows, cols = np.divmod(pair, vocab_size)
            del pair
            values[rows == cols] *= 2.0
            rows_per += np.bincount(rows, minlength=vocab_size)
            indices.append(cols.astype(np.int32))
            data.append(values.astype(np.float32))
        self.bounds = None
        indptr = np.zeros(vocab_size + 1, dtype=np.int64)
        np.cumsum(rows_per, out=indptr[1:])
        if not indices:
            return indptr, np.zeros(0, np.int32), np.zeros(0, np.float32)
        return indptr, np.concatenate(indices), np.concatenate(data)


def upper_csr(
    keys: np.ndarray, values: np.ndarray, scales: np.ndarray, vocab_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``CountRuns.to_csr`` of one run of sorted unique keys with their counts."""
    runs = CountRuns(len(scales))
    runs.add(keys, values)
    return runs.to_csr(scales, vocab_size)


# --------------------------------------------------------------------------------------
# Reading text: chunks of lines, exact duplicate lines of a language dropped.
