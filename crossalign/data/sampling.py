"""Language sampling (XLM, Conneau & Lample 2019, §3.1): p_i = n_i^α / Σ_j n_j^α."""

from __future__ import annotations

import numpy as np

from crossalign.errors import CrossalignError


def language_probs(counts: dict[str, int], alpha: float) -> dict[str, float]:
    """Sampling probability of each language from its size ``n_i``: p_i ∝ n_i^alpha.

    alpha = 1 samples proportionally to size; alpha = 0 uniformly; XLM uses 0.5-0.7.
    A language with no lines cannot be sampled: a CrossalignError naming it.
    """
    names = sorted(counts)
    empty = [n for n in names if counts[n] <= 0]
    if empty:
        raise CrossalignError(
            f"no text in language(s) {', '.join(empty)} to sample from; check their data files"
        )
    if not names:
        raise CrossalignError("no languages to sample text from; give data.mono or data.parallel")
    weights = np.array([float(counts[n]) for n in names]) ** alpha
    weights /= weights.sum()
    return dict(zip(names, weights.tolist()))


def sample_by_language(
    texts: dict[str, list[str]], alpha: float, total: int, seed: int
) -> list[str]:
    """About ``total`` sentences drawn with language proportions p_i ∝ n_i^alpha.

    A language with fewer sentences than its share is repeated (up-sampled); larger ones are
    sub-sampled without replacement. The result is shuffled deterministically by ``seed``.
    """
    rng = np.random.default_rng(seed)
    probs = language_probs({k: len(v) for k, v in texts.items()}, alpha)
    out: list[str] = []
    for lang in sorted(texts):
        lines = texts[lang]
        want = max(1, round(probs[lang] * total))
        idx = np.concatenate([rng.permutation(len(lines)) for _ in range(-(-want // len(lines)))])[
            :want
        ]
        out.extend(lines[i] for i in idx)
    order = rng.permutation(len(out))
    return [out[i] for i in order]
