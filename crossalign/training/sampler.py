"""The deterministic batch order of training: a ``SourceSampler`` picks, for every optimizer
step, one source (a language or a pair) with p_i ∝ n_i^α and the next examples of that
source's seeded epoch permutation; its position is saved in checkpoints.
"""

from __future__ import annotations

import numpy as np

from crossalign.data.sampling import language_probs
from crossalign.errors import CrossalignError


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
