"""AER on the de-en and en-fr gold test sets: crossalign's aligners vs SimAlign vs eflomal.

crossalign (per-word subwords, float32) is swept over every layer for each pair encoding of
``--encodings`` (separate, tlm, concat), with the hidden states of each batch shared by its
methods; its AER is shown at layers 6, 8 and 10 and at its best layer (chosen on the test set
itself, as the papers' layer sweeps do). SimAlign (pip ``simalign``, same model directory,
separate encoding) runs at layer 8 and at the best layer of crossalign's itermax. eflomal (a
statistical aligner, no model) is trained on the test sentences plus the LibreOffice help
pairs of the same languages when present (``--libreoffice``), tokenized by a simple regex, and
symmetrised by grow-diag-final-and.

    python bench/aer_table.py --model runs/backbone-e5-small [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from crossalign.align.aligner import AlignConfig, WordAligner, load_aligner
from crossalign.align.symmetrize import grow_diag_final_and
from crossalign.align.words import link_lists
from crossalign.evals.aer import aer_scores
from crossalign.evals.gold import TestSet, read_testset

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / ".." / "shared" / "data" / "word-alignment-gold"
METHODS = {
    "ot (released aligner; default)": AlignConfig(method="ot"),
    "ot, itermax (authors' self-labels)": AlignConfig(method="ot", ot_filter="itermax"),
    "ot, eq9-literal": AlignConfig(method="ot", ot_filter="eq9-literal"),
    "ot, eq9-literal, rows-first (former)": AlignConfig(
        method="ot", ot_filter="eq9-literal", sinkhorn_order="rows-first"
    ),
    "ot, rows-first, mutual argmax of plan": AlignConfig(
        method="ot", ot_filter="eq9-literal", sinkhorn_order="rows-first", filter_iters=1
    ),
    "ot, union (no filter)": AlignConfig(method="ot", ot_filter="union"),
    "itermax": AlignConfig(method="itermax"),
    "argmax": AlignConfig(method="argmax"),
    "softmax": AlignConfig(method="softmax"),
}
LAYERS_SHOWN = (6, 8, 10)
TOKEN = re.compile(r"\w+(?:-\w+)*|[^\w\s]")


def sweep(
    aligner: WordAligner, ts: TestSet, layers: list[int], encoding: str
) -> dict[str, dict[int, float]]:
    """AER of every method of METHODS at every layer with the pairs encoded by ``encoding``,
    one forward pass per batch."""
    aligner.cfg = replace(aligner.cfg, encoding=encoding)
    src, tgt = aligner.pieces(list(zip(ts.src, ts.tgt)))
    order = sorted(range(len(src)), key=lambda k: -len(src[k].ids) - len(tgt[k].ids))
    links = {name: {x: [set() for _ in src] for x in layers} for name in METHODS}
    for b0 in range(0, len(order), 32):
        idx = order[b0 : b0 + 32]
        batch = aligner.collate([(src[k], tgt[k]) for k in idx])
        states = aligner.hidden_states(batch)
        for name, cfg in METHODS.items():
            aligner.cfg = replace(cfg, encoding=encoding)
            for x in layers:
                for k, found in zip(idx, link_lists(aligner.word_links(states[x], batch))):
                    links[name][x][k] = set(found)
    return {
        name: {x: aer_scores(by_layer[x], ts.gold)["aer"] for x in layers}
        for name, by_layer in links.items()
    }


def simalign_aer(model: str, ts: TestSet, layer: int) -> dict[str, float]:
    from simalign import SentenceAligner

    logging.getLogger("simalign.simalign").setLevel(logging.WARNING)
    with contextlib.redirect_stderr(io.StringIO()):
        aligner = SentenceAligner(model=model, token_type="bpe", matching_methods="ai", layer=layer)
    out = [aligner.get_word_aligns(s, t) for s, t in zip(ts.src, ts.tgt)]
    return {m: aer_scores([set(x[m]) for x in out], ts.gold)["aer"] for m in ("itermax", "inter")}


def read_extra(folder: Path, src_lang: str, tgt_lang: str, max_words: int = 80) -> list:
    """Tokenized, lowercased pairs of train.<src> / train.<tgt> in ``folder`` (either order
    of the folder name), both sides at most ``max_words`` tokens."""
    for name in (f"{src_lang}-{tgt_lang}", f"{tgt_lang}-{src_lang}"):
        d = folder / name
        if (d / f"train.{src_lang}").is_file() and (d / f"train.{tgt_lang}").is_file():
            src = (d / f"train.{src_lang}").read_text(encoding="utf-8").splitlines()
            tgt = (d / f"train.{tgt_lang}").read_text(encoding="utf-8").splitlines()
            pairs = [(TOKEN.findall(s.lower()), TOKEN.findall(t.lower())) for s, t in zip(src, tgt)]
            return [(s, t) for s, t in pairs if 0 < len(s) <= max_words and 0 < len(t) <= max_words]
    return []


def eflomal_aer(ts: TestSet, extra: list) -> float:
    from eflomal import Aligner

    src = [" ".join(s) for s in ts.src] + [" ".join(s) for s, _ in extra]
    tgt = [" ".join(t) for t in ts.tgt] + [" ".join(t) for _, t in extra]
    with tempfile.TemporaryDirectory() as d:
        fwd, rev = Path(d) / "fwd", Path(d) / "rev"
        Aligner().align(src, tgt, links_filename_fwd=str(fwd), links_filename_rev=str(rev))
        parse = [
            [
                {tuple(map(int, x.split("-"))) for x in line.split()}
                for line in path.read_text().splitlines()
            ]
            for path in (fwd, rev)
        ]
    n = len(ts.src)
    pred = [grow_diag_final_and(f, r) for f, r in zip(parse[0][:n], parse[1][:n])]
    return aer_scores(pred, ts.gold)["aer"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="runs/backbone-e5-small", help="save_pretrained directory")
    p.add_argument("--gold", default=str(GOLD), help="folder holding de-en/ and en-fr/")
    p.add_argument("--sets", default="de-en,en-fr")
    p.add_argument(
        "--encodings", default="separate,tlm,concat", help="SimAlign runs only with separate"
    )
    p.add_argument("--libreoffice", default=str(ROOT / "data" / "libreoffice"))
    p.add_argument("--no-simalign", action="store_true")
    p.add_argument("--no-eflomal", action="store_true")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    aligner = load_aligner(args.model, AlignConfig(), layers=None, device="cpu")
    layers = list(range(aligner.model.config.num_hidden_layers + 1))
    names = args.sets.split(",")
    table: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    encodings = args.encodings.split(",")
    shown_layers = [x for x in LAYERS_SHOWN if x in layers]
    itermax_by_layer: dict[int, float] | None = None
    for name in names:
        ts = read_testset(Path(args.gold) / name)
        for encoding in encodings:
            start = time.perf_counter()
            aer = sweep(aligner, ts, layers, encoding)
            seconds = time.perf_counter() - start
            print(
                f"{name}: {encoding} sweep of {len(layers)} layers in {seconds:.0f} s", flush=True
            )
            for method, by_layer in aer.items():
                best = min(by_layer, key=by_layer.get)
                cells = table.setdefault(f"{encoding:<9}{method}", {})
                for x in shown_layers:
                    cells[f"{name} L{x}"] = f"{100 * by_layer[x]:.1f}"
                cells[f"{name} best"] = f"{100 * by_layer[best]:.1f} (L{best})"
            if encoding == "separate":
                itermax_by_layer = aer["itermax"]
        if not args.no_simalign and itermax_by_layer is not None:
            best = min(itermax_by_layer, key=itermax_by_layer.get)
            start = time.perf_counter()
            for layer in sorted({best, 8}):
                sim = simalign_aer(args.model, ts, layer)
                for method, key in (("itermax", "itermax"), ("argmax", "inter")):
                    cells = table.setdefault(f"{'SimAlign':<9}{method}", {})
                    value = f"{100 * sim[key]:.1f}"
                    if layer == best:
                        cells[f"{name} best"] = f"{value} (L{layer})"
                    if layer == 8:
                        cells[f"{name} L8"] = value
            print(f"{name}: SimAlign in {time.perf_counter() - start:.0f} s")
        if not args.no_eflomal:
            src_lang, tgt_lang = name.split("-")
            extra = read_extra(Path(args.libreoffice), src_lang, tgt_lang)
            start = time.perf_counter()
            value = f"{100 * eflomal_aer(ts, extra):.1f}"
            print(f"{name}: eflomal in {time.perf_counter() - start:.0f} s")
            notes.append(
                f"eflomal {name}: trained on {len(ts.src)} test + {len(extra)} LibreOffice pairs"
            )
            table.setdefault("eflomal + gdfa", {})[f"{name} best"] = value
    shown = [f"L{x}" for x in shown_layers] + ["best"]
    columns = [f"{n} {c}" for n in names for c in shown]
    width = max(map(len, table)) + 2
    print(f"\nAER (%) with {args.model}; best = lowest AER over layers 0-{layers[-1]}")
    print(f"{'':<{width}}" + "".join(f"{c:>13}" for c in columns))
    for method, cells in table.items():
        print(f"{method:<{width}}" + "".join(f"{cells.get(c, ''):>13}" for c in columns))
    print("\n".join(notes))


if __name__ == "__main__":
    main()
