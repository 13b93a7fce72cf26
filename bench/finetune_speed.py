"""Fine-tuning speed of ``eval transfer``'s tagger: fp32 against bfloat16 autocast
(``precision: bf16``) and a seeded shuffle against length-grouped batches
(``group_by_length``), side by side on the same model and sentences.

Every round fine-tunes one epoch of each setting on the same training sentences (the task's
English sentences that ``eval transfer`` would train on, up to ``--sentences``), in rotating
order, so load from other processes hits all settings alike; a setting's time is its median
over rounds, the speed-up is fp32 + shuffle's median over the setting's. The padding fraction
is that of the setting's batches (padding positions / all positions). The scores each setting
gives are not measured here: that is ``configs/studies/pilots/transfer_precision.yaml``.

    .venv/bin/python bench/finetune_speed.py --model runs/backbone-e5-small --task pos-silver \
        --sentences 1000 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from crossalign.data.tokenizer import load_tokenizer
from crossalign.evals.finetune_config import FinetuneConfig
from crossalign.evals.transfer import TASKS, encode_tagged, epoch_order, finetune, token_batches

SETTINGS = {
    "fp32, shuffled": {},
    "bf16, shuffled": {"precision": "bf16"},
    "fp32, grouped by length": {"group_by_length": True},
    "bf16, grouped by length": {"precision": "bf16", "group_by_length": True},
}


def padding_fraction(train, cfg: FinetuneConfig, tokenizer) -> float:
    """Padding positions over all positions of the first epoch's batches."""
    order = epoch_order(train, cfg, 0)
    batches = token_batches([train[i] for i in order], cfg.batch_size, tokenizer, 0)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    return 1 - real / sum(b["attention_mask"].numel() for b in batches)


def main() -> None:
    """Print seconds per step, speed-up and padding fraction of each setting."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="an encoder directory (a run's model)")
    p.add_argument("--task", default="pos-silver")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()

    spec = TASKS.get(args.task)
    tokenizer = load_tokenizer(args.model)
    label_ids = {label: i for i, label in enumerate(spec.labels)}
    tagged = spec.load(False, 0)["train"][: args.sentences]
    train = [x for x in encode_tagged(tokenizer, tagged, label_ids, args.max_length) if x]
    steps = -(-len(train) // args.batch)
    print(f"{args.model}: {len(train)} sentences, {steps} steps of {args.batch} per epoch, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    configs = {
        name: FinetuneConfig(epochs=1, lr=2e-4, batch_size=args.batch, **extra)
        for name, extra in SETTINGS.items()
    }
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}
    names = list(SETTINGS)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            finetune(args.model, train, len(spec.labels), 0, tokenizer, configs[name], name)
            times[name].append((time.perf_counter() - start) / steps)
    base = statistics.median(times["fp32, shuffled"])
    print(f"\n| setting | s/step (median of {args.rounds}) | speed-up | padding |")
    print("|---|---|---|---|")
    for name in names:
        t = statistics.median(times[name])
        pad = padding_fraction(train, configs[name], tokenizer)
        print(f"| {name} | {t:.3f} | {base / t:.2f}x | {pad:.1%} |")


if __name__ == "__main__":
    main()
