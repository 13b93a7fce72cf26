"""The quickstart configuration on the CPU, today's code against an earlier commit, side by side.

Each tree trains its own ``configs/quickstart.yaml`` (MLM + TLM on the Bible, 4 x 256; today's
packs the TLM pairs) for ``--steps`` steps from the same seed, one after the other and
alternating over ``--repeats``; the rate
of each is the harmonic mean of its ``metrics.jsonl`` tokens/s windows after ``--warmup``
steps (set-up, tokenizer training and the final save fall outside), and the loss curves are
compared line by line. The earlier commit is checked out into a temporary git worktree and
run with ``PYTHONPATH`` pointing at it. ``--new`` adds overrides for today's code only (e.g.
``train.precision=bf16``). Run it alone on the machine.

    python bench/cpu_speedup.py --baseline REV [--steps 120] [--warmup 40] [--repeats 2] \\
        [--new train.precision=bf16 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train(tree: Path, run_dir: Path, args: argparse.Namespace, extra: list[str]) -> list[dict]:
    """``crossalign train`` of the quickstart config with ``tree``'s code; its loss lines."""
    overrides = [
        f"run_dir={run_dir}",
        f"train.steps={args.steps}",
        f"train.log_every={args.log_every}",
        "train.save_every=0",
        "data.max_valid_sequences=8",
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    config = tree / "configs" / "quickstart.yaml"  # each tree's own quickstart
    cmd = [sys.executable, "-m", "crossalign", "train", "-c", str(config)]
    subprocess.run([*cmd, *overrides], cwd=ROOT, env=env, check=True, capture_output=True)
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if "loss" in r]


def rate(lines: list[dict], warmup: int) -> float:
    """Harmonic mean of the tokens/s windows after ``warmup`` steps."""
    tps = [r["tokens_per_s"] for r in lines if r["step"] > warmup]
    return len(tps) / sum(1.0 / x for x in tps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the earlier commit (any git rev)")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--warmup", type=int, default=40, help="steps left out of the rate")
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--new", nargs="*", default=[], help="overrides for today's code only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cpu_speedup_") as tmp:
        tmp = Path(tmp)
        old = tmp / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.baseline],
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        try:
            ratios = []
            print(f"{'run':>3} {'baseline tok/s':>14} {'today tok/s':>11} {'ratio':>6} "
                  f"{'max |Δloss|':>11}")  # fmt: skip
            for r in range(args.repeats):
                base = train(old, tmp / f"old-{r}", args, [])
                new = train(ROOT, tmp / f"new-{r}", args, args.new)
                ratios.append(rate(new, args.warmup) / rate(base, args.warmup))
                diff = max(abs(a["loss"] - b["loss"]) for a, b in zip(base, new))
                print(f"{r:>3} {rate(base, args.warmup):>14.0f} {rate(new, args.warmup):>11.0f} "
                      f"{ratios[-1]:>6.3f} {diff:>11.2e}")  # fmt: skip
            print(f"median today/baseline tokens/s: {statistics.median(ratios):.3f}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                           check=False, capture_output=True)  # fmt: skip


if __name__ == "__main__":
    main()
