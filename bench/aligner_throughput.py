"""Word-aligner throughput: crossalign (batched pairs) vs SimAlign (one pair per forward pass).

Both use the same model directory, the same layer and the same sentence pairs (the first
``--pairs`` of the de-en gold test set), separate encoding and per-word tokenization, on the
same number of threads (one by default). Runs go crossalign (each method), SimAlign, then
crossalign again (methods in reverse order), so drifting machine load hits all alike; the
printed ratio is crossalign pairs/s (mean of its two runs) ÷ SimAlign pairs/s. SimAlign runs
once with ``matching_methods="mai"`` (its forward pass dominates; its argmax and itermax links
then serve as an end-to-end check of crossalign's, which should agree up to float rounding).
Extraction time is reported as a fraction of encoder forward time. crossalign also runs with
its encoder in bfloat16 autocast.

    python bench/aligner_throughput.py --model runs/backbone-e5-small [--pairs 500] [--layer 8]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from crossalign.align.aligner import AlignConfig, WordAligner, load_aligner
from crossalign.evals.gold import read_testset

GOLD = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "word-alignment-gold"


def run_crossalign(aligner: WordAligner, pairs: list, layer: int) -> dict:
    aligner.seconds = dict.fromkeys(aligner.seconds, 0.0)
    start = time.perf_counter()
    links = aligner.align(pairs, [layer])[layer]
    seconds = time.perf_counter() - start
    return {"pairs_s": len(pairs) / seconds, "seconds": dict(aligner.seconds), "links": links}


def run_simalign(model: str, pairs: list, layer: int) -> dict:
    from simalign import SentenceAligner

    logging.getLogger("simalign.simalign").setLevel(logging.WARNING)
    with contextlib.redirect_stderr(io.StringIO()):
        aligner = SentenceAligner(
            model=model, token_type="bpe", matching_methods="mai", layer=layer
        )
    aligner.get_word_aligns(*pairs[0])  # warm-up
    start = time.perf_counter()
    out = [aligner.get_word_aligns(s, t) for s, t in pairs]
    seconds = time.perf_counter() - start
    return {"pairs_s": len(pairs) / seconds, "links": out}


def agreement(ours: list, theirs: list, key: str) -> float:
    return sum(sorted(a) == sorted(b[key]) for a, b in zip(ours, theirs)) / len(ours)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="runs/backbone-e5-small", help="save_pretrained directory")
    p.add_argument("--gold", default=str(GOLD / "de-en"), help="test-set folder for the pairs")
    p.add_argument("--pairs", type=int, default=500)
    p.add_argument("--layer", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both (default 1: on a shared machine, threads splitting "
        "SimAlign's small per-pair matmuls measure the machine's load more than the aligners)",
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ts = read_testset(args.gold)
    pairs = list(zip(ts.src, ts.tgt))[: args.pairs]
    n_words = sum(len(s) + len(t) for s, t in pairs)
    print(
        f"{len(pairs)} {ts.name} pairs ({n_words} words), layer {args.layer}, "
        f"{torch.get_num_threads()} torch threads, model {args.model}"
    )

    cfgs = {
        m: AlignConfig(method=m, batch_size=args.batch_size) for m in ("ot", "itermax", "argmax")
    }
    cfgs["ot, bf16"] = AlignConfig(method="ot", batch_size=args.batch_size, bf16=True)
    aligners = {
        m: load_aligner(args.model, cfg, [args.layer], device="cpu") for m, cfg in cfgs.items()
    }
    for aligner in aligners.values():
        aligner.align(pairs[:8], [args.layer])  # warm-up
    before = {m: run_crossalign(aligners[m], pairs, args.layer) for m in cfgs}
    simalign = run_simalign(args.model, pairs, args.layer)
    after = {m: run_crossalign(aligners[m], pairs, args.layer) for m in reversed(cfgs)}

    print(f"\n{'aligner':<36} {'pairs/s':>9} {'× SimAlign':>11} {'extract/forward':>16}")
    sim = simalign["pairs_s"]
    print(f"{'SimAlign (mai), 1 pair/forward':<36} {sim:>9.1f} {1.0:>11.2f} {'':>16}")
    for m in cfgs:
        speed = (before[m]["pairs_s"] + after[m]["pairs_s"]) / 2
        sec = [r["seconds"] for r in (before[m], after[m])]
        frac = sum(s["extract"] for s in sec) / sum(s["encode"] for s in sec)
        name = f"crossalign {m}, batch {args.batch_size}"
        print(f"{name:<36} {speed:>9.1f} {speed / sim:>11.2f} {100 * frac:>15.1f}%")

    print("\nsame links as SimAlign (share of pairs):")
    for ours, theirs in (("itermax", "itermax"), ("argmax", "inter")):
        share = agreement(before[ours]["links"], simalign["links"], theirs)
        print(f"  crossalign {ours} vs SimAlign {theirs}: {100 * share:.1f}%")


if __name__ == "__main__":
    main()
