"""Gradient accumulation and data parallelism are the same optimisation as one big batch:
grad_accum 1 vs 4 vs 2 processes give the same gradients on the same global batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from tests.integration.grad_parity import WEIGHTS, build, gradients, split


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("mix", ["weighted", "pooled"])
def test_grad_accum_4_equals_one_batch(mix):
    accelerator = Accelerator(cpu=True)
    module, full = build()
    micro = split(full, 4)
    counts = [int(m["mlm"]["masked_index"].numel()) for m in micro]
    assert len(set(counts)) > 1  # the micro-batches predict different numbers of tokens
    assert_same(
        gradients(accelerator, module, micro, mix), gradients(accelerator, module, [full], mix)
    )


def test_averaging_micro_batch_means_would_differ():
    """The check above can fail: the plain mean of micro-batch means is another gradient."""
    module, full = build()
    module.zero_grad()
    for micro in split(full, 4):
        out = module(micro)
        (sum(WEIGHTS[n] * out[n][0] for n in WEIGHTS) / 4).backward()
    averaged = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    one = gradients(Accelerator(cpu=True), module, [full], "weighted")
    word = "model.bert.embeddings.word_embeddings.weight"
    assert not torch.allclose(averaged[word], one[word], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mix", ["weighted"])
def test_two_processes_equal_one_batch(tmp_path: Path, mix: str):
    pytest.importorskip("torch.distributed")
    out = tmp_path / "grads.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    worker = Path(__file__).with_name("grad_parity.py")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_port", "29517", str(worker), str(out), mix, "1",
    ]  # fmt: skip
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    module, full = build()
    saved = torch.load(out)
    assert saved["processes"] == 2
    assert_same(saved["grads"], gradients(Accelerator(cpu=True), module, [full], mix))
