"""Symmetrisation of two directional word alignments (for statistical aligners such as eflomal)."""

from __future__ import annotations

Link = tuple[int, int]

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
