"""grow-diag-final-and on a hand-made case where every step of the heuristic matters."""

from crossalign.align.symmetrize import grow_diag_final_and


def test_grow_diag_final_and_by_hand():
    forward = {(0, 0), (1, 1), (2, 1), (3, 3), (5, 5), (0, 5)}
    backward = {(0, 0), (1, 1), (2, 2), (4, 3), (6, 4)}
    # intersection: (0,0) (1,1)
    # grow-diag from (1,1): (2,1) below, in the union, source 2 free -> added;
    #   (2,2) diagonal, in the union, target 2 free -> added
    # from (2,2): (3,3) diagonal, both free -> added; from (3,3): (4,3) below, source 4 free
    # final-and, forward: (0,5) no (source 0 aligned); (5,5) yes (both free)
    # final-and, backward: (6,4) yes (both free; it was not adjacent to an aligned point
    #   during grow-diag, (5,5) came only in the final step)
    expected = {(0, 0), (1, 1), (2, 1), (2, 2), (3, 3), (4, 3), (5, 5), (6, 4)}
    assert grow_diag_final_and(forward, backward) == expected


def test_final_and_needs_both_words_unaligned():
    # (0,1) neighbours (0,0) and is in the union with target 1 free: grow-diag adds it
    assert grow_diag_final_and({(0, 0), (0, 1)}, {(0, 0)}) == {(0, 0), (0, 1)}
    # (0,2) is not adjacent to (0,0) and its source word is aligned: final-and rejects it
    assert grow_diag_final_and({(0, 0), (0, 2)}, {(0, 0)}) == {(0, 0)}
    assert grow_diag_final_and(set(), set()) == set()
    # disjoint directions: no intersection to grow from, final-and keeps the forward link
    # first, and the backward link sharing its source word is rejected
    assert grow_diag_final_and({(0, 0)}, {(0, 1)}) == {(0, 0)}
