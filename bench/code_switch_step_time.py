"""Step time of TCS-MLM and SCS-MLM against plain MLM, measured side by side on the same
batches (Lu et al. 2023 report TCS at about 2x and SCS at about 2.4x the cost of MLM).

Every round runs one training step of each objective on the same packed blocks, in rotating
order, and the ratios are medians over rounds, so load from other processes hits all three
alike. A step is the training loop's ``train_step`` (forward, backward, gradient norm, AdamW
update).

    .venv/bin/python bench/code_switch_step_time.py --model runs/backbone-e5-small \
        --corpus data/libreoffice --batch 8 --length 64 --rounds 6 [--precision bf16]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from accelerate import Accelerator

from crossalign.data.readers import read_text
from crossalign.data.store.prepare import TrainingData
from crossalign.lexicon.embed import load_masked_lm
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.training.step import TrainState, train_step

TARGETS = {"tcs_mlm": 2.05, "scs_mlm": 2.4}


def packed_blocks(tokenizer, lines: list[str], rows: int, length: int, offset: int) -> np.ndarray:
    """[rows, length] int32 of consecutive tokens starting at line ``offset``."""
    flat: list[int] = []
    for ids in tokenizer(lines[offset : offset + 40 * rows], add_special_tokens=False)["input_ids"]:
        flat.extend(ids)
        if len(flat) >= rows * length:
            break
    return np.array(flat[: rows * length], dtype=np.int32).reshape(rows, length)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/backbone-e5-small")
    parser.add_argument("--corpus", default="data/libreoffice")
    parser.add_argument("--pair", default="en-de")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threshold", type=int, default=20)
    parser.add_argument("--other-max", type=int, default=0, help="0: as docs/lexicon.md measured")
    parser.add_argument("--csls-neighbourhood", default="batch", choices=("batch", "vocabulary"))
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument(
        "--precision", default="no", choices=("no", "bf16"),
        help="bf16: autocast, as train.precision auto runs on a CPU with bf16 instructions",
    )  # fmt: skip
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    src, tgt = args.pair.split("-", 1)
    texts = {
        lang: read_text(f"{args.corpus}/{args.pair}/train.{lang}")[:20000] for lang in (src, tgt)
    }
    model, tok = load_masked_lm(args.model)
    model.train()
    ctx = TokenContext.for_model(tok, model, args.length, language_embeddings=False)
    objectives = {"mlm": OBJECTIVES.get("mlm")(ctx)}
    data = TrainingData.from_texts(tok, texts, args.length)
    for name in ("tcs_mlm", "scs_mlm"):
        extra = {"csls_neighbourhood": args.csls_neighbourhood} if name == "scs_mlm" else {}
        objective = OBJECTIVES.get(name)(
            ctx, threshold=args.threshold, other_max=args.other_max, **extra
        )
        t = time.perf_counter()
        objective.start(model, data)
        print(f"{name}: start (vocabularies + dictionary/terms) {time.perf_counter() - t:.1f} s")
        objectives[name] = objective.train()
    module = ObjectiveSet(model, objectives)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-7)
    accelerator = Accelerator(cpu=True, mixed_precision=args.precision)
    names = list(objectives)
    states = {
        n: TrainState(accelerator, module, optimizer, None, {n: objectives[n]}, {n: 1.0})
        for n in names
    }
    full: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds + 1):  # round 0 warms up
        lang = (src, tgt)[r % 2]
        raw = RawBatch(
            lang, blocks=packed_blocks(tok, texts[lang], args.batch, args.length, 50 * r)
        )
        for name in names[r % 3 :] + names[: r % 3]:
            objective = objectives[name]
            batch = objective.collate(raw, torch.Generator().manual_seed(r))
            t0 = time.perf_counter()
            train_step(states[name], [{name: batch}], r + 1)
            if r:
                full[name].append(time.perf_counter() - t0)
    print(
        f"\n{args.rounds} rounds, batch {args.batch} x {args.length} tokens, {args.model}, "
        f"{torch.get_num_threads()} threads, precision {args.precision}"
    )
    print(f"{'objective':<9} {'step s':>8} {'ratio':>7}  target")
    for name in names:
        ratio = statistics.median(a / b for a, b in zip(full[name], full["mlm"]))
        target = f"<= {TARGETS[name]}" if name in TARGETS else ""
        print(f"{name:<9} {statistics.median(full[name]):>8.3f} {ratio:>7.2f}  {target}")


if __name__ == "__main__":
    main()
