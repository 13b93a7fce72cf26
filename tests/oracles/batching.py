"""Reference packing for the token store's tests and the benchmarks: ``pack_blocks`` packs
sentences into fixed-length blocks the plain way (XLM's text streams) and ``PairArray`` holds
sentence pairs as flat id arrays; the store's chunked, memory-mapped builders must match them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def pack_blocks(
    sentences: list[list[int]], length: int, cls_id: int, sep_id: int, pad_id: int
) -> np.ndarray:
    """Concatenate sentences, each followed by ``sep_id``, into blocks ``[cls] ... [sep]``.

    Full blocks hold ``length - 2`` stream tokens between ``cls`` and ``sep``; the final
    partial block (whose stream already ends with a ``sep``) is padded with ``pad_id``;
    one holding only a separator is dropped.
    Returns int32 [n_blocks, length].
    """
    stream = np.fromiter((t for s in sentences for t in (*s, sep_id)), dtype=np.int32)
    body = length - 2
    n_full = len(stream) // body
    rest = stream[n_full * body :]
    if not (rest != sep_id).any():
        rest = rest[:0]  # a lone separator is not worth a block
    blocks = np.full((n_full + (len(rest) > 0), length), pad_id, dtype=np.int32)
    blocks[:, 0] = cls_id
    blocks[:n_full, 1:-1] = stream[: n_full * body].reshape(n_full, body)
    blocks[:n_full, -1] = sep_id
    if len(rest):
        blocks[-1, 1 : 1 + len(rest)] = rest
    return blocks


@dataclass
class PairArray:
    """Tokenized sentence pairs as flat arrays: pair k's source ids are
    ``src[src_off[k]:src_off[k+1]]``, its target ids likewise (no special tokens)."""

    src: np.ndarray
    src_off: np.ndarray
    tgt: np.ndarray
    tgt_off: np.ndarray

    @classmethod
    def from_lists(cls, src: list[list[int]], tgt: list[list[int]]) -> PairArray:
        """Build from per-pair id lists of equal length."""

        def flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
            off = np.zeros(len(seqs) + 1, dtype=np.int64)
            np.cumsum([len(s) for s in seqs], out=off[1:])
            return np.fromiter((t for s in seqs for t in s), np.int32, int(off[-1])), off

        s, so = flat(src)
        t, to = flat(tgt)
        return cls(s, so, t, to)

    def __len__(self) -> int:
        return len(self.src_off) - 1

    def pair(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Source and target ids of pair ``k``."""
        return (
            self.src[self.src_off[k] : self.src_off[k + 1]],
            self.tgt[self.tgt_off[k] : self.tgt_off[k + 1]],
        )
