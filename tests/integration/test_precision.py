"""``train.precision``: bf16 autocast trains on a CPU (``auto`` chooses it on CPUs with bf16
instructions), and held-out figures stay fp32 whatever the training precision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.evals.results import read_results

from .conftest import tiny_overrides


def held_out(run: Path) -> dict[str, float]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in lines if "valid/mlm_ppl" in r][-1]
    return {k.removeprefix("valid/"): v for k, v in last.items() if k.startswith("valid/")}


def test_bf16_trains_and_logs_fp32_held_out_figures(tmp_path):
    run = tmp_path / "bf16"
    extra = {"train.precision": "bf16", "train.steps": 4, "train.eval_every": 4}
    assert main(["train", *tiny_overrides(run, **extra)]) == 0
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss"] == r["loss"] for r in lines if "loss" in r)  # finite, not NaN
    logged = held_out(run)
    # computed again without autocast: the same fp32 figures (bf16 ones differ by ~1e-4)
    assert main(["eval", "perplexity", "--model", str(run / "model"), "--source", "compute"]) == 0
    computed = [r for r in read_results(run) if r.options.get("source") == "compute"][-1]
    assert computed.metrics == pytest.approx(logged, rel=1e-6)
