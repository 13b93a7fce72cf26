"""Alignment error rate, precision, recall and F1 against sure/possible gold links (Och & Ney
2003; F1 as SimAlign's ``calc_align_score.py`` and awesome-align's ``aer.py`` report it), and
the reader of predicted alignments in Pharaoh format."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from crossalign.data.readers import iter_lines
from crossalign.errors import CrossalignError
from crossalign.evals.gold import (
    READ_AS,
    GoldAlignments,
    Link,
    gold_summary,
    out_of_range_warning,
    read_gold_file,
    read_parallel,
    read_testset,
    text_beside,
)
from crossalign.evals.registry import EvalOutput

if TYPE_CHECKING:
    from crossalign.evals.options import AEROptions


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
    """Corpus-level AER, precision, recall and F1 (fractions) of predicted links ``A`` against
    sure links ``S`` and possible links ``P ⊇ S``, counts summed over sentences::

        AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)
        precision = |A∩P| / |A|        recall = |A∩S| / |S|
        F1 = 2 · precision · recall / (precision + recall)

    (F1 as SimAlign computes it, from unrounded P and R; awesome-align's F-measure with its
    default α = 0.5 is the same number). ``pred`` must have one set per gold sentence. An
    empty prediction has precision 0; F1 is 0 when precision + recall is.
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
    precision = a_possible / n_pred if n_pred else 0.0
    recall = a_sure / n_sure if n_sure else 0.0
    return {
        "aer": 1.0 - (a_sure + a_possible) / total if total else 0.0,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
    }


def evaluate_aer(model_dir: str | None, opts: AEROptions) -> EvalOutput:
    """``eval aer``: predictions (``opts.pred``) scored against ``opts.gold``, or the model's
    alignments of ``opts.testset`` at each of ``opts.layers`` (metrics ``L<n>/aer`` ...)."""
    if opts.pred and model_dir:
        raise CrossalignError("give either --pred with --gold, or --model with --testset, not both")
    if opts.text and not (opts.gold and Path(opts.gold).is_file()):
        raise CrossalignError(
            "--text goes with a links file as --gold; a test-set folder has its own text files"
        )
    if opts.pred:
        return _score_predictions(opts)
    if model_dir:
        return _score_model(model_dir, opts)
    raise CrossalignError("give --pred with --gold, or --model with --testset")


def _score_predictions(opts: AEROptions) -> EvalOutput:
    """AER of the Pharaoh file ``opts.pred`` against ``opts.gold`` (a test-set folder, or a
    links file checked against its text when there is one)."""
    if not opts.gold:
        raise CrossalignError(
            "--pred needs --gold: a test-set folder, an alignv2.txt file or a Pharaoh gold file"
        )
    gold_path = Path(opts.gold)
    name = gold_path.name
    if gold_path.is_dir():
        testset = read_testset(gold_path, opts.gold_ids, opts.strict)
        lengths = [(len(s), len(t)) for s, t in zip(testset.src, testset.tgt)]
        pred = read_pharaoh(opts.pred, lengths)
        gold = testset.gold
    elif text := opts.text or text_beside(gold_path):
        src, tgt = read_parallel(*text)
        lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
        gold = read_gold_file(gold_path, lengths, opts.gold_ids, opts.gold_base, opts.strict)
        pred = read_pharaoh(opts.pred, lengths)
        name = f"{name} on {Path(text[0]).name}, {Path(text[1]).name}"
    else:
        gold = read_gold_file(gold_path, ids=opts.gold_ids, base=opts.gold_base)
        pred = read_pharaoh(opts.pred)
        if len(pred) != len(gold.sure):
            raise CrossalignError(
                f"{opts.pred} has {len(pred)} lines but the gold {gold_path} has "
                f"{len(gold.sure)} sentences when its ids are read {READ_AS[gold.ids]}; "
                f"give the text files with --text SRC_FILE TGT_FILE, or the id rule with "
                f"--gold-ids"
            )
        print(
            f"note: no test.<l1>, test.<l2> beside {gold_path} and no --text SRC_FILE "
            f"TGT_FILE: word positions of gold and predicted links are not checked",
            file=sys.stderr,
        )
    if warning := out_of_range_warning(gold):
        print(warning, file=sys.stderr)
    scores = aer_scores(pred, gold)
    return EvalOutput(
        metrics=scores,
        notes=[gold_summary(name, gold, opts.gold_ids)],
        legacy={Path(opts.pred).name: scores},
    )


def _score_model(model_dir: str, opts: AEROptions) -> EvalOutput:
    """AER of the model's alignments of ``opts.testset`` at each layer of ``opts.layers``."""
    from crossalign.align.aligner import load_aligner
    from crossalign.evals.options import parse_layers

    if not opts.testset:
        raise CrossalignError("--model needs --testset: a test-set folder such as de-en/")
    testset = read_testset(opts.testset, opts.gold_ids, opts.strict)
    if warning := out_of_range_warning(testset.gold):
        print(warning, file=sys.stderr)
    layers = parse_layers(opts.layers)
    languages = (testset.src_lang, testset.tgt_lang)
    aligner = load_aligner(model_dir, opts, layers, languages, opts.device)
    if layers is None:
        layers = list(range(aligner.model.config.num_hidden_layers + 1))
    links = aligner.align(list(zip(testset.src, testset.tgt)), layers, progress=True)
    if warning := aligner.truncation_warning():
        print(warning, file=sys.stderr)
    scores = {x: aer_scores([set(a) for a in links[x]], testset.gold) for x in layers}
    return EvalOutput(
        metrics={f"L{x}/{k}": v for x, s in scores.items() for k, v in s.items()},
        notes=[
            f"{testset.name}, {opts.method}, {opts.encoding} encoding",
            gold_summary(testset.name, testset.gold, opts.gold_ids),
        ],
        legacy={f"layer {x}": s for x, s in scores.items()},
    )
