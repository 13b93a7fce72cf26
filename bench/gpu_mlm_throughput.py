"""GPU masked-LM training throughput: crossalign's loop vs the Hugging Face loop, side by side.

Both loops train the same model (``crossalign.models.build.build_model`` from one preset, no
language embeddings, the same seed) on the same text, at each sequence length of ``--seq``,
with the same optimisation: AdamW (lr 1e-4, betas (0.9, 0.98), weight decay 0.01 except on
biases and norms), linear warm-up and decay, gradient clipping at 1.0, one global batch per
step (no accumulation), ``--precision`` mixed precision through accelerate.

* ``hf``: the loop a user would otherwise write, after ``run_mlm_no_trainer.py``: a DataLoader
  (shuffled, ``--workers`` workers, pinned memory on CUDA) of packed blocks through
  ``DataCollatorForLanguageModeling(mlm_probability=0.15)`` (special-token masks precomputed
  as run_mlm's ``return_special_tokens_mask=True`` does), everything passed through
  ``accelerator.prepare``, then ``loss = model(**batch).loss``, ``accelerator.backward``,
  ``clip_grad_norm_``, optimizer and scheduler steps, ``zero_grad``. The blocks are packed
  like crossalign packs them, not like run_mlm's ``group_texts``: every line is tokenized
  without special tokens and followed by ``sep``, the stream is cut into ``seq - 2`` tokens
  and each piece is wrapped in ``cls ... sep`` (run_mlm would keep ``cls``/``sep`` around
  every line and none at block edges), so both loops see identical sequences; the final
  partial block is dropped, so every block is full. Time: ``--warmup`` untimed steps, then
  ``--steps`` steps between two ``torch.cuda.synchronize()``; tokens/s counts the real
  (attention-mask) tokens of the timed steps.
* ``crossalign``: ``crossalign.training.train`` in-process on the same text written to a
  temporary file (``data.mono={en: FILE}``, no held-out data, ``tokenizer.path``), with
  ``train.log_every`` = gcd(warmup, steps). Every ``metrics.jsonl`` line reports tokens/s
  since the previous line; the lines after step ``warmup`` up to ``warmup + steps`` each
  cover ``log_every`` steps of equal token count (full blocks), so their harmonic mean is
  total tokens ÷ total time of the timed steps. crossalign's clock is synchronised with the
  GPU at every log line (its finiteness check is read there, not every step). Set-up, the
  final checkpoint and the model export fall outside the window. ``xa-compile`` sets
  ``train.compile``; ``xa-tlm`` adds TLM with packed pairs (the text paired with itself).
* ``hf-compile``: the hf loop with the model ``torch.compile``d in place and PyTorch's fused
  AdamW (SDPA attention is transformers' default for BERT in both hf loops).

The text (``--text``, UTF-8, one sentence per line) is repeated in memory until one run of
``warmup + steps`` steps draws each block at most once.

MFU uses model FLOPs, the same formula for both loops (PaLM, appendix B): per token
6 × (non-embedding parameters) + 12 × layers × hidden × seq (attention) + 6 × hidden × vocab
(the tied output projection of the MLM head), i.e. the vocabulary head counted at every
position, as Hugging Face's ``BertForMaskedLM`` computes it. crossalign computes the head (its
transform and the vocabulary projection) only at the masked positions (~15% of the
non-special tokens); the "exec" column is crossalign's utilisation counting only the FLOPs
its loop really does (for the hf loop the two coincide). Peak: ``--peak-tflops`` (989: H100
SXM bf16 dense).

    PYTHONPATH=. python bench/gpu_mlm_throughput.py --text FILE --tokenizer DIR \\
        [--preset base] [--seq 128 512] [--batch 256 64] [--steps 50] [--warmup 10] \\
        [--loops hf hf-compile xa xa-compile xa-tlm xa-tlm-compile] [--workers 4]
        [--crossalign-workers K] [--out FILE.json]

CPU smoke test (slow; MFU meaningless there):

    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/gpu_mlm_throughput.py --text FILE \\
        --tokenizer DIR --preset tiny --seq 32 --batch 4 --steps 3 --warmup 1 --loops hf xa
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import io
import json
import math
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import transformers
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from transformers import AutoTokenizer, DataCollatorForLanguageModeling, get_scheduler

from crossalign.config import ModelConfig
from crossalign.models.build import build_model

LR, BETAS, WEIGHT_DECAY, MAX_GRAD_NORM, MLM_PROB, SEED = 1e-4, (0.9, 0.98), 0.01, 1.0, 0.15, 0


LOOPS = ("hf", "hf-compile", "xa", "xa-compile", "xa-tlm", "xa-tlm-compile")
"""The loops the benchmark can time (``--loops``)."""


def read_lines(path: Path) -> list[str]:
    """Non-empty stripped lines, as crossalign reads a ``data.mono`` file."""
    lines = [x.strip() for x in path.read_text(encoding="utf-8").splitlines()]
    lines = [x for x in lines if x]
    if not lines:
        raise SystemExit(f"{path}: no text")
    return lines


def token_stream(lines: list[str], tokenizer) -> np.ndarray:
    """Every line's ids (no special tokens), each followed by ``sep``, as one int32 array."""
    ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
    sep = tokenizer.sep_token_id
    return np.fromiter((t for s in ids for t in (*s, sep)), dtype=np.int32)


