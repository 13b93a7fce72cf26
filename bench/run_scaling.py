"""Many small runs on one machine: aggregate training tokens/s of N concurrent crossalign runs.

The studies' models (4 x 128 ... 8 x 512) leave a large GPU idle, and on a few CPU cores one
small model's step does not keep every core busy. This starts N independent ``crossalign
train`` processes at once (each its own seed and run directory, the same config), lets them
finish, and sums their steady-state tokens/s: each run's harmonic mean of the
``metrics.jsonl`` windows after ``--warmup`` steps. Each process gets ``cores // N`` CPU
threads, as ``crossalign compare --jobs N`` gives its seed processes
(``study.parallel.child_environment``). On a GPU run it under CUDA MPS
(``nvidia-cuda-mps-control -d``, as ``bench/gpu_window.sh`` does) so the processes share the
GPU's SMs instead of time-slicing it. The ratio column is aggregate ÷ one process's.

    python bench/run_scaling.py --text FILE --tokenizer DIR [--processes 1 4 8 16] \\
        [--layers 4 --hidden 128] [--batch 128 --seq 128] [--steps 300 --warmup 100] [--out F]
    python bench/run_scaling.py --config RUN.yaml --processes 1 2 --steps 40 --warmup 10 \\
        --log-every 10      # a study run's own config (e.g. a run directory's config.yaml)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crossalign.study.parallel import child_environment

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def run_overrides(args: argparse.Namespace, run_dir: Path, seed: int) -> list[str]:
    """``crossalign train`` arguments of one run: ``--config``'s run with this run directory,
    seed and length, or else one small MLM run on ``--text``."""
    if args.config:
        return ["--config", str(args.config), f"run_dir={run_dir}", f"train.steps={args.steps}",
                f"train.log_every={args.log_every}", "train.save_every=0", "train.eval_every=0",
                f"train.seed={seed}"]  # fmt: skip
    heads = max(1, args.hidden // 32)
    model = (f"{{num_hidden_layers: {args.layers}, hidden_size: {args.hidden}, "
             f"num_attention_heads: {heads}, intermediate_size: {4 * args.hidden}}}")  # fmt: skip
    return [
        f"run_dir={run_dir}",
        "model.preset=small",
        f"model.hf_overrides={model}",
        "model.language_embeddings=false",
        f"tokenizer.path={Path(args.tokenizer).resolve()}",
        f"data.mono={json.dumps({'en': str(Path(args.text).resolve())})}",
        "data.valid_mono={}",
        f"data.max_length={args.seq}",
        f"data.cache_dir={run_dir.parent / 'stores'}",
        "objectives=[{name: mlm}]",
        f"train.steps={args.steps}",
        f"train.batch_size={args.batch}",
        "train.lr=0.001",
        "train.warmup_steps=10",
        f"train.log_every={args.log_every}",
        "train.save_every=0",
        f"train.seed={seed}",
    ]


def steady_tokens_per_s(run_dir: Path, warmup: int) -> float:
    """Harmonic mean of a run's tokens/s windows after ``warmup`` steps (equal windows)."""
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    tps = [r["tokens_per_s"] for r in map(json.loads, lines) if "loss" in r and r["step"] > warmup]
    if not tps:
        raise SystemExit(f"{run_dir}: no metrics line after step {warmup}; raise --steps")
    return len(tps) / sum(1.0 / x for x in tps)


def measure(args: argparse.Namespace, n: int, tmp: Path) -> dict:
    """Start ``n`` runs at once, wait for all; their summed steady tokens/s and wall time."""
    dirs = [tmp / f"p{n}-{i}" for i in range(n)]
    procs = []
    env = child_environment(n)
    start = time.perf_counter()
    for i, run_dir in enumerate(dirs):
        cmd = [sys.executable, "-m", "crossalign", "train", *run_overrides(args, run_dir, i)]
        log = open(tmp / f"p{n}-{i}.log", "w")  # noqa: SIM115 (closed with the process)
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    for proc, log in procs:
        proc.wait()
        log.close()
    wall = time.perf_counter() - start
    failed = [str(d) for (p, _), d in zip(procs, dirs) if p.returncode != 0]
    if failed:
        raise SystemExit(f"{len(failed)} of {n} runs failed; see the logs beside {failed[0]}")
    per = [steady_tokens_per_s(d, args.warmup) for d in dirs]
    return {"processes": n, "threads_each": int(env["OMP_NUM_THREADS"]),
            "aggregate_tokens_per_s": sum(per), "per_process": per, "wall_s": wall}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="UTF-8 text, one sentence a line (with --tokenizer)")
    source.add_argument("--config", type=Path, help="a run config to train as it is")
    parser.add_argument("--tokenizer", help="a saved fast tokenizer (with --text)")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=100, help="steps left out of the rate")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    if args.text and not args.tokenizer:
        parser.error("--text needs --tokenizer")
    rows = []
    with tempfile.TemporaryDirectory(prefix="run_scaling_") as tmp:
        tmp = Path(tmp)
        # build the token store once, untimed, so the measured processes only open it
        warm = [
            sys.executable,
            "-m",
            "crossalign",
            "train",
            *run_overrides(argparse.Namespace(**{**vars(args), "steps": 1}), tmp / "w", 0),
        ]
        subprocess.run(warm, check=True, capture_output=True)  # fmt: skip
        what = args.config or f"{args.layers} x {args.hidden}, batch {args.batch} x {args.seq}"
        print(f"{what}, {args.steps} steps (rate after {args.warmup})")
        print(f"{'processes':>9} {'threads':>7} {'aggregate tok/s':>15} {'per process':>11} "
              f"{'vs 1':>6}")  # fmt: skip
        for n in args.processes:
            row = measure(args, n, tmp)
            rows.append(row)
            one = rows[0]["aggregate_tokens_per_s"] / rows[0]["processes"]
            row["vs_one"] = row["aggregate_tokens_per_s"] / one
            print(f"{n:>9} {row['threads_each']:>7} {row['aggregate_tokens_per_s']:>15.0f} "
                  f"{row['aggregate_tokens_per_s'] / n:>11.0f} {row['vs_one']:>6.2f}")  # fmt: skip
    if args.out:
        keys = ("config", "steps") if args.config else ("layers", "hidden", "batch", "seq", "steps")
        meta = {k: str(getattr(args, k)) if k == "config" else getattr(args, k) for k in keys}
        args.out.write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
