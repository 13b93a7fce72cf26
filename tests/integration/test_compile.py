"""``train.compile``: the compiled step gives the eager losses, and nothing recompiles after
warm-up. The default suite captures graphs with the aot_eager backend (fast to compile); the
slow test generates inductor kernels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossalign.cli import main

from .conftest import tiny_overrides


def logged(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "loss" in r]


def eager_and_compiled(
    tmp_path: Path, backend: str, steps: int, **extra: object
) -> tuple[list, list]:
    # fp32: under bf16 autocast (precision auto on a CPU with bf16) compiled kernels round
    # differently from eager ones
    common = {"train.steps": steps, "train.save_every": 0, "train.log_every": 4,
              "train.precision": "'no'", "data.valid_mono": "{}", "data.valid_parallel": "{}",
              **extra}  # fmt: skip
    assert main(["train", *tiny_overrides(tmp_path / "eager", **common)]) == 0
    compiled = {**common, "train.compile": "true", "train.compile_backend": backend}
    assert main(["train", *tiny_overrides(tmp_path / "compiled", **compiled)]) == 0
    return logged(tmp_path / "eager"), logged(tmp_path / "compiled")


def test_compiled_losses_equal_eager_and_nothing_recompiles_after_warm_up(tmp_path):
    eager, compiled = eager_and_compiled(tmp_path, "aot_eager", 20)
    assert [r["step"] for r in eager] == [r["step"] for r in compiled]
    for e, c in zip(eager, compiled):
        assert c["loss"] == pytest.approx(e["loss"], rel=1e-5, abs=1e-6), (e["step"], e, c)
    graphs = [r["compile/graphs"] for r in compiled]
    # MLM blocks, TLM pairs of varying length and masked positions of varying number: the
    # graphs of the first steps (one recompilation to dynamic shapes each), then no more
    assert graphs[0] > 0 and len(set(graphs[2:])) == 1, graphs


@pytest.mark.slow
def test_inductor_losses_equal_eager_over_50_steps(tmp_path):
    # without dropout: inductor draws its own dropout masks (another RNG than eager's)
    eager, compiled = eager_and_compiled(tmp_path, "inductor", 50, **{"model.dropout": 0.0})
    for e, c in zip(eager, compiled):
        assert c["loss"] == pytest.approx(e["loss"], rel=1e-4), (e["step"], e, c)
    graphs = [r["compile/graphs"] for r in compiled]
    assert len(set(graphs[2:])) == 1, graphs
