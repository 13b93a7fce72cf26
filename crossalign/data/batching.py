"""Tokenized training data and the deterministic batch order.

Monolingual text is packed per language into fixed-length blocks (XLM's text streams);
parallel text is kept as sentence pairs (flat id arrays with offsets). A ``SourceSampler``
picks, for every optimizer step, one source (a language or a pair) with p_i ∝ n_i^α and the
next examples of that source's seeded epoch permutation; its position is saved in checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossalign.data.sampling import language_probs
from crossalign.errors import CrossalignError


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


class SourceSampler:
    """Deterministic global batches of example indices from named sources.

    Step ``s`` picks a source with p_i ∝ n_i^alpha from an RNG seeded by (seed, salt, s), then
    takes that source's next ``batch_size`` indices from seeded per-epoch permutations. The
    per-source counters are the data position (``state_dict``), so a resumed run draws exactly
    the batches the uninterrupted run would have drawn. ``sequential`` sources (streams) are
    read in order instead of permuted.
    """

    def __init__(
        self,
        sizes: dict[str, int],
        alpha: float,
        seed: int,
        salt: int,
        sequential: frozenset[str] = frozenset(),
    ) -> None:
        if not sizes or min(sizes.values()) == 0:
            raise CrossalignError(f"no training examples in {sorted(sizes) or 'any source'}")
        self.names = sorted(sizes)
        self.sizes = sizes
        probs = language_probs(sizes, alpha)
        self.probs = np.array([probs[n] for n in self.names])
        self.seed = seed
        self.salt = salt
        self.sequential = sequential
        self.drawn = dict.fromkeys(self.names, 0)
        self._epoch_order: dict[str, tuple[int, np.ndarray]] = {}

    def _indices(self, name: str, start: int, count: int) -> np.ndarray:
        if name in self.sequential:  # a stream: read in order
            return np.arange(start, start + count, dtype=np.int64)
        n = self.sizes[name]
        src = self.names.index(name)
        out = []
        pos = start
        while len(out) < count:
            epoch, offset = divmod(pos, n)
            perm = self._order(name, src, epoch)
            take = perm[offset : offset + count - len(out)]
            out.extend(take.tolist())
            pos += len(take)
        return np.array(out, dtype=np.int64)

    def _order(self, name: str, src: int, epoch: int) -> np.ndarray:
        """The seeded permutation of ``name``'s examples in ``epoch``, made once per epoch
        (O(n) to make: not once per draw)."""
        cached = self._epoch_order.get(name)
        if cached is None or cached[0] != epoch:
            n = self.sizes[name]
            cached = (
                epoch,
                np.random.default_rng([self.seed, self.salt, src, epoch]).permutation(n),
            )
            self._epoch_order[name] = cached
        return cached[1]

    def draw(self, step: int, batch_size: int) -> tuple[str, np.ndarray]:
        """Source name and [batch_size] example indices of global step ``step``."""
        rng = np.random.default_rng([self.seed, self.salt, step])
        name = self.names[int(rng.choice(len(self.names), p=self.probs))]
        idx = self._indices(name, self.drawn[name], batch_size)
        self.drawn[name] += batch_size
        return name, idx

    def state_dict(self) -> dict[str, int]:
        """The data position: examples drawn so far per source."""
        return dict(self.drawn)

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore the data position saved by ``state_dict``."""
        self.drawn = {n: int(state.get(n, 0)) for n in self.names}
