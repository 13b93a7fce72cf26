"""Relational similarity (RSIM; Vulić et al. 2020, "Are All Good Word Vector Spaces
Isomorphic?", §3) and the mean cosine of translation pairs.

For translation pairs (x_i, y_i), i = 1..n, RSIM is the Pearson correlation between the
intra-language similarities of the source words and those of their translations, over all
unordered pairs i < j:

    RSIM = pearson([cos(x_i, x_j)]_{i<j}, [cos(y_i, y_j)]_{i<j})

It is 1 when the two sets are isometric (e.g. one a rotation of the other) and is invariant
to any rotation or scaling of either space.
"""

from __future__ import annotations

import torch

from crossalign.lexicon.csls import unit

HIGHER_IS_BETTER = {"rsim": True, "mean_cos": True}


def rsim(src: torch.Tensor, tgt: torch.Tensor) -> float:
    """RSIM of n translation pairs: src [n, d], tgt [n, d'] (row i translates row i).
    Needs n >= 3. Memory O(n²)."""
    n = src.shape[0]
    if n < 3 or tgt.shape[0] != n:
        raise ValueError(f"rsim needs n >= 3 aligned rows, got {n} and {tgt.shape[0]}")
    iu = torch.triu_indices(n, n, offset=1, device=src.device)
    a = (unit(src) @ unit(src).T)[iu[0], iu[1]].double()
    b = (unit(tgt) @ unit(tgt).T)[iu[0], iu[1]].double()
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()).clamp_min(1e-12))


def mean_cosine(src: torch.Tensor, tgt: torch.Tensor) -> float:
    """Mean cos(x_i, y_i) of aligned rows src [n, d], tgt [n, d]."""
    return float((unit(src) * unit(tgt)).sum(dim=1).mean())
