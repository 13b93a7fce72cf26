"""Lexicon figures of a model (or several, e.g. before and after continued pre-training):

- ``bli``: MUSE's BLI precision (nn and csls_knn_10), RSIM and mean cosine on the embedding
  layer for en->de, en->fr, en->es, en->hi, en->ar against FreeDict: on the test split (the
  protocol of docs/lexicon.md) and on the full dictionary (more source words, capped at 1500);
- ``layers``: BLI, mean cosine and RSIM per layer for en-de (table + PNG), contextual vectors
  averaged over LibreOffice en-de training text;
- ``retrieval``: sentence retrieval on the held-out LibreOffice test pairs, both directions.

    .venv/bin/python bench/lexicon_figures.py --parts bli,layers,retrieval
    .venv/bin/python bench/lexicon_figures.py --parts bli,retrieval \
        --models backbone=runs/backbone-e5-small tcs=runs/tcs-mlm/model
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from crossalign.data.readers import read_dictionary, read_parallel, read_text
from crossalign.evals.bli import bli_scores, build_bli_set, candidate_words
from crossalign.evals.layers import layer_metrics, layer_scores, plot_layers
from crossalign.evals.registry import evaluations
from crossalign.evals.retrieval import layer_sentence_embeddings, retrieval_accuracy
from crossalign.evals.rsim import mean_cosine, rsim
from crossalign.fileio import write_json_atomic
from crossalign.lexicon.embed import embedding_layer, load_masked_lm
from crossalign.report.tables import evaluation_table

DICTS = {
    "en-de": "data/freedict/en-de",
    "en-fr": "data/freedict/en-fr",
    "en-es": "data/freedict/en-es",
    "en-hi": "data/freedict-extra/en-hi",
    "en-ar": "data/freedict-extra/en-ar",
}


def bli_part(model, tok, pairs: list[str], modes: list[str]) -> list[dict]:
    vectors = embedding_layer(model)
    rows = []
    for pair in pairs:
        for split in ("test", "full"):
            path = f"{DICTS[pair]}/{split}.txt"
            sources = [s for s, _ in read_dictionary(f"{DICTS[pair]}/full.txt")]
            test, candidates = read_dictionary(path), candidate_words(path)
            for mode in modes:
                bli = build_bli_set(
                    tok, vectors, vectors, test, candidates, mode, source_words=sources
                )
                x, y = bli.first_pairs()
                row = {"pair": pair, "split": split, "words_mode": mode, **bli_scores(bli)}
                row.update(rsim=rsim(x, y), mean_cos=mean_cosine(x, y))
                rows.append(row)
                print(
                    f"{pair} {split:<4} {mode:<5} P@1 CSLS {row['precision_at_1-csls_knn_10']:6.2f}"
                    f"%  P@5 CSLS {row['precision_at_5-csls_knn_10']:6.2f}%  P@1 NN "
                    f"{row['precision_at_1-nn']:6.2f}%  RSIM {row['rsim']:.3f}  cos "
                    f"{row['mean_cos']:.3f}  ({row['words']} words, {row['candidates']} cand.)",
                    flush=True,
                )
    return rows


def retrieval_part(model, tok, pairs: list[str], layers: list[int], corpus: str) -> list[dict]:
    rows = []
    for pair in pairs:
        src, tgt = pair.split("-", 1)
        data = read_parallel([f"{corpus}/{pair}/test.{src}", f"{corpus}/{pair}/test.{tgt}"])
        s, t = [a for a, _ in data], [b for _, b in data]
        xs = layer_sentence_embeddings(model, tok, s, layers)
        ys = layer_sentence_embeddings(model, tok, t, layers)
        for layer, x, y in zip(layers, xs, ys):
            row = {"pair": pair, "layer": layer, **retrieval_accuracy(x, y, s, t)}
            rows.append(row)
            print(
                f"{pair} layer {layer:>2}: {src}->{tgt} {100 * row['acc_src_tgt']:6.2f}%  "
                f"{tgt}->{src} {100 * row['acc_tgt_src']:6.2f}%  ({row['n']} pairs)",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["backbone=runs/backbone-e5-small"])
    parser.add_argument("--parts", default="bli,layers,retrieval")
    parser.add_argument("--pairs", default="en-de,en-fr,en-es,en-hi,en-ar")
    parser.add_argument("--modes", default="whole,mean", help="word vector modes for bli")
    parser.add_argument("--retrieval-pairs", default="en-de,en-fr,en-es,en-ru,en-zh-CN,en-hi")
    parser.add_argument("--retrieval-layers", default="8,12")
    parser.add_argument("--corpus", default="data/libreoffice")
    parser.add_argument("--context-sentences", type=int, default=2000)
    parser.add_argument("--out", default="runs/lexicon-figures")
    args = parser.parse_args()
    parts = args.parts.split(",")
    out = Path(args.out)
    results: dict[str, dict] = {}
    for spec in args.models:
        name, path = spec.split("=", 1)
        model, tok = load_masked_lm(path)
        result: dict[str, object] = {"model": path}
        print(f"== {name}: {path}")
        t = time.perf_counter()
        if "bli" in parts:
            result["bli"] = bli_part(model, tok, args.pairs.split(","), args.modes.split(","))
        if "layers" in parts:
            full = f"{DICTS['en-de']}/full.txt"
            rows = layer_scores(
                model,
                tok,
                read_dictionary(full),
                candidate_words(full),
                read_text(f"{args.corpus}/en-de/train.en")[: args.context_sentences],
                read_text(f"{args.corpus}/en-de/train.de")[: args.context_sentences],
                "en",
                "de",
                progress=False,
            )
            print("en-de per layer (FreeDict en-de full dictionary, MUSE BLI, whole words):")
            print(evaluation_table(evaluations().get("layers"), layer_metrics(rows)))
            plot_layers(rows, out / f"layers-en-de-{name}.png", f"en-de per layer: {name}")
            result["layers"] = rows
        if "retrieval" in parts:
            layers = [int(x) for x in args.retrieval_layers.split(",")]
            pairs = args.retrieval_pairs.split(",")
            result["retrieval"] = retrieval_part(model, tok, pairs, layers, args.corpus)
        result["seconds"] = time.perf_counter() - t
        print(f"{name}: {result['seconds']:.0f} s")
        results[name] = result
        write_json_atomic(out / f"figures-{name}.json", result)


if __name__ == "__main__":
    main()
