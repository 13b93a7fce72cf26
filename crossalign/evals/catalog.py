"""The registered evaluations: name, summary, options, metrics and implementation of each.
Importing this module imports no torch (implementations are imported when they run)."""

from __future__ import annotations

from crossalign.evals.options import (
    AEROptions,
    AlignmentScoreOptions,
    BLEUOptions,
    BLIOptions,
    CoocCompareOptions,
    InducedDictOptions,
    LayerOptions,
    LayersOptions,
    MostFrequentTagOptions,
    PerplexityOptions,
    RetrievalOptions,
    TransferOptions,
)
from crossalign.evals.registry import EVALS, Evaluation, Metric


def _register(evaluation: Evaluation) -> None:
    EVALS.register(evaluation.name)(evaluation)


def _count(label: str) -> Metric:
    return Metric(label, "count", None)


MUSE_BLI = {
    f"precision_at_{k}-{method}": Metric(f"P@{k} {label}", "percent")
    for method, label in (("nn", "NN"), ("csls_knn_10", "CSLS"))
    for k in (1, 5, 10)
}
"""MUSE's word translation metrics, named as its evaluator logs them (percent)."""
BLI = {
    **MUSE_BLI,
    "words": _count("words"),
    "candidates": _count("candidates"),
    "source_vocabulary": _count("source vocabulary"),
}
SIMILARITY = {
    "mean_cos": Metric("mean cos", "ratio"),
    "rsim": Metric("RSIM", "ratio"),
}

