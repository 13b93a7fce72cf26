"""A tiny run configuration on the hand-made en/es fixture (24 sentence pairs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"


def tiny_overrides(run_dir: Path, **extra: object) -> list[str]:
    """Overrides for a 2-layer, hidden-32 model on the fixture, MLM + TLM."""
    en, es = FIXTURES / "en.txt", FIXTURES / "es.txt"
    items = {
        "run_dir": str(run_dir),
        "model.preset": "tiny",
        "tokenizer.vocab_size": 200,
        "data.mono": f"{{en: {en}, es: {es}}}",
        "data.parallel": f"{{en-es: [{en}, {es}]}}",
        "data.valid_mono": f"{{en: {en}}}",
        "data.max_length": 32,
        "objectives": "[{name: mlm}, {name: tlm, weight: 0.5}]",
        "train.steps": 12,
        "train.batch_size": 8,
        "train.lr": 0.003,
        "train.warmup_steps": 2,
        "train.log_every": 1,
        "train.save_every": 6,
        # fp32 on every host: auto is bf16 autocast on CPUs with bf16 instructions (tested on
        # its own in test_precision.py)
        "train.precision": "'no'",
    }
    items.update(extra)
    return [f"{k}={v}" for k, v in items.items()]


@pytest.fixture
def tiny(tmp_path: Path):
    """A function giving tiny-run overrides under ``tmp_path``."""
    return lambda name="run", **extra: tiny_overrides(tmp_path / name, **extra)


def train_two_processes(args: list[str], port: int) -> None:
    """``crossalign train ARGS`` as 2 CPU processes under torch.distributed.run; asserts it
    succeeds."""
    pytest.importorskip("torch.distributed")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_port", str(port), "-m", "crossalign", "train", *args,
    ]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
