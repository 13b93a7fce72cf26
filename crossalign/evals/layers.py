"""Alignment across layers: for the embedding layer (0) and every transformer layer, MUSE's BLI
precision (``crossalign.evals.bli.bli_scores``), the mean cosine of translation pairs and RSIM,
on one word set.

Layer 0 is the input embedding table; layer l >= 1 averages a token's hidden states over its
occurrences in the given text (``crossalign.lexicon.embed``). Only words whose tokens occur in
the text have contextual vectors, and layer 0 is restricted to the same words, so every layer
is scored on the same evaluation words and candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.evals.bli import bli_scores, build_bli_set, normalise_word
from crossalign.evals.registry import EvalOutput
from crossalign.evals.rsim import mean_cosine, rsim
from crossalign.fileio import atomic_path
from crossalign.lexicon.embed import TokenVectors, contextual_token_vectors, piece_ids

if TYPE_CHECKING:
    from crossalign.evals.options import LayersOptions


def layer_scores(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    test_pairs: Sequence[tuple[str, str]],
    candidates: Sequence[str],
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    mode: str = "whole",
    max_words: int = 1500,
    seed: int = 0,
    max_length: int = 128,
    batch_size: int = 32,
    progress: bool = False,
    source_words: Sequence[str] = (),
) -> list[dict[str, float]]:
    """One row per layer 0..L: ``layer``, the metrics of ``bli_scores`` (MUSE's precision at
    1, 5, 10 by nn and csls_knn_10, counts), ``mean_cos`` and ``rsim``. ``source_words``: the
    source vocabulary beyond the test pairs' source words (``build_bli_set``)."""
    layers = list(range(1, model.config.num_hidden_layers + 1))
    src_words = [normalise_word(s) for s in [*(s for s, _ in test_pairs), *source_words]]
    tgt_words = [normalise_word(w) for w in candidates]
    src_ctx = contextual_token_vectors(
        model,
        tokenizer,
        src_texts,
        layers,
        piece_ids(tokenizer, src_words),
        src_lang,
        max_length,
        batch_size,
        progress,
    )
    tgt_ctx = contextual_token_vectors(
        model,
        tokenizer,
        tgt_texts,
        layers,
        piece_ids(tokenizer, tgt_words),
        tgt_lang,
        max_length,
        batch_size,
        progress,
    )
    table = model.get_input_embeddings().weight.detach().float()  # the vectors' device

    def static(ctx: TokenVectors) -> TokenVectors:
        seen = (ctx.row_of >= 0).nonzero().squeeze(1)
        return TokenVectors(table[seen], ctx.row_of)

    per_layer = {0: (static(src_ctx[1]), static(tgt_ctx[1]))}
    per_layer.update({layer: (src_ctx[layer], tgt_ctx[layer]) for layer in layers})
    rows = []
    for layer, (src_vec, tgt_vec) in per_layer.items():
        bli = build_bli_set(
            tokenizer, src_vec, tgt_vec, test_pairs, candidates, mode, max_words, seed, source_words
        )
        row: dict[str, float] = {"layer": layer, **bli_scores(bli)}
        src, tgt = bli.first_pairs()
        row.update(mean_cos=mean_cosine(src, tgt), rsim=rsim(src, tgt))
        rows.append(row)
    return rows


def layer_metrics(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """``layer_scores`` rows as flat metrics ``L<layer>/<name>``."""
    return {f"L{r['layer']}/{k}": v for r in rows for k, v in r.items() if k != "layer"}


def plot_layers(rows: Sequence[dict[str, float]], path: str | Path, title: str = "") -> None:
    """A PNG with three panels over the layers: BLI precision at 1 and 5 (csls_knn_10) and at
    1 (nn), mean cosine, RSIM (atomic)."""
    from crossalign.extras import require

    matplotlib = require("matplotlib", "plots", "the per-layer figure")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["layer"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    axes[0].plot(x, [r["precision_at_1-csls_knn_10"] for r in rows], "o-", label="P@1 CSLS")
    axes[0].plot(x, [r["precision_at_5-csls_knn_10"] for r in rows], "s-", label="P@5 CSLS")
    axes[0].plot(x, [r["precision_at_1-nn"] for r in rows], "^--", label="P@1 NN")
    axes[0].set_ylabel("BLI precision (%)")
    axes[0].legend()
    axes[1].plot(x, [r["mean_cos"] for r in rows], "o-", color="tab:green")
    axes[1].set_ylabel("mean cosine of translation pairs")
    axes[2].plot(x, [r["rsim"] for r in rows], "o-", color="tab:red")
    axes[2].set_ylabel("RSIM")
    for ax in axes:
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks(x)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def evaluate_layers(model_dir: str, opts: LayersOptions) -> EvalOutput:
    """``eval layers``: ``layer_scores`` of the model on ``opts``'s dictionary and text, and
    the per-layer plot at ``opts.png``."""
    from crossalign.evals.bli import (
        dictionary_pair,
        gold_candidates,
        gold_pairs,
        gold_source_words,
        language_texts,
        load_for,
        require_vocabulary,
    )

    require_vocabulary(opts)
    src, tgt = dictionary_pair(opts)
    model, tokenizer = load_for(model_dir, opts)
    src_texts, tgt_texts = language_texts(opts, src, tgt)
    rows = layer_scores(
        model,
        tokenizer,
        gold_pairs(opts),
        gold_candidates(opts),
        src_texts,
        tgt_texts,
        src,
        tgt,
        opts.words,
        opts.max_words,
        opts.seed,
        progress=True,
        source_words=gold_source_words(opts),
    )
    notes = [f"{src}-{tgt} per layer (MUSE BLI, nn and csls_knn_10, words '{opts.words}'):"]
    files = {}
    if opts.png:
        plot_layers(rows, opts.png, f"{src}-{tgt}: {model_dir}")
        notes.append(f"plot: {opts.png}")
        files["plot"] = opts.png
    return EvalOutput(
        metrics=layer_metrics(rows),
        notes=notes,
        legacy={"pair": f"{src}-{tgt}", "layers": rows},
        files=files,
    )
