"""Training throughput: crossalign's loop vs a bare PyTorch loop, side by side.

Both train the same model (same initial weights) on the same batches: forward, backward,
clipping, AdamW and scheduler steps. The bare loop gets its batches pre-collated; crossalign's
loop draws, masks and collates them itself and logs metrics. The per-step cost of each is the
difference between a run of 2N steps and a run of N steps, so set-up (data, tokenization,
model building) cancels out; it is measured in wall time and in process CPU time (user +
system of all threads), which another job on the machine disturbs far less. Runs alternate
(crossalign, bare, crossalign, bare, ...); the printed ratio is crossalign tokens/s ÷ bare
tokens/s, per repeat and as the median.

A second table times crossalign's own step (``train_step``) on the same pre-collated batches
with the finiteness check left on the device (the fused AdamW skips a non-finite step itself)
and read on the host before every update (``TrainState.defer_checks=False``, the loop before
deferral: one device sync per step), alternating, from the same initial weights; the losses of
the two must be equal. On a CPU there is no asynchronous device, so the ratio shows the check's
own cost only; the difference shows on a GPU. A third table gives the share of padding
positions in each objective's batches, padded and packed (``packing: true``): TLM's and DWA's
pairs, MASS's and DAE's sentences (encoder and decoder rows together).

    python bench/train_throughput.py [--corpus data/bible] [--steps 20] [--repeats 3] \
        [--tables throughput sync padding]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from transformers import get_linear_schedule_with_warmup

from crossalign.config import load_config
from crossalign.data.masking import IGNORE_INDEX
from crossalign.objectives.objective_set import derived_seed, raw_batch
from crossalign.training.loop import train
from crossalign.training.sampler import SourceSampler
from crossalign.training.setup import build_setup

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tiny"


def overrides(
    args: argparse.Namespace, objectives: str, run_dir: Path, tok: Path | None, steps: int = 2
) -> list:
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
        f"train.steps={steps}",
        f"train.batch_size={args.batch_size}",
        "train.log_every=10",
        "train.save_every=0",
        "train.warmup_steps=2",
        "data.valid_mono={}",
        "data.valid_parallel={}",
        f"data.max_length={args.max_length}",
        "tokenizer.vocab_size=8000",
        "train.precision='no'",  # fp32, as the bare loop (auto is bf16 on CPUs that have it)
    ]
    return out + ([f"tokenizer.path={tok}"] if tok else [])


def _clock() -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process's threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), usage.ru_utime + usage.ru_stime


def crossalign_run(cfg_overrides: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``crossalign train`` (set-up included)."""
    cfg = load_config(None, cfg_overrides)
    quiet = io.StringIO()
    wall0, cpu0 = _clock()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        train(cfg)
    wall1, cpu1 = _clock()
    return wall1 - wall0, cpu1 - cpu0


TABLES = ("throughput", "sync", "padding")


def batches_for(cfg_overrides: list[str]):
    """Set-up and the pre-collated batches crossalign's loop would draw, step by step."""
    cfg = load_config(None, cfg_overrides)
    torch.manual_seed(cfg.train.seed)
    setup = build_setup(cfg, None)
    examples = setup.data.by_kind()
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
            raw = raw_batch(obj.data, source, examples[obj.data][source], idx)
            gen = torch.Generator().manual_seed(derived_seed(cfg.train.seed, step, 0, 0, i))
            batches[name] = obj.collate(raw, gen)
        steps.append(batches)
    return cfg, setup, steps


