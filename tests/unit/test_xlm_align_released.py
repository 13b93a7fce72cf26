"""XLM-Align as its authors ran it, against transcriptions of their released functions.

- Self-labels (``dwa``): ``get_gold_or_silver_wa`` of the pre-training task (microsoft/unilm,
  ``infoxlm/src-infoxlm/infoxlm/tasks/xlm_align.py``): ``_sinkhorn_iter`` (``S <= 0`` set to
  1e-6 in place, then per iteration the columns of the plan normalised, then its rows), then
  ``iter_max`` on the final plan; the pointer labels of ``prepare_positions``
  (``criterions/xlm_align.py``), a dictionary filled from the links in row-major order.
- The aligner (``ot``): ``sinkhorn`` + ``extract_wa_from_pi_xi`` of the released aligner
  (CZWin32768/XLM-Align, ``word_aligner/xlmalign-ot-aligner.py``): the same Sinkhorn, then the
  row argmaxes of the final plan π intersected with the column argmaxes of ξ, the plan
  before its last row normalisation.

The transcriptions below are written from those functions in numpy, float64 throughout.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossalign.align.extract import subword_alignment
from crossalign.data.masking import IGNORE_INDEX
from crossalign.objectives.dwa import links_to_pointers, self_label_links

# ---------------------------------------------------------------- transcriptions


def sinkhorn_pi_xi(sim: np.ndarray, n_iter: int, floor_in_place: bool) -> tuple[np.ndarray, ...]:
    """``_sinkhorn_iter``: the pre-training task sets ``S[S <= 0] = 1e-6``; the released aligner
    writes ``S[S<=0].fill_(1e-6)``, which fills a copy and leaves S unchanged
    (``floor_in_place=False``). Then ``num_iter`` times: ξ = π / column sums, π = ξ / row sums.
    Returns (π, ξ)."""
    s = sim.copy()
    if floor_in_place:
        s[s <= 0] = 1e-6
    pi = xi = s
    for _ in range(n_iter):
        xi = pi / pi.sum(axis=0, keepdims=True)
        pi = xi / xi.sum(axis=1, keepdims=True)
    return pi, xi


def iter_max(sim: np.ndarray, max_count: int = 2, alpha: float = 0.9) -> list[tuple[int, int]]:
    """``iter_max`` of the pre-training task (SimAlign's): links as a row-major list."""
    m, n = sim.shape
    inter = np.eye(n)[sim.argmax(axis=1)] * np.eye(m)[sim.argmax(axis=0)].T
    if min(m, n) > 2:
        count = 1
        while count < max_count:
            free_x = 1.0 - np.tile(inter.sum(1)[:, None], (1, n)).clip(0.0, 1.0)
            free_y = 1.0 - np.tile(inter.sum(0)[None, :], (m, 1)).clip(0.0, 1.0)
            weight = (alpha * free_x + alpha * free_y).clip(0.0, 1.0)
            one_free = 1.0 - (1.0 - free_x) * (1.0 - free_y)
            if free_x.sum() < 1.0 or free_y.sum() < 1.0:
                weight *= 0.0
                one_free *= 0.0
            new_sim = sim * weight
            fwd = np.eye(n)[new_sim.argmax(axis=1)] * one_free
            bwd = np.eye(m)[new_sim.argmax(axis=0)].T * one_free
            new = fwd * bwd
            if np.array_equal(inter + new, inter):
                break
            inter = inter + new
            count += 1
    return [(i, j) for i in range(m) for j in range(n) if inter[i, j] > 0]


def released_extraction(pi: np.ndarray, xi: np.ndarray) -> list[tuple[int, int]]:
    """``extract_wa_from_pi_xi``: row argmaxes of π intersected with column argmaxes of ξ."""
    m, n = pi.shape
    inter = np.eye(n)[pi.argmax(axis=1)] * np.eye(m)[xi.argmax(axis=0)].T
    return [(i, j) for i in range(m) for j in range(n) if inter[i, j] > 0]


def official_self_labels(
    states: np.ndarray, src: tuple[int, int], tgt: tuple[int, int], max_count: int = 2
) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """``get_gold_or_silver_wa`` for one jointly encoded pair: dot products of the states
    [L, H], the source block ``src = (fr, to)`` against the target block, 2 Sinkhorn
    iterations, ``iter_max`` on π; links in sequence positions, and the pointer dictionary of
    ``prepare_positions`` (each link sets both ends; later links overwrite earlier ones)."""
    sim = states @ states.T
    block = sim[src[0] : src[1], tgt[0] : tgt[1]]
    pi, _ = sinkhorn_pi_xi(block, 2, floor_in_place=True)
    links = [(i + src[0], j + tgt[0]) for i, j in iter_max(pi, max_count)]
    pointers: dict[int, int] = {}
    for i, j in links:
        pointers[i] = j
        pointers[j] = i
    return links, pointers


# ---------------------------------------------------------------- random cases


def random_states(rng: np.random.Generator, length: int, dim: int, kind: str) -> np.ndarray:
    """[length, dim] states: ``normal`` (dot products of both signs), ``ties`` (small
    integers and repeated vectors: many equal scores), ``positive`` (entries in [0, 1))."""
    if kind == "normal":
        return rng.normal(size=(length, dim))
    if kind == "positive":
        return rng.random((length, dim))
    states = rng.integers(-1, 3, size=(length, dim)).astype(float)
    for _ in range(int(rng.integers(0, 3))):  # repeated tokens: identical rows or columns
        a, b = rng.integers(0, length, size=2)
        states[b] = states[a]
    return states


def random_lengths(rng: np.random.Generator) -> tuple[int, int]:
    """Sentence lengths 1-12 with lengths 1 and 2 (IterMax's short-sentence rule) frequent."""
    short = rng.random(2) < 0.3
    return tuple(int(rng.integers(1, 3) if s else rng.integers(1, 13)) for s in short)


KINDS = ("normal", "ties", "positive")


@pytest.mark.parametrize("kind", KINDS)
def test_self_labels_equal_the_pretraining_task(kind):
    """``dwa``'s default self-labels and pointer labels equal the authors' on 800 pairs per
    kind (2,400 in all), batched 8 pairs at a time with junk in the padding."""
    rng = np.random.default_rng(KINDS.index(kind))
    differing = checked = 0
    for _ in range(100):
        pairs = [random_lengths(rng) for _ in range(8)]
        rows = [1 + m + 1 + n + 1 for m, n in pairs]  # [cls] src [sep] tgt [sep]
        width, dim = max(rows) + 2, int(rng.integers(2, 9))
        states = rng.normal(size=(8, width, dim)) * 3  # padding and specials: junk
        src_mask = torch.zeros(8, width, dtype=torch.bool)
        tgt_mask = torch.zeros(8, width, dtype=torch.bool)
        for b, (m, n) in enumerate(pairs):
            states[b, : rows[b]] = random_states(rng, rows[b], dim, kind)
            src_mask[b, 1 : 1 + m] = True
            tgt_mask[b, 2 + m : 2 + m + n] = True
        links, plan = self_label_links(torch.from_numpy(states), src_mask, tgt_mask)
        labels = links_to_pointers(links, plan, src_mask, tgt_mask)
        for b, (m, n) in enumerate(pairs):
            expected, pointers = official_self_labels(states[b], (1, 1 + m), (2 + m, 2 + m + n))
            got = sorted(map(tuple, links[b].nonzero().tolist()))
            want_labels = [pointers.get(t, IGNORE_INDEX) for t in range(width)]
            differing += got != expected or labels[b].tolist() != want_labels
            checked += 1
    assert checked == 800
    assert differing == 0


@pytest.mark.parametrize("kind", KINDS)
def test_ot_aligner_equals_the_released_aligner(kind):
    """``ot``'s default links (columns first, 2 iterations, mutual argmax of π rows and ξ
    columns) equal ``sinkhorn`` + ``extract_wa_from_pi_xi`` on 800 random pairs per kind,
    batched with junk padding. The released aligner's floor of non-positive scores is a no-op
    (it fills a copy), so there its kernel keeps them: the two agree where every dot product is
    positive, and ``normal`` and ``ties`` states are checked against the floored matrix (what
    the paper's ``log max(ε, ·)`` and the pre-training task give)."""
    rng = np.random.default_rng(10 + KINDS.index(kind))
    differing = checked = 0
    for _ in range(100):
        pairs = [random_lengths(rng) for _ in range(8)]
        width_s, width_t = max(m for m, _ in pairs) + 1, max(n for _, n in pairs) + 1
        dim = int(rng.integers(2, 9))
        src = rng.normal(size=(8, width_s, dim)) * 3
        tgt = rng.normal(size=(8, width_t, dim)) * 3
        src_mask = torch.arange(width_s)[None] < torch.tensor([m for m, _ in pairs])[:, None]
        tgt_mask = torch.arange(width_t)[None] < torch.tensor([n for _, n in pairs])[:, None]
        for b, (m, n) in enumerate(pairs):
            both = random_states(rng, m + n, dim, kind)
            src[b, :m], tgt[b, :n] = both[:m], both[m:]
        found = subword_alignment(
            torch.from_numpy(src), torch.from_numpy(tgt), src_mask, tgt_mask, "ot"
        ).links
        for b, (m, n) in enumerate(pairs):
            sim = src[b, :m] @ tgt[b, :n].T
            positive = kind == "positive"
            assert not positive or (sim > 0).all()
            pi, xi = sinkhorn_pi_xi(sim, 2, floor_in_place=not positive)
            got = sorted(map(tuple, found[b].nonzero().tolist()))
            differing += got != released_extraction(pi, xi)
            checked += 1
    assert checked == 800
    assert differing == 0


def test_the_released_aligner_differs_from_iter_max_and_from_plan_argmax():
    """The check above can fail: on this plan the released extraction (ξ's columns) differs
    from the mutual argmax of π, and from IterMax on π (which starts from the latter)."""
    sim = np.array([[0.10, 0.17, 0.19], [0.66, 0.01, 0.01], [0.49, 0.03, 0.11]])
    pi, xi = sinkhorn_pi_xi(sim, 2, floor_in_place=True)
    plan_mutual = released_extraction(pi, pi)
    released = released_extraction(pi, xi)
    assert released != plan_mutual
    assert set(plan_mutual) <= set(iter_max(pi)) and released != iter_max(pi)
    src = torch.eye(3, dtype=torch.float64)[None]
    tgt = torch.from_numpy(sim.T.copy())[None]  # src @ tgtᵀ = sim
    mask = torch.ones(1, 3, dtype=torch.bool)
    links = subword_alignment(src, tgt, mask, mask, "ot").links
    assert sorted(map(tuple, links[0].nonzero().tolist())) == released_extraction(pi, xi)


def test_last_link_labels_follow_row_major_order():
    """A token with several links points where the criterion's dictionary ends: the largest
    linked position; ``max-plan`` picks the largest plan value."""
    links = torch.zeros(1, 6, 6, dtype=torch.bool)
    for i, j in [(1, 3), (1, 4), (2, 4)]:  # source 1 -> targets 3, 4; target 4 <- sources 1, 2
        links[0, i, j] = True
    plan = torch.zeros(1, 6, 6)
    plan[0, 1, 3], plan[0, 1, 4], plan[0, 2, 4] = 0.5, 0.1, 0.05
    src = torch.tensor([[False, True, True, False, False, False]])
    tgt = torch.tensor([[False, False, False, True, True, False]])
    last = links_to_pointers(links, plan, src, tgt, "last-link")[0].tolist()
    best = links_to_pointers(links, plan, src, tgt, "max-plan")[0].tolist()
    x = IGNORE_INDEX
    assert last == [x, 4, 4, 1, 2, x]
    assert best == [x, 3, 4, 1, 1, x]


def test_released_extraction_in_rows_first_order_is_the_plans_mutual_argmax():
    """In rows-first order ξ is π before its columns are normalised, so the column argmaxes of
    ξ and π agree: ``argmax`` gives the mutual argmax of π (checked on 300 random plans)."""
    from crossalign.align.extract import argmax_links, released_argmax_links
    from crossalign.align.sinkhorn import sinkhorn_scaling

    rng = np.random.default_rng(7)
    for _ in range(300):
        m, n = (int(x) for x in rng.integers(1, 9, size=2))
        kernel = torch.from_numpy(rng.uniform(1e-3, 1.0, size=(1, m, n)))
        sm, tm = torch.ones(1, m, dtype=torch.bool), torch.ones(1, n, dtype=torch.bool)
        pi, xi = sinkhorn_scaling(kernel, sm, tm, 2, "rows-first")
        assert torch.equal(released_argmax_links(pi, xi, sm, tm), argmax_links(pi, sm, tm))
