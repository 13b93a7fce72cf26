"""Symmetrisation of two directional word alignments (for statistical aligners such as eflomal,
or an aligner run in both directions)."""

from __future__ import annotations

Link = tuple[int, int]

SYMMETRIZE_METHODS = ("grow-diag-final-and", "intersection", "union")

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
"""Horizontal, vertical, then diagonal neighbours, in the order of Moses and fast_align."""


def grow_diag_final_and(forward: set[Link], backward: set[Link]) -> set[Link]:
    """grow-diag-final-and (Koehn et al. 2003, as in Moses and fast_align's ``atools``).

    Both alignments hold ``(source, target)`` links. Start from their intersection; grow-diag:
    scanning points in (source, target) order and repeating until nothing changes, add every
    neighbour of an aligned point that is in the union and has an unaligned source or target
    word; final-and: add the links of ``forward``, then of ``backward``, whose source and
    target words are both still unaligned.
    """
    union = forward | backward
    links = forward & backward
    if not union:
        return set()
    m = 1 + max(i for i, _ in union)
    n = 1 + max(j for _, j in union)
    src_aligned = {i for i, _ in links}
    tgt_aligned = {j for _, j in links}
    added = True
    while added:
        added = False
        for i in range(m):
            for j in range(n):
                if (i, j) not in links:
                    continue
                for di, dj in NEIGHBOURS:
                    p = (i + di, j + dj)
                    if (
                        p in union
                        and p not in links
                        and not (p[0] in src_aligned and p[1] in tgt_aligned)
                    ):
                        links.add(p)
                        src_aligned.add(p[0])
                        tgt_aligned.add(p[1])
                        added = True
    for directional in (forward, backward):
        for i, j in sorted(directional):
            if i not in src_aligned and j not in tgt_aligned:
                links.add((i, j))
                src_aligned.add(i)
                tgt_aligned.add(j)
    return links


def symmetrize(forward: set[Link], backward: set[Link], method: str) -> set[Link]:
    """The links of ``forward`` and ``backward`` (both ``(source, target)``) combined by
    ``method``: ``intersection`` (A_f ∩ A_b), ``union`` (A_f ∪ A_b) or ``grow-diag-final-and``
    (``grow_diag_final_and``)."""
    if method == "intersection":
        return forward & backward
    if method == "union":
        return forward | backward
    if method == "grow-diag-final-and":
        return grow_diag_final_and(forward, backward)
    raise ValueError(f"unknown symmetrization {method!r}; expected one of {SYMMETRIZE_METHODS}")
