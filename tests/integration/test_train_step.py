"""``train_step`` is the training loop's step: replayed over the batches ``train`` drew, from
the same starting model, it reproduces ``train``'s logged metrics exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from transformers import get_linear_schedule_with_warmup

import crossalign.training.loop as loop_module
from crossalign.config import load_config
from crossalign.objectives.objective_set import ObjectiveSet, raw_batch
from crossalign.run_dir import read_metrics
from crossalign.training.log_stats import LogStats
from crossalign.training.loop import train
from crossalign.training.setup import build_optimizer, build_setup
from crossalign.training.step import StepOutcome, TrainState, train_step

from .conftest import tiny_overrides

STEPS = 4


def test_train_step_loop_reproduces_train(tmp_path: Path, monkeypatch) -> None:
    extra = {"train.steps": STEPS, "train.save_every": 0, "data.valid_mono": "{}"}
    cfg = load_config(None, tiny_overrides(tmp_path / "run", **extra))
    drawn: list[tuple[list, int]] = []
    real_step = loop_module.train_step

    def recording_step(ts: TrainState, micro: list, step: int) -> StepOutcome:
        drawn.append(([{n: dict(b) for n, b in m.items()} for m in micro], step))
        return real_step(ts, micro, step)

    monkeypatch.setattr(loop_module, "train_step", recording_step)
    train(cfg)
    logged = [r for r in read_metrics(tmp_path / "run") if "loss" in r]
    assert [step for _, step in drawn] == [r["step"] for r in logged] == [1, 2, 3, 4]

    # the same starting model, optimizer and schedule as the run, then train_step by hand
    again = load_config(
        None,
        tiny_overrides(
            tmp_path / "again", **extra, **{"tokenizer.path": tmp_path / "run" / "tokenizer"}
        ),
    )
    set_seed(again.train.seed)
    accelerator = Accelerator(cpu=True)
    setup = build_setup(again, None, accelerator)
    module = ObjectiveSet(setup.model, setup.objectives)
    optimizer = build_optimizer(module, again)
    tc = again.train
    scheduler = get_linear_schedule_with_warmup(optimizer, tc.warmup_steps, tc.steps)
    module, optimizer = accelerator.prepare(module, optimizer)
    module.train()
    ts = TrainState.of_run(accelerator, module, optimizer, scheduler, setup, again)
    stats = LogStats(setup.objectives, setup.weights)
    for (micro, step), expected in zip(drawn, logged):
        outcome = train_step(ts, micro, step)
        assert outcome.finite and outcome.tokens > 0
        assert len(outcome.results) == len(micro) == tc.grad_accum
        for results in outcome.results:
            stats.add(results, 1.0 / tc.grad_accum)
        stats.steps += 1
        record = {"lr": scheduler.get_last_lr()[0], **stats.flush(accelerator)}
        assert record == {k: expected[k] for k in record}  # bit-identical, not approximately
        assert record["loss"] == pytest.approx(float(outcome.loss), rel=1e-5)


def one_step(tmp_path: Path):
    """A tiny run's step state and one micro-batch of MLM + TLM."""
    cfg = load_config(None, tiny_overrides(tmp_path / "run", **{"train.steps": 1}))
    set_seed(cfg.train.seed)
    accelerator = Accelerator(cpu=True)
    setup = build_setup(cfg, None, accelerator)
    module = ObjectiveSet(setup.model, setup.objectives)
    optimizer = build_optimizer(module, cfg)
    ts = TrainState(accelerator, module, optimizer, None, setup.objectives, setup.weights)
    mono, pairs = setup.data.mono["en"], setup.data.parallel["en-es"]
    raws = {"mlm": raw_batch("mono", "en", mono, np.arange(2)),
            "tlm": raw_batch("parallel", "en-es", pairs, np.arange(4))}  # fmt: skip
    micro = [{n: setup.objectives[n].collate(r, torch.Generator()) for n, r in raws.items()}]
    return ts, setup, micro


def test_non_finite_step_is_not_taken(tmp_path: Path) -> None:
    ts, setup, micro = one_step(tmp_path)
    module, optimizer = ts.module, ts.optimizer
    with torch.no_grad():
        setup.model.get_input_embeddings().weight[5:] = float("nan")
    before = [p.detach().clone() for p in module.parameters()]
    outcome = train_step(ts, micro, 1)
    assert outcome.deferred and not bool(outcome.ok)  # the fused AdamW skipped it itself
    assert not outcome.finite
    assert outcome.problem.startswith("loss became nan at step 1 (gradient norm ")
    steps = [float(state["step"]) for state in optimizer.state.values()]
    assert steps and all(step == 0 for step in steps)  # nor did its moments or step count move
    after = [p.detach() for p in module.parameters()]
    assert all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in zip(before, after))


def test_a_deferred_step_never_reads_its_check(tmp_path: Path, monkeypatch) -> None:
    """The steady-state step leaves the finiteness check on the device: nothing in
    ``train_step`` reads it (which would wait for a GPU), and an optimizer restored with
    ``fused: None`` groups (a checkpoint of a non-fused optimizer) is checked on the host."""
    from crossalign.training import step as step_module

    ts, _, micro = one_step(tmp_path)
    optimizer = ts.optimizer

    def read(self):
        raise AssertionError("the step read its finiteness check")

    with monkeypatch.context() as m:
        m.setattr(step_module.StepOutcome, "problem", property(read))
        outcome = train_step(ts, micro, 1)
    assert outcome.deferred and outcome.finite
    assert step_module.skips_on_device(optimizer)
    for group in optimizer.param_groups:
        group["fused"] = None
    assert not step_module.skips_on_device(optimizer)