_register(
    Evaluation(
        name="aer",
        summary="alignment error rate, precision, recall and F1 against gold word alignments",
        options=AEROptions,
        metrics={
            "aer": Metric("AER", "fraction", False),
            "precision": Metric("precision", "fraction"),
            "recall": Metric("recall", "fraction"),
            "f1": Metric("F1", "fraction"),
        },
        run="crossalign.evals.aer:evaluate_aer",
        model="optional",
        version=2,
    )
)
_register(
    Evaluation(
        name="bli",
        summary="bilingual lexicon induction as MUSE reports it: P@1/5/10, nn and csls_knn_10",
        options=BLIOptions,
        metrics=BLI,
        run="crossalign.evals.bli:evaluate_bli",
        version=2,
    )
)
_register(
    Evaluation(
        name="induced-dict",
        summary="precision of the self-induced dictionary against a gold one (Table 1), with BLI",
        options=InducedDictOptions,
        metrics={
            "precision": Metric("precision", "fraction"),
            "correct": _count("correct"),
            "scored": _count("scored"),
            "pairs": _count("induced"),
            **BLI,
        },
        run="crossalign.evals.bli:evaluate_induced",
        version=2,
    )
)
_register(
    Evaluation(
        name="rsim",
        summary="relational similarity (RSIM) of translation pairs, and their mean cosine",
        options=LayerOptions,
        metrics={**SIMILARITY, "pairs": _count("pairs")},
        run="crossalign.evals.rsim:evaluate_rsim",
    )
)
_register(
    Evaluation(
        name="layers",
        summary="MUSE BLI precision, mean cosine and RSIM for every layer (table + PNG)",
        options=LayersOptions,
        metrics={**BLI, **SIMILARITY},
        run="crossalign.evals.layers:evaluate_layers",
        version=2,
    )
)
_register(
    Evaluation(
        name="retrieval",
        summary="sentence retrieval accuracy on held-out translation pairs, both directions",
        options=RetrievalOptions,
        metrics={
            "acc_src_tgt": Metric("src->tgt", "fraction"),
            "acc_tgt_src": Metric("tgt->src", "fraction"),
            "n": _count("pairs"),
        },
        run="crossalign.evals.retrieval:evaluate_retrieval",
    )
)
_register(
    Evaluation(
        name="alignment-score",
        summary="share of source tokens whose nearest cross-lingual neighbour is their counterpart",
        options=AlignmentScoreOptions,
        metrics={
            "alignment": Metric("alignment", "fraction"),
            "alignment_tokens": _count("tokens"),
            "alignment_nn": Metric("dictionary NN", "fraction"),
            "alignment_csls": Metric("dictionary CSLS", "fraction"),
            "pairs": _count("pairs"),
        },
        run="crossalign.evals.alignment_score:evaluate",
    )
)
_register(
    Evaluation(
        name="transfer",
        summary="SUP, ZS and Δ of token-classification fine-tuning on a derived or real language",
        options=TransferOptions,
        metrics={
            "sup": Metric("SUP", "percent"),
            "zs": Metric("ZS", "percent"),
            "delta": Metric("Δ", "percent", False),
            "en": Metric("EN", "percent"),
            "sup_f1": Metric("SUP macro-F1", "percent"),
            "zs_f1": Metric("ZS macro-F1", "percent"),
            "delta_f1": Metric("Δ macro-F1", "percent", False),
            "en_f1": Metric("EN macro-F1", "percent"),
            "sup_span_f1": Metric("SUP span F1", "percent"),
            "zs_span_f1": Metric("ZS span F1", "percent"),
            "delta_span_f1": Metric("Δ span F1", "percent", False),
            "en_span_f1": Metric("EN span F1", "percent"),
            "train_sentences": _count("train"),
            "test_sentences": _count("test"),
            "target_train_sentences": _count("target-language train"),
            "target_test_sentences": _count("target-language test"),
        },
        run="crossalign.evals.transfer:evaluate",
        run_seed=True,
    )
)
_register(
    Evaluation(
        name="most-frequent-tag",
        summary="per-word most-frequent-tag baseline of the transfer task's data (no model)",
        options=MostFrequentTagOptions,
        metrics={
            "sup": Metric("SUP (most frequent tag)", "percent"),
            "en": Metric("EN (most frequent tag)", "percent"),
            "train_sentences": _count("train"),
            "test_sentences": _count("test"),
            "target_train_sentences": _count("target-language train"),
            "target_test_sentences": _count("target-language test"),
        },
        run="crossalign.evals.most_frequent_tag:evaluate",
        model="none",
        run_seed=True,
    )
)
_register(
    Evaluation(
        name="cooc-compare",
        summary="|log X_a - log X_b| of translated two-word phrases vs random pairs (Figure 1)",
        options=CoocCompareOptions,
        metrics={
            "n": _count("phrases"),
            "translated": Metric("translated |Δ log X|", "nats", False),
            "translated_ci95": Metric("translated 95% half-width", "nats", None),
            "random": Metric("random |Δ log X|", "nats", None),
            "random_ci95": Metric("random 95% half-width", "nats", None),
        },
        run="crossalign.evals.cooc_phrases:evaluate_compare",
        model="none",
        version=2,
    )
)
_register(
    Evaluation(
        name="perplexity",
        summary="held-out masked-LM and translation-LM perplexity (logged, or computed now)",
        options=PerplexityOptions,
        metrics={
            "mlm_ppl": Metric("MLM ppl", "perplexity", False),
            "tlm_ppl": Metric("TLM ppl", "perplexity", False),
            "mlm_loss": Metric("MLM loss", "nats", False),
            "tlm_loss": Metric("TLM loss", "nats", False),
        },
        run="crossalign.evals.perplexity:evaluate",
    )
)
_register(
    Evaluation(
        name="bleu",
        summary="BLEU of a seq2seq model's translations: sacreBLEU and tokenized (multi-bleu)",
        options=BLEUOptions,
        metrics={
            "bleu": Metric("BLEU", "percent"),
            "bleu_tok": Metric("tok. BLEU", "percent"),
            "bp": Metric("BP", "ratio", None),
            "ratio": Metric("hyp/ref length", "ratio", None),
            "sentences": _count("sentences"),
        },
        run="crossalign.evals.bleu:evaluate_bleu",
        model="required",
    )
)