def pack(stream: np.ndarray, seq: int, cls_id: int, sep_id: int) -> np.ndarray:
    """Full blocks ``cls`` + ``seq - 2`` stream tokens + ``sep`` (the partial tail dropped)."""
    body = seq - 2
    n = len(stream) // body
    blocks = np.empty((n, seq), dtype=np.int32)
    blocks[:, 0] = cls_id
    blocks[:, 1:-1] = stream[: n * body].reshape(n, body)
    blocks[:, -1] = sep_id
    return blocks


class Blocks(torch.utils.data.Dataset):
    """Rows as run_mlm's tokenized dataset yields them: lists of ids, mask and special mask."""

    def __init__(self, blocks: np.ndarray, special_ids: list[int]) -> None:
        self.blocks = blocks
        self.special = np.isin(blocks, special_ids).astype(np.int8)

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        ids = self.blocks[i].tolist()
        return {
            "input_ids": ids,
            "attention_mask": [1] * len(ids),
            "special_tokens_mask": self.special[i].tolist(),
        }


def make_model(preset: str, tokenizer, seq: int) -> nn.Module:
    """The model exactly as crossalign's trainer builds it for ``data.mono={en: ...}``."""
    cfg = ModelConfig(preset=preset, language_embeddings=False)
    return build_model(cfg, len(tokenizer), tokenizer.pad_token_id, ["en"], seq)


def flops_per_token(model: nn.Module, seq: int, masked: float) -> tuple[float, float]:
    """(model FLOPs per token, FLOPs per token crossalign's loop executes) for training.

    Model FLOPs: 6 × non-embedding parameters + 12 × layers × hidden × seq + 6 × hidden ×
    vocab (vocabulary projection at every position). crossalign runs the head (transform and
    projection) only at the ``masked`` fraction of positions.
    """
    cfg = model.config
    layers, hidden, vocab = cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size
    embedding = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    out = model.get_output_embeddings()
    if out is not None:
        embedding.add(id(out.weight))
    non_embedding = sum(p.numel() for p in model.parameters() if id(p) not in embedding)
    head = getattr(model, "cls", None) or getattr(model, "lm_head", None)
    head_params = sum(p.numel() for p in head.parameters() if id(p) not in embedding)
    attention = 12 * layers * hidden * seq
    projection = 6 * hidden * vocab
    full = 6 * non_embedding + attention + projection
    executed = full - (1.0 - masked) * (6 * head_params + projection)
    return float(full), float(executed)


def cycle(loader):
    """Batches of ``loader``, epoch after epoch."""
    while True:
        yield from loader


def reset_accelerate() -> None:
    """Forget accelerate's process-wide state between runs (the hf loop leaves its prepared
    DataLoader registered as active when it stops mid-epoch)."""
    from accelerate.state import AcceleratorState, GradientState

    with contextlib.suppress(AttributeError):
        GradientState._reset_state()
        AcceleratorState._reset_state(reset_partial_state=True)


