"""Training-step time of objectives on the same batches, side by side, as ratios to a baseline.

Each objective is built on the same model (a ``save_pretrained`` directory) and collates the
same examples with the same masking seed; one timed step is the training loop's ``train_step``
(forward, backward, gradient norm, finiteness check and an AdamW step). Objectives are timed in
alternation, repeat after repeat, so machine noise hits all of them alike; the printed ratio is
the median step time of each ÷ the baseline's.

    PYTHONPATH=. python bench/objective_step_time.py --model runs/backbone-e5-small \\
        --pairs data/libreoffice/en-de/valid.en data/libreoffice/en-de/valid.de \\
        --objectives tlm dwa --baseline tlm
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from accelerate import Accelerator
from transformers import AutoModelForMaskedLM

from crossalign.data.readers import read_parallel
from crossalign.data.tokenizer import load_tokenizer
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.training.step import TrainState, train_step
from tests.oracles.batching import PairArray, pack_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="save_pretrained directory")
    parser.add_argument("--pairs", nargs=2, required=True, metavar=("SRC", "TGT"))
    parser.add_argument("--langs", default="en-de", help="pair name of --pairs")
    parser.add_argument("--objectives", nargs="+", default=["tlm", "dwa"])
    parser.add_argument("--baseline", default="tlm")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-words", type=int, default=20, help="use pairs this long")
    args = parser.parse_args()

    tokenizer = load_tokenizer(args.model)
    model = AutoModelForMaskedLM.from_pretrained(args.model)
    ctx = TokenContext.for_model(tokenizer, model, args.max_length, language_embeddings=False)
    long_pairs = [p for p in read_parallel(list(args.pairs)) if len(p[0].split()) >= args.min_words]
    pairs = long_pairs[: args.batch_size]
    ids = tokenizer([s for s, _ in pairs], add_special_tokens=False)["input_ids"]
    tids = tokenizer([t for _, t in pairs], add_special_tokens=False)["input_ids"]
    array = PairArray.from_lists(ids, tids)
    raw_pairs = RawBatch(args.langs, pairs=[array.pair(k) for k in range(len(array))])
    blocks = pack_blocks(ids + tids, args.max_length, ctx.cls_id, ctx.sep_id, ctx.pad_id)
    raw_mono = RawBatch(args.langs.split("-")[0], blocks=blocks[: args.batch_size])

    objectives = {name: OBJECTIVES.get(name)(ctx) for name in args.objectives}
    for objective in objectives.values():
        objective.start(model)
    module = ObjectiveSet(model, objectives)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-5)
    accelerator = Accelerator(cpu=True)
    states = {
        name: TrainState(accelerator, module, optimizer, None, {name: obj}, {name: 1.0})
        for name, obj in objectives.items()
    }
    batches = {
        name: obj.collate(raw_pairs if obj.data == "parallel" else raw_mono,
                          torch.Generator().manual_seed(0))
        for name, obj in objectives.items()
    }  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in objectives}
    for repeat in range(args.repeats + 1):  # the first round warms up and is not counted
        for name in objectives:
            start = time.perf_counter()
            train_step(states[name], [{name: batches[name]}], repeat + 1)
            if repeat:
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times[args.baseline])
    tokens = {n: int(b["attention_mask"].sum()) for n, b in batches.items()}
    print(
        f"model {args.model}, batch {args.batch_size}, {torch.get_num_threads()} threads, "
        f"{args.repeats} timed steps each"
    )
    print(f"{'objective':<12} {'tokens':>7} {'median s/step':>14} {'ratio':>6}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<12} {tokens[name]:>7} {median:>14.3f} {median / base:>6.2f}")


if __name__ == "__main__":
    main()
