"""Training throughput: crossalign's loop vs a bare PyTorch loop, side by side.

Both train the same model (same initial weights) on the same batches for the same number of
steps: forward, backward, clipping, AdamW and scheduler steps. The bare loop gets its batches
pre-collated; crossalign's loop draws, masks and collates them itself and logs metrics.
Runs alternate (crossalign, bare, crossalign, bare, ...) so machine noise hits both; the
printed ratio is crossalign tokens/s ÷ bare tokens/s per adjacent pair, and its median.

    python bench/train_throughput.py [--corpus data/bible] [--steps 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
from transformers import get_linear_schedule_with_warmup

from crossalign.config import load_config
from crossalign.data.masking import IGNORE_INDEX
from crossalign.train import _raw_batch, _seed, build_setup, train

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tiny"


def overrides(args: argparse.Namespace, objectives: str, run_dir: Path, tok: Path | None) -> list:
    data = (
        [f"data.corpus={args.corpus}"]
        if args.corpus
        else [
            f"data.mono={{en: {FIXTURES / 'en.txt'}, es: {FIXTURES / 'es.txt'}}}",
            f"data.parallel={{en-es: [{FIXTURES / 'en.txt'}, {FIXTURES / 'es.txt'}]}}",
        ]
    )
    out = [
        *data,
        f"run_dir={run_dir}",
        f"model.preset={args.preset}",
        f"objectives={objectives}",
        f"train.steps={args.steps}",
        f"train.batch_size={args.batch_size}",
        f"train.log_every={args.warmup}",
        "train.save_every=0",
        "train.warmup_steps=10",
        "data.valid_mono={}",
        "data.valid_parallel={}",
        f"data.max_length={args.max_length}",
        "tokenizer.vocab_size=8000",
    ]
    return out + ([f"tokenizer.path={tok}"] if tok else [])


def crossalign_tokens_per_s(cfg_overrides: list[str], run_dir: Path) -> float:
    """Steady-state tokens/s of ``crossalign train`` (first logging interval excluded)."""
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        train(load_config(None, cfg_overrides))
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r][1:]
    return statistics.fmean(rates)


def bare_tokens_per_s(cfg_overrides: list[str], warmup: int) -> float:
    """Tokens/s of a plain PyTorch loop on the same model and batches (pre-collated)."""
    cfg = load_config(None, cfg_overrides)
    torch.manual_seed(cfg.train.seed)
    setup = build_setup(cfg, None)
    model = setup.model
    from crossalign.data.batching import SourceSampler

    examples = {"mono": setup.data.mono, "parallel": setup.data.parallel}
    samplers = {
        name: SourceSampler(
            {k: len(v) for k, v in examples[o.data].items()}, cfg.data.alpha, cfg.train.seed, i
        )
        for i, (name, o) in enumerate(setup.objectives.items())
    }
    steps = []
    for step in range(cfg.train.steps):
        batches = {}
        for i, (name, obj) in enumerate(setup.objectives.items()):
            source, idx = samplers[name].draw(step, cfg.train.batch_size)
            raw = _raw_batch(obj.data, source, examples[obj.data][source], idx)
            gen = torch.Generator().manual_seed(_seed(cfg.train.seed, step, 0, 0, i))
            batches[name] = obj.collate(raw, gen)
        steps.append(batches)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas))
    sched = get_linear_schedule_with_warmup(opt, cfg.train.warmup_steps, cfg.train.steps)
    model.train()
    tokens, start = 0, None
    for step, batches in enumerate(steps):
        if step == warmup:
            tokens, start = 0, time.perf_counter()
        total = 0.0
        for name, b in batches.items():
            kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "position_ids")}
            if "token_type_ids" in b:
                kwargs["token_type_ids"] = b["token_type_ids"]
            hidden = model.base_model(**kwargs).last_hidden_state
            selected = b["labels"] != IGNORE_INDEX
            logits = model.cls(hidden[selected])
            total = total + setup.weights[name] * F.cross_entropy(logits, b["labels"][selected])
            tokens += int(b["attention_mask"].sum())
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="a built corpus (crossalign data bible); default: fixture")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10, help="steps excluded from timing")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    settings = {"MLM": "[{name: mlm}]", "MLM+TLM": "[{name: mlm}, {name: tlm}]"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # Train the tokenizer once; both loops then load it.
        base = load_config(None, overrides(args, settings["MLM"], tmp / "tok", None))
        from crossalign.data.prepare import read_sources, resolve_sources
        from crossalign.data.tokenizer import train_tokenizer

        texts = read_sources(resolve_sources(base.data)).by_language()
        train_tokenizer(texts, base.tokenizer, 0).save_pretrained(tmp / "tokenizer")
        print(
            f"preset {args.preset}, batch {args.batch_size} x {args.max_length} tokens, "
            f"{args.steps} steps ({args.warmup} untimed), {torch.get_num_threads()} threads"
        )
        print(f"{'setting':<8} {'run':>3} {'crossalign tok/s':>17} {'bare tok/s':>11} {'ratio':>6}")
        for label, objectives in settings.items():
            ratios = []
            for r in range(args.repeats):
                run_dir = tmp / f"{label}-{r}"
                ours = crossalign_tokens_per_s(
                    overrides(args, objectives, run_dir, tmp / "tokenizer"), run_dir
                )
                bare = bare_tokens_per_s(
                    overrides(args, objectives, tmp / "bare", tmp / "tokenizer"), args.warmup
                )
                ratios.append(ours / bare)
                print(f"{label:<8} {r:>3} {ours:>17.0f} {bare:>11.0f} {ours / bare:>6.3f}")
            print(f"{label:<8} median ratio crossalign/bare = {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
