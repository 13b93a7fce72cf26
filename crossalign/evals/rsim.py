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

from typing import TYPE_CHECKING

import torch

from crossalign.evals.registry import EvalOutput
from crossalign.lexicon.csls import unit

if TYPE_CHECKING:
    from crossalign.evals.options import LayerOptions


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


def evaluate_rsim(model_dir: str, opts: LayerOptions) -> EvalOutput:
    """``eval rsim``: RSIM and mean cosine of the dictionary's first translation pairs (the
    BLI word set of ``opts``) at ``opts.layer``."""
    from crossalign.evals.bli import bli_set_for, dictionary_pair, load_for

    model, tokenizer = load_for(model_dir, opts)
    bli = bli_set_for(model, tokenizer, opts)
    x, y = bli.first_pairs()
    scores = {"rsim": rsim(x, y), "mean_cos": mean_cosine(x, y), "pairs": len(bli.src_words)}
    src, tgt = dictionary_pair(opts)
    return EvalOutput(
        metrics=scores,
        notes=[f"RSIM {src}-{tgt}, layer {opts.layer}: {len(bli.src_words)} translation pairs"],
        legacy={"pair": f"{src}-{tgt}", "layer": opts.layer, **scores},
    )
