"""Alignment error rate, precision and recall against sure/possible gold links (Och & Ney 2003),
and the reader of predicted alignments in Pharaoh format."""

from __future__ import annotations

import os

from crossalign.data.readers import iter_lines
from crossalign.errors import CrossalignError
from crossalign.evals.gold import GoldAlignments, Link

HIGHER_IS_BETTER = {"aer": False, "precision": True, "recall": True}
"""The metrics ``aer_scores`` returns, and whether a higher value is better."""


def read_pharaoh(
    path: str | os.PathLike, lengths: list[tuple[int, int]] | None = None
) -> list[set[Link]]:
    """Links per line of a Pharaoh file: ``i-j`` tokens, 0-based source and target word indices.

    ``lengths`` gives each sentence's (source, target) word counts to check indices against
    (and the expected line count). Raises CrossalignError naming file and line for a malformed
    token or an index out of range, and for a line count different from ``len(lengths)``.
    """
    out = []
    for number, text in iter_lines(path):
        links = set()
        for token in text.split():
            i, sep, j = token.partition("-")
            if not (sep and i.isdigit() and j.isdigit()):
                raise CrossalignError(
                    f"{path}:{number}: '{token}' is not a Pharaoh link 'i-j' (0-based word indices)"
                )
            link = (int(i), int(j))
            if lengths is not None and number <= len(lengths):
                n_src, n_tgt = lengths[number - 1]
                if link[0] >= n_src or link[1] >= n_tgt:
                    raise CrossalignError(
                        f"{path}:{number}: link {token} is out of range: the sentence pair has "
                        f"{n_src} source and {n_tgt} target words (indices are 0-based)"
                    )
            links.add(link)
        out.append(links)
    if lengths is not None and len(out) != len(lengths):
        raise CrossalignError(
            f"{path} has {len(out)} lines but the gold test set has {len(lengths)} sentence pairs"
        )
    return out


def aer_scores(pred: list[set[Link]], gold: GoldAlignments) -> dict[str, float]:
    """Corpus-level AER, precision and recall (fractions) of predicted links ``A`` against sure
    links ``S`` and possible links ``P ⊇ S``, summed over sentences::

        AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)
        precision = |A∩P| / |A|        recall = |A∩S| / |S|

    ``pred`` must have one set per gold sentence. An empty prediction has precision 0.
    """
    if len(pred) != len(gold.sure):
        raise CrossalignError(
            f"{len(pred)} predicted sentence pairs but {len(gold.sure)} gold sentence pairs"
        )
    n_pred = sum(len(a) for a in pred)
    n_sure = sum(len(s) for s in gold.sure)
    a_sure = sum(len(a & s) for a, s in zip(pred, gold.sure))
    a_possible = sum(len(a & p) for a, p in zip(pred, gold.possible))
    total = n_pred + n_sure
    return {
        "aer": 1.0 - (a_sure + a_possible) / total if total else 0.0,
        "precision": a_possible / n_pred if n_pred else 0.0,
        "recall": a_sure / n_sure if n_sure else 0.0,
    }
