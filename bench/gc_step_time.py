"""Step time of MLM-GC over MLM, measured side by side on the same batches.

Two copies of one freshly built model (same initial weights), one trained with ``mlm`` and one
with ``mlm_gc``; every step both get the same packed blocks with the same masking, and a full
training step (the loop's ``train_step``: forward, loss, backward, gradient norm, AdamW step) is
timed for each, alternating which goes first. Prints the median step times and their ratio (the
issue's target: <= 1.10).

    PYTHONPATH=. .venv/bin/python bench/gc_step_time.py --tokenizer runs/mlm-base/tokenizer \\
        --cooc runs/cooc-ende
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from accelerate import Accelerator

from crossalign.config import ModelConfig
from crossalign.data.corpora.files import resolve_corpus
from crossalign.data.readers import read_mono
from crossalign.data.tokenizer import load_tokenizer
from crossalign.models.build import build_model
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.training.step import TrainState, train_step
from tests.oracles.batching import pack_blocks

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tokenizer", required=True, help="the tokenizer the matrix was built with")
    p.add_argument("--cooc", required=True, help="co-occurrence matrix directory")
    p.add_argument("--corpus", default=str(ROOT / "data" / "libreoffice"))
    p.add_argument("--languages", default="en,de")
    p.add_argument("--preset", default="small")
    p.add_argument(
        "--hf-overrides",
        default="{}",
        help="YAML mapping of model config fields, as model.hf_overrides",
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--steps", type=int, default=40, help="timed steps per objective")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--window", type=int, help="GC window n (default: the matrix's)")
    p.add_argument("--neighbour", default="state", help="state (Eq. 3) or output_embedding")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    tok = load_tokenizer(args.tokenizer)
    langs = args.languages.split(",")
    mono = resolve_corpus(args.corpus, langs)["mono"]
    blocks = {
        lang: pack_blocks(
            tok(read_mono(mono[lang])[:3000], add_special_tokens=False)["input_ids"],
            args.max_length,
            tok.cls_token_id,
            tok.sep_token_id,
            tok.pad_token_id,
        )
        for lang in langs
    }
    model = build_model(
        ModelConfig(preset=args.preset, hf_overrides=yaml.safe_load(args.hf_overrides)),
        len(tok),
        tok.pad_token_id,
        langs,
        args.max_length,
    ).to(device)
    ctx = TokenContext.for_model(tok, model, args.max_length)
    objectives = {
        "mlm": OBJECTIVES.get("mlm")(ctx),
        "mlm_gc": OBJECTIVES.get("mlm_gc")(
            ctx, cooc=args.cooc, window=args.window, neighbour=args.neighbour
        ),
    }
    models = {"mlm": model, "mlm_gc": copy.deepcopy(model)}
    for name, objective in objectives.items():
        objective.to(device)
        objective.start(models[name])
    accelerator = Accelerator(cpu=device.type == "cpu")
    states = {}
    for name, objective in objectives.items():
        module = ObjectiveSet(models[name], {name: objective}).train()
        optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)
        states[name] = TrainState(
            accelerator, module, optimizer, None, {name: objective}, {name: 1.0}
        )
    times: dict[str, list[float]] = {n: [] for n in objectives}
    rng = np.random.default_rng(0)
    for step in range(args.warmup + args.steps):
        lang = langs[step % len(langs)]
        idx = rng.choice(len(blocks[lang]), args.batch_size, replace=False)
        raw = RawBatch(lang, blocks=blocks[lang][idx])
        order = list(objectives) if step % 2 == 0 else list(objectives)[::-1]
        for name in order:
            batch = objectives[name].collate(raw, torch.Generator().manual_seed(step))
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            train_step(states[name], [{name: batch}], step + 1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if step >= args.warmup:
                times[name].append(time.perf_counter() - start)
    med = {n: statistics.median(t) for n, t in times.items()}
    pair_ratios = [g / m for g, m in zip(times["mlm_gc"], times["mlm"])]
    gc = objectives["mlm_gc"]
    print(
        f"device {device}, preset {args.preset} {args.hf_overrides}, "
        f"batch {args.batch_size} x {args.max_length}, "
        f"GC window {gc.window}, neighbour {args.neighbour}, matrix nnz {gc.matrix.nnz:,}, "
        f"{args.steps} timed steps each"
    )
    print(f"median step: MLM {med['mlm'] * 1e3:.1f} ms, MLM-GC {med['mlm_gc'] * 1e3:.1f} ms")
    print(
        f"MLM-GC / MLM: ratio of medians {med['mlm_gc'] / med['mlm']:.3f}, median of per-step "
        f"ratios {statistics.median(pair_ratios):.3f}"
    )


if __name__ == "__main__":
    main()
