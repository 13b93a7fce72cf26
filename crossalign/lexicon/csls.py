"""Cross-domain similarity local scaling (CSLS; Conneau et al. 2018, "Word Translation Without
Parallel Data", eq. 6) and plain cosine nearest neighbours between two embedding sets.

    CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)
    r_T(x) = 1/K Σ_{y' ∈ N_T(x)} cos(x, y'),   r_S(y) = 1/K Σ_{x' ∈ N_S(y)} cos(x', y)

where N_T(x) are the K target vectors nearest to x and N_S(y) the K source vectors nearest to
y. Everything is computed in row chunks: memory is O(chunk × V), never V × V. The neighbourhood
terms are returned and accepted back, so callers cache them. With ``backend="faiss"`` (or
``auto`` when faiss is importable) the K-nearest searches run on a flat inner-product index,
and the CSLS search itself on augmented vectors x' = [2x, -1], y' = [y, r_S(y)], whose inner
product is 2 cos(x, y) - r_S(y).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import torch
import torch.nn.functional as F

from crossalign.errors import CrossalignError

BACKENDS = ("auto", "torch", "faiss")


def _backend(name: str) -> str:
    if name not in BACKENDS:
        raise CrossalignError(f"unknown CSLS backend '{name}'; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        return "faiss" if importlib.util.find_spec("faiss") is not None else "torch"
    if name == "faiss" and importlib.util.find_spec("faiss") is None:
        raise CrossalignError("backend 'faiss' needs the faiss package: pip install faiss-cpu")
    return name


def unit(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit L2 norm, in float32. [n, d] -> [n, d]."""
    return F.normalize(x.float(), dim=-1)


def _faiss_search(keys: torch.Tensor, queries: torch.Tensor, k: int) -> tuple[np.ndarray, ...]:
    import faiss

    index = faiss.IndexFlatIP(keys.shape[1])
    index.add(np.ascontiguousarray(keys.detach().cpu().numpy(), dtype=np.float32))
    return index.search(np.ascontiguousarray(queries.detach().cpu().numpy(), dtype=np.float32), k)


def neighbourhood_means(
    queries: torch.Tensor,
    keys: torch.Tensor,
    k: int = 10,
    chunk: int = 4096,
    backend: str = "torch",
) -> torch.Tensor:
    """r(q) = mean cosine of each query with its ``k`` nearest keys (the CSLS term).

    queries [n, d], keys [m, d] (any scale; normalised here) -> [n] float32. ``k`` is capped
    at m.
    """
    q, kv = unit(queries), unit(keys)
    k = min(k, kv.shape[0])
    if _backend(backend) == "faiss":
        sims, _ = _faiss_search(kv, q, k)
        return torch.from_numpy(sims.mean(axis=1)).to(q.device)
    out = torch.empty(q.shape[0], device=q.device)
    for start in range(0, q.shape[0], chunk):
        sims = q[start : start + chunk] @ kv.T
        out[start : start + chunk] = sims.topk(k, dim=1).values.mean(dim=1)
    return out


def csls_terms(
    src: torch.Tensor, tgt: torch.Tensor, k: int = 10, chunk: int = 4096, backend: str = "torch"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The neighbourhood terms (r_T over the sources [n], r_S over the targets [m]) of CSLS
    between src [n, d] and tgt [m, d]."""
    return (
        neighbourhood_means(src, tgt, k, chunk, backend),
        neighbourhood_means(tgt, src, k, chunk, backend),
    )


def csls_topk(
    src: torch.Tensor,
    tgt: torch.Tensor,
    k: int = 10,
    topn: int = 1,
    terms: tuple[torch.Tensor, torch.Tensor] | None = None,
    chunk: int = 4096,
    backend: str = "torch",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``topn`` targets of every source by CSLS with neighbourhood size ``k``.

    src [n, d], tgt [m, d]; ``terms`` = (r_src [n], r_tgt [m]) from ``csls_terms`` (computed
    when None). Returns (scores [n, topn] float32, indices [n, topn] long), best first.
    """
    backend = _backend(backend)
    s, t = unit(src), unit(tgt)
    r_src, r_tgt = terms if terms is not None else csls_terms(s, t, k, chunk, backend)
    topn = min(topn, t.shape[0])
    if backend == "faiss":
        ones = torch.ones(s.shape[0], 1)
        queries = torch.cat([2 * s.cpu(), -ones], dim=1)
        keys = torch.cat([t.cpu(), r_tgt.cpu()[:, None]], dim=1)
        scores, idx = _faiss_search(keys, queries, topn)
        scores = torch.from_numpy(scores) - r_src.cpu()[:, None]
        return scores.to(s.device), torch.from_numpy(idx).long().to(s.device)
    scores = torch.empty(s.shape[0], topn, device=s.device)
    idx = torch.empty(s.shape[0], topn, dtype=torch.long, device=s.device)
    for start in range(0, s.shape[0], chunk):
        block = 2 * (s[start : start + chunk] @ t.T) - r_tgt[None, :]
        block -= r_src[start : start + chunk, None]
        top = block.topk(topn, dim=1)
        scores[start : start + chunk], idx[start : start + chunk] = top.values, top.indices
    return scores, idx


def nn_topk(
    src: torch.Tensor, tgt: torch.Tensor, topn: int = 1, chunk: int = 4096
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``topn`` targets of every source by cosine. src [n, d], tgt [m, d] ->
    (cosines [n, topn], indices [n, topn]), best first; chunked like ``csls_topk``."""
    s, t = unit(src), unit(tgt)
    topn = min(topn, t.shape[0])
    scores = torch.empty(s.shape[0], topn, device=s.device)
    idx = torch.empty(s.shape[0], topn, dtype=torch.long, device=s.device)
    for start in range(0, s.shape[0], chunk):
        top = (s[start : start + chunk] @ t.T).topk(topn, dim=1)
        scores[start : start + chunk], idx[start : start + chunk] = top.values, top.indices
    return scores, idx


def retrieve(
    src: torch.Tensor,
    tgt: torch.Tensor,
    method: str = "csls",
    topn: int = 1,
    k: int = 10,
    chunk: int = 4096,
    backend: str = "torch",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``csls_topk`` or ``nn_topk`` by ``method`` (``csls`` or ``nn``)."""
    if method == "csls":
        return csls_topk(src, tgt, k, topn, chunk=chunk, backend=backend)
    if method == "nn":
        return nn_topk(src, tgt, topn, chunk)
    raise CrossalignError(f"unknown retrieval method '{method}'; choose csls or nn")