def release() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float:
    """Peak GPU memory allocated since the last ``release`` (GiB; 0 on CPU)."""
    if not torch.cuda.is_available():
        return 0.0
    return torch.cuda.max_memory_allocated() / 2**30


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def hf_run(
    args, tokenizer, stream: np.ndarray, seq: int, batch: int, compiled: bool = False
) -> dict:
    """The run_mlm_no_trainer-style loop; tokens/s over the timed steps. ``compiled``: the
    same loop with the model torch.compiled and PyTorch's fused AdamW."""
    warmup, steps = args.warmup, args.steps
    set_seed(SEED)
    accelerator = Accelerator(mixed_precision=args.precision, cpu=not torch.cuda.is_available())
    blocks = pack(stream, seq, tokenizer.cls_token_id, tokenizer.sep_token_id)
    data = Blocks(blocks, tokenizer.all_special_ids)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=MLM_PROB)
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=batch,
        shuffle=True,
        collate_fn=collator,
        num_workers=args.workers,
        pin_memory=torch.cuda.is_available(),
    )
    model = make_model(args.preset, tokenizer, seq)
    if compiled:
        model.compile()  # in place; SDPA is transformers' default attention for BERT
    no_decay = ["bias", "LayerNorm.weight", "layer_norm.weight"]
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not any(x in n for x in no_decay)],
            "weight_decay": WEIGHT_DECAY,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(x in n for x in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(groups, lr=LR, betas=BETAS, fused=compiled or None)
    scheduler = get_scheduler("linear", optimizer, warmup, warmup + steps)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # quiet the fork warning in the workers
    try:
        model.train()
        it = cycle(loader)
        tokens = torch.zeros((), dtype=torch.long, device=accelerator.device)
        start = time.perf_counter()
        for step in range(warmup + steps):
            if step == warmup:
                sync()
                start = time.perf_counter()
            b = next(it)
            with accelerator.accumulate(model):
                loss = model(**b).loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if step >= warmup:
                tokens += b["attention_mask"].sum()
        sync()
        seconds = time.perf_counter() - start
        result = {
            "tokens_per_s": tokens.item() / seconds,
            "seconds": seconds,
            "final_loss": loss.item(),
            "peak_gib": peak_gib(),
        }
        it.close()
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous
    del model, optimizer, scheduler, loader, accelerator, it, b, loss
    reset_accelerate()
    release()
    return result


def crossalign_run(
    args,
    text: Path,
    run_dir: Path,
    seq: int,
    batch: int,
    compiled: bool = False,
    tlm: bool = False,
) -> dict:
    """``crossalign.training.train`` in-process; tokens/s from its metrics.jsonl.
    ``compiled``: ``train.compile``; ``tlm``: MLM + TLM, TLM's pairs packed (the text paired
    with itself: the same token count per pair as a translation of equal length)."""
    from crossalign.config import DataConfig, load_config
    from crossalign.run_dir import read_metrics
    from crossalign.training.loop import train

    warmup, steps = args.warmup, args.steps
    log_every = math.gcd(warmup, steps)
    overrides = [
        f"run_dir={json.dumps(str(run_dir))}",
        f"model.preset={args.preset}",
        "model.language_embeddings=false",
        f"tokenizer.path={json.dumps(str(Path(args.tokenizer).resolve()))}",
        f"data.mono={json.dumps({'en': str(text)})}",
        "data.valid_mono={}",
        "data.valid_parallel={}",
        f"data.max_length={seq}",
        "objectives=[{name: mlm}, {name: tlm, packing: true}]"
        if tlm
        else "objectives=[{name: mlm}]",
        f"train.steps={warmup + steps}",
        f"train.batch_size={batch}",
        "train.grad_accum=1",
        f"train.warmup_steps={warmup}",
        f"train.lr={LR}",
        f"train.betas=[{BETAS[0]}, {BETAS[1]}]",
        f"train.weight_decay={WEIGHT_DECAY}",
        f"train.max_grad_norm={MAX_GRAD_NORM}",
        f"train.precision='{args.precision}'",  # quoted: YAML reads a bare no as false
        f"train.seed={SEED}",
        f"train.log_every={log_every}",
        "train.eval_every=0",
        "train.save_every=0",
        "train.keep_checkpoints=1",
    ]
    if "cache_dir" in {f.name for f in dataclasses.fields(DataConfig)}:
        # keep the token store crossalign builds from the text out of the user's cache
        overrides.append(f"data.cache_dir={json.dumps(str(run_dir.parent / 'stores'))}")
    if args.crossalign_workers is not None:
        overrides.append(f"data.num_workers={args.crossalign_workers}")
    if tlm:
        overrides.append(f"data.parallel={json.dumps({'en-de': [str(text), str(text)]})}")
    if compiled:
        overrides.append("train.compile=true")
    cfg = load_config(None, overrides)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            train(cfg)
    except BaseException:
        print(captured.getvalue()[-4000:])
        raise
    records = read_metrics(run_dir)
    timed = [r for r in records if "loss" in r and warmup < r["step"] <= warmup + steps]
    if len(timed) != steps // log_every:
        raise SystemExit(
            f"crossalign: expected {steps // log_every} metrics lines after step {warmup}, "
            f"got {len(timed)} in {run_dir / 'metrics.jsonl'}"
        )
    tps = [r["tokens_per_s"] for r in timed]
    harmonic = len(tps) / sum(1.0 / x for x in tps)
    result = {
        "tokens_per_s": harmonic,
        "seconds": sum(log_every * seq * batch / x for x in tps),  # full blocks
        "final_loss": timed[-1]["loss"],
        "log_every": log_every,
        "windows": tps,
        "peak_gib": peak_gib(),
    }
    reset_accelerate()
    release()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", required=True, type=Path, help="UTF-8, one sentence a line")
    parser.add_argument("--tokenizer", required=True, help="a saved Hugging Face fast tokenizer")
    parser.add_argument("--preset", default="base", help="crossalign preset: tiny, small, base")
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument(
        "--batch", type=int, nargs="+", help="global batch per --seq (default 32768 // seq)"
    )
    parser.add_argument("--steps", type=int, default=50, help="timed steps")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    parser.add_argument(
        "--precision",
        choices=["no", "bf16", "fp16"],
        default="bf16" if torch.cuda.is_available() else "no",
    )
    parser.add_argument("--workers", type=int, default=4, help="DataLoader workers (hf loop)")
    parser.add_argument(
        "--crossalign-workers",
        type=int,
        default=None,
        help="pass data.num_workers=K to crossalign (default: leave it unset)",
    )
    parser.add_argument(
        "--loops", nargs="+", choices=list(LOOPS), default=list(LOOPS),
        help="hf: the run_mlm-style loop; hf-compile: it with torch.compile and fused AdamW; "
        "xa: crossalign; xa-compile: train.compile; xa-tlm(-compile): MLM + packed TLM",
    )  # fmt: skip
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    batches = args.batch or [max(1, 32768 // s) for s in args.seq]
    if len(batches) != len(args.seq):
        parser.error(f"--batch needs one value per --seq ({len(args.seq)})")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    loops = args.loops

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    for name in ("pad_token", "mask_token", "cls_token", "sep_token"):
        if getattr(tokenizer, name) is None:
            raise SystemExit(f"tokenizer {args.tokenizer} has no {name}")
    lines = read_lines(args.text)
    stream = token_stream(lines, tokenizer)
    need = max((args.warmup + args.steps) * b * (s - 2) for s, b in zip(args.seq, batches))
    repeats = math.ceil((need + max(args.seq)) / len(stream))
    stream = np.tile(stream, repeats)

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(
        f"device {device}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"precision {args.precision}, preset {args.preset}, steps {args.steps} timed after "
        f"{args.warmup}, text {len(lines)} lines × {repeats} = {len(stream)} tokens"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu_mlm_") as tmp:
        tmp = Path(tmp)
        text = tmp / "en.txt"
        if any(loop.startswith("xa") for loop in loops):
            with open(text, "w", encoding="utf-8") as f:
                for _ in range(repeats):
                    f.write("\n".join(lines) + "\n")
        for seq, batch in zip(args.seq, batches):
            sample = pack(stream, seq, tokenizer.cls_token_id, tokenizer.sep_token_id)[:1000]
            masked = MLM_PROB * float(np.mean(~np.isin(sample, tokenizer.all_special_ids)))
            set_seed(SEED)
            full, executed = flops_per_token(make_model(args.preset, tokenizer, seq), seq, masked)
            row = {"seq": seq, "batch": batch, "model_flops_per_token": full}
            row["crossalign_executed_flops_per_token"] = executed
            for loop in loops:
                compiled, tlm = loop.endswith("-compile"), "-tlm" in loop
                if loop.startswith("hf"):
                    row[loop] = hf_run(args, tokenizer, stream, seq, batch, compiled)
                else:
                    run_dir = tmp / f"run-{seq}-{loop}"
                    row[loop] = crossalign_run(args, text, run_dir, seq, batch, compiled, tlm)
                tps = row[loop]["tokens_per_s"]
                row[loop]["mfu"] = full * tps / (args.peak_tflops * 1e12)
                if loop.startswith("xa"):
                    row[loop]["executed_utilisation"] = executed * tps / (args.peak_tflops * 1e12)
                if "hf" in row:
                    row[loop]["vs_hf"] = tps / row["hf"]["tokens_per_s"]
            rows.append(row)

    print(f"{'seq':>5} {'batch':>5} {'loop':<15} {'tok/s':>10} {'vs hf':>6} {'MFU':>6} "
          f"{'exec':>6} {'peak GiB':>8} {'loss':>7}")  # fmt: skip
    for row in rows:
        for loop in loops:
            r = row[loop]
            vs = format(r["vs_hf"], ".3f") if "vs_hf" in r else "-"
            ex = format(r["executed_utilisation"], ".1%") if "executed_utilisation" in r else "-"
            print(f"{row['seq']:>5} {row['batch']:>5} {loop:<15} {r['tokens_per_s']:>10.0f} "
                  f"{vs:>6} {r['mfu']:>6.1%} {ex:>6} {r['peak_gib']:>8.1f} "
                  f"{r['final_loss']:>7.3f}")  # fmt: skip
    print(
        f"MFU: model FLOPs (vocabulary head at every position) ÷ {args.peak_tflops:g} TFLOP/s; "
        "exec: FLOPs crossalign executes (head at masked positions only)"
    )
    if args.out:
        result = {
            "device": device,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "precision": args.precision,
            "preset": args.preset,
            "steps": args.steps,
            "warmup": args.warmup,
            "workers": args.workers,
            "crossalign_workers": args.crossalign_workers,
            "peak_tflops": args.peak_tflops,
            "text_tokens": int(len(stream)),
            "rows": rows,
        }
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