def bare_run(cfg_overrides: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds of a plain PyTorch loop (set-up included), and tokens trained."""
    wall0, cpu0 = _clock()
    cfg, setup, steps = batches_for(cfg_overrides)
    model = setup.model
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas))
    sched = get_linear_schedule_with_warmup(opt, cfg.train.warmup_steps, cfg.train.steps)
    model.train()
    tokens = 0
    for batches in steps:
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
    wall1, cpu1 = _clock()
    return wall1 - wall0, cpu1 - cpu0, tokens


def padding_table(args: argparse.Namespace, tmp: Path) -> None:
    """Share of padding positions (and rows per step) in the batches each objective collates,
    padded and packed (``packing: true``); the sequence-to-sequence objectives' encoder and
    decoder rows together."""
    print(f"\n{'objective':<18} {'padding':>8} {'rows/step':>9}")
    for label, objectives in (
        ("mlm", "[{name: mlm}]"),
        ("tlm (padded)", "[{name: tlm}]"),
        ("tlm (packed)", "[{name: tlm, packing: true}]"),
        ("dwa (padded)", "[{name: dwa, layer: 1, allow_cold_start: true}]"),
        ("dwa (packed)", "[{name: dwa, layer: 1, allow_cold_start: true, packing: true}]"),
        ("mass (padded)", "[{name: mass}]"),
        ("mass (packed)", "[{name: mass, packing: true}]"),
        ("dae (padded)", "[{name: dae}]"),
        ("dae (packed)", "[{name: dae, packing: true}]"),
    ):
        run = overrides(args, objectives, tmp / "pad", tmp / "tokenizer", args.steps)
        _, _, steps = batches_for(run)
        batches = [b for step in steps for b in step.values()]
        masks = [b[k] for b in batches for k in ("attention_mask", "decoder_attention_mask")
                 if k in b]  # fmt: skip
        real = sum(int(m.sum()) for m in masks)
        total = sum(m.numel() for m in masks)
        rows = sum(b["attention_mask"].shape[0] for b in batches) / len(steps)
        print(f"{label:<18} {1 - real / total:>8.1%} {rows:>9.1f}")


def check_sync_table(args: argparse.Namespace, cfg_overrides: list[str]) -> None:
    """steps/s of ``train_step`` with the finiteness check deferred (on the device) and read on
    the host each step, alternating over ``args.repeats``, and the largest loss difference."""
    from crossalign.objectives.objective_set import ObjectiveSet
    from crossalign.training.setup import build_optimizer, build_schedule
    from crossalign.training.step import TrainState, train_step

    cfg, setup, steps = batches_for(cfg_overrides)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    start = {k: v.clone() for k, v in setup.model.state_dict().items()}
    print(f"\nfiniteness check, {len(steps)} steps of MLM+TLM on {device}")
    head = f"{'run':>3} {'deferred steps/s':>16} {'host steps/s':>12} {'ratio':>6}"
    print(f"{head} {'max |Δloss|':>11}")
    ratios = []
    for r in range(args.repeats):
        rate, losses = {}, {}
        for defer in (True, False):
            setup.model.load_state_dict(start)
            torch.manual_seed(cfg.train.seed)  # the same dropout masks in both
            module = ObjectiveSet(setup.model, setup.objectives).to(device)
            optimizer = build_optimizer(module, cfg)
            ts = TrainState(Accelerator(cpu=device.type == "cpu"), module, optimizer,
                            build_schedule(optimizer, cfg), setup.objectives, setup.weights,
                            max_grad_norm=cfg.train.max_grad_norm, defer_checks=defer)  # fmt: skip
            out = []
            t0 = time.perf_counter()
            for k, batches in enumerate(steps):
                out.append(train_step(ts, [batches], k + 1).loss)
            losses[defer] = torch.stack(out).cpu()  # the one wait for the device
            rate[defer] = len(steps) / (time.perf_counter() - t0)
        ratios.append(rate[True] / rate[False])
        diff = float((losses[True] - losses[False]).abs().max())
        print(f"{r:>3} {rate[True]:>16.2f} {rate[False]:>12.2f} {ratios[-1]:>6.3f} {diff:>11.2e}")
    print(f"median deferred/host steps/s: {statistics.median(ratios):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="a built corpus (crossalign data bible); default: fixture")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--steps", type=int, default=20, help="N: runs of N and 2N steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both loops")
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES,
                        help="which tables to print (default: all)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = {"MLM": "[{name: mlm}]", "MLM+TLM": "[{name: mlm}, {name: tlm}]"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # Train the tokenizer once; both loops then load it.
        base = load_config(None, overrides(args, settings["MLM"], tmp / "tok", None))
        from crossalign.data.store.prepare import resolve_sources, tokenizer_sample
        from crossalign.data.tokenizer import train_tokenizer_on

        tc = base.tokenizer
        sample = tokenizer_sample(resolve_sources(base.data), tc.alpha, tc.max_sentences, 0)
        train_tokenizer_on(sample, tc).save_pretrained(tmp / "tokenizer")
        print(
            f"preset {args.preset}, batch {args.batch_size} x {args.max_length} tokens, "
            f"steps {args.steps}..{2 * args.steps}, {args.threads} thread(s)"
        )
        if "throughput" in args.tables:
            throughput_table(args, settings, tmp)
        mixed = settings["MLM+TLM"]
        if "sync" in args.tables:
            sync_runs = overrides(args, mixed, tmp / "sync", tmp / "tokenizer", args.steps)
            check_sync_table(args, sync_runs)
        if "padding" in args.tables:
            padding_table(args, tmp)


def throughput_table(args: argparse.Namespace, settings: dict[str, str], tmp: Path) -> None:
    """crossalign's loop vs the bare loop, per setting: tokens/s by wall and CPU time of the
    N..2N steps, alternating over ``args.repeats``, and the median ratios."""
    print(
        f"{'setting':<8} {'run':>3} {'xa tok/s':>9} {'bare tok/s':>10} {'wall ratio':>10} "
        f"{'xa tok/cpu-s':>12} {'bare tok/cpu-s':>14} {'cpu ratio':>9}"
    )
    for label, objectives in settings.items():
        wall_ratios, cpu_ratios = [], []
        for r in range(args.repeats):
            runs = {}
            for steps in (args.steps, 2 * args.steps):
                xa_dir = tmp / f"{label}-{r}-{steps}"
                runs["xa", steps] = crossalign_run(
                    overrides(args, objectives, xa_dir, tmp / "tokenizer", steps)
                )
                runs["bare", steps] = bare_run(
                    overrides(args, objectives, tmp / "bare", tmp / "tokenizer", steps)
                )
            n, n2 = args.steps, 2 * args.steps
            tokens = runs["bare", n2][2] - runs["bare", n][2]
            xa = [runs["xa", n2][k] - runs["xa", n][k] for k in (0, 1)]
            bare = [runs["bare", n2][k] - runs["bare", n][k] for k in (0, 1)]
            wall_ratios.append(bare[0] / xa[0])
            cpu_ratios.append(bare[1] / xa[1])
            print(
                f"{label:<8} {r:>3} {tokens / xa[0]:>9.0f} {tokens / bare[0]:>10.0f} "
                f"{wall_ratios[-1]:>10.3f} {tokens / xa[1]:>12.0f} {tokens / bare[1]:>14.0f} "
                f"{cpu_ratios[-1]:>9.3f}"
            )
        wall, cpu = statistics.median(wall_ratios), statistics.median(cpu_ratios)
        print(f"{label:<8} median crossalign/bare throughput: wall {wall:.3f}, CPU {cpu:.3f}")


if __name__ == "__main__":
    main()
