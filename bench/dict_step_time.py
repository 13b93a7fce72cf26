"""Training-step time of ALIGN-MLM and DICT-MLM against MLM, side by side, as ratios.

The three objectives train copies of the same model (same initial weights, a from-scratch
preset on a derived corpus's twin tokenizer) on the same packed blocks with the same masking
seeds. A timed step is what the training loop does per objective: collate (masking), then
its ``train_step`` (forward, backward, gradient norm, AdamW). The objectives take turns step
by step, repeat after repeat, so machine noise hits all of them alike; the printed ratios are
median step time ÷ MLM's (targets <= 1.05).
The extra work of each (ALIGN-MLM's auxiliary term, DICT-MLM's masking) is also timed alone,
as a bound on the ratio that machine noise does not blur.

    PYTHONPATH=. python bench/dict_step_time.py --derived data/derived/trans+inv [--preset small]
        [--layers N --hidden H] [--batch-size 32] [--max-length 128] [--steps 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from accelerate import Accelerator

from crossalign.config import ModelConfig
from crossalign.data.readers import read_text
from crossalign.data.tokenizer import load_tokenizer
from crossalign.languages import DERIVED_LANG
from crossalign.models.build import build_model
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.align_mlm import alignment_loss, dictionary_cosines
from crossalign.objectives.objective_set import ObjectiveSet, derived_seed
from crossalign.training.step import TrainState, train_step
from tests.oracles.batching import pack_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--derived", default="data/derived/trans+inv", help="derived corpus")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--layers", type=int, help="override the preset's layer count")
    parser.add_argument("--hidden", type=int, help="override the preset's width (FFN 4x)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    derived = Path(args.derived)
    tokenizer = load_tokenizer(derived / "tokenizer")
    langs = ["en", DERIVED_LANG]
    blocks = {}
    for lang in langs:
        lines = read_text(derived / f"en-{DERIVED_LANG}" / f"train.{lang}")[:4000]
        ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
        blocks[lang] = pack_blocks(
            ids,
            args.max_length,
            tokenizer.cls_token_id,
            tokenizer.sep_token_id,
            tokenizer.pad_token_id,
        )
    torch.manual_seed(0)
    overrides = {}
    if args.layers:
        overrides["num_hidden_layers"] = args.layers
    if args.hidden:
        heads = max(1, args.hidden // 64)
        overrides.update(hidden_size=args.hidden, intermediate_size=4 * args.hidden)
        overrides["num_attention_heads"] = heads
    base = build_model(
        ModelConfig(preset=args.preset, hf_overrides=overrides), len(tokenizer),
        tokenizer.pad_token_id, langs, args.max_length,
    )  # fmt: skip
    size = base.config
    ctx = TokenContext.for_model(tokenizer, base, args.max_length)
    dictionary = str(derived / "dictionary" / "train.txt")
    specs = {
        "mlm": {},
        "align_mlm": {"dictionary": dictionary},
        "dict_mlm": {"dictionary": dictionary},
    }
    accelerator = Accelerator(cpu=True)
    runs = {}
    for name, options in specs.items():
        objectives = {name: OBJECTIVES.get(name)(ctx, **options)}
        module = ObjectiveSet(copy.deepcopy(base), objectives)
        module.train()
        optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)
        runs[name] = (
            module,
            TrainState(accelerator, module, optimizer, None, objectives, {name: 1.0}),
        )

    def step(name: str, k: int) -> float:
        module, state = runs[name]
        lang = langs[k % 2]
        rng = np.random.default_rng(k)
        idx = rng.choice(len(blocks[lang]), args.batch_size, replace=False)
        start = time.perf_counter()
        objective = module.objectives[name]
        batch = objective.collate(RawBatch(lang, blocks=blocks[lang][idx]), _gen(k))
        train_step(state, [{name: batch}], k + 1)
        return time.perf_counter() - start

    for k in range(3):  # warm-up
        for name in runs:
            step(name, k)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.repeats):
        for k in range(args.steps):
            for name in runs:
                times[name].append(step(name, 1000 * (r + 1) + k))
    print(
        f"{size.num_hidden_layers} layers x {size.hidden_size} hidden, vocabulary "
        f"{len(tokenizer)}, batch {args.batch_size} x "
        f"{args.max_length} tokens, {args.repeats} x {args.steps} steps each, "
        f"{torch.get_num_threads()} threads"
    )
    mlm = statistics.median(times["mlm"])
    print(f"{'objective':<10} {'median step (ms)':>17} {'÷ MLM':>7}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<10} {1000 * med:>17.1f} {med / mlm:>7.3f}")
    # The extra work alone, timed in isolation (less exposed to machine noise than whole
    # steps): ALIGN-MLM's auxiliary term (forward + backward) and DICT-MLM's collate minus MLM's.
    align_module = runs["align_mlm"][0]
    align = align_module.objectives["align_mlm"]
    weight = align_module.model.get_input_embeddings().weight
    aux = []
    for _ in range(50):
        start = time.perf_counter()
        cos = dictionary_cosines(weight, align.dict_pairs)
        alignment_loss(cos, align.alpha).backward()
        aux.append(time.perf_counter() - start)
    collate = {name: [] for name in ("mlm", "dict_mlm")}
    for k in range(50):
        for name in collate:
            raw = RawBatch("en", blocks=blocks["en"][: args.batch_size])
            start = time.perf_counter()
            runs[name][0].objectives[name].collate(raw, _gen(k))
            collate[name].append(time.perf_counter() - start)
    extra_align = statistics.median(aux)
    extra_dict = statistics.median(collate["dict_mlm"]) - statistics.median(collate["mlm"])
    print(
        f"in isolation: ALIGN-MLM auxiliary term {1000 * extra_align:.2f} ms "
        f"(1 + that/MLM step = {1 + extra_align / mlm:.4f}); DICT-MLM collate "
        f"{1000 * statistics.median(collate['dict_mlm']):.2f} ms vs MLM "
        f"{1000 * statistics.median(collate['mlm']):.2f} ms (1 + difference/MLM step = "
        f"{1 + extra_dict / mlm:.4f})"
    )
    # per-repeat ratios show the spread across the run
    per = args.steps
    for name in ("align_mlm", "dict_mlm"):
        ratios = [
            statistics.median(times[name][i * per : (i + 1) * per])
            / statistics.median(times["mlm"][i * per : (i + 1) * per])
            for i in range(args.repeats)
        ]
        print(f"{name} ÷ mlm per repeat: " + ", ".join(f"{x:.3f}" for x in ratios))


def _gen(k: int) -> torch.Generator:
    return torch.Generator().manual_seed(derived_seed(0, k))


if __name__ == "__main__":
    main()
