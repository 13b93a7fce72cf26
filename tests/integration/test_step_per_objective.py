"""``train.step_per_objective`` (XLM's one update per objective) against a hand-written loop
of separate SGD updates, and a scheduled UNMT run end to end: its learning rate counts the
updates, its logged means count the steps that trained each objective, and it resumes
identically."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from crossalign.cli import main
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.training.step import TrainState, train_step

from .grad_parity import build, split

LR = 0.1


def sgd_by_hand(module: ObjectiveSet, batches: dict, weights: dict[str, float]) -> None:
    """XLM's iteration: for each objective in turn (none of weight 0), its weighted loss,
    backward and one SGD update of the weights the previous update left."""
    for name, weight in weights.items():
        if weight == 0:
            continue
        loss = module({name: batches[name]})[name][0]
        (weight * loss).backward()
        with torch.no_grad():
            for p in module.parameters():
                if p.grad is not None:
                    p -= LR * p.grad
        module.zero_grad(set_to_none=True)


def summed_by_hand(module: ObjectiveSet, batches: dict, weights: dict[str, float]) -> None:
    """The default step: one SGD update on Σ weight · loss."""
    results = module(batches)
    sum(w * results[n][0] for n, w in weights.items()).backward()
    with torch.no_grad():
        for p in module.parameters():
            if p.grad is not None:
                p -= LR * p.grad
    module.zero_grad(set_to_none=True)


def close(a: ObjectiveSet, b: ObjectiveSet, atol: float = 1e-6) -> bool:
    return all(
        torch.allclose(p, q, atol=atol, rtol=0) for p, q in zip(a.parameters(), b.parameters())
    )


@pytest.mark.parametrize("grad_accum", [1, 4])
@pytest.mark.parametrize("tlm_weight", [0.5, 0.0])
def test_one_update_per_objective_equals_separate_sgd_steps(grad_accum, tlm_weight):
    module, full = build()
    weights = {"mlm": 1.0, "tlm": tlm_weight}
    by_hand, summed = copy.deepcopy(module), copy.deepcopy(module)
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda updates: 1.0)
    objectives = dict(module.objectives)
    ts = TrainState(Accelerator(cpu=True), module, optimizer, scheduler, objectives, weights)
    ts.step_per_objective = True
    outcome = train_step(ts, split(full, grad_accum), 1)

    sgd_by_hand(by_hand, full, weights)
    summed_by_hand(summed, full, weights)
    assert outcome.finite and len(outcome.results) == grad_accum
    assert close(module, by_hand)
    trained = [n for n, w in weights.items() if w]
    assert scheduler.last_epoch == len(trained)  # the schedule steps with every update
    assert outcome.skipped == tuple(n for n in weights if n not in trained)
    assert all(sorted(r) == trained for r in outcome.results)
    if len(trained) == 2:  # the oracle tells the two loops apart
        assert not close(module, summed, atol=1e-5)
    else:
        assert close(module, summed)


def records(run_dir: Path) -> dict[int, dict]:
    lines = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return {r["step"]: r for r in lines if "lr" in r}


UNMT = "[{name: dae, weight: '0:1,2:0'}, {name: bt}]"


def test_scheduled_unmt_run_counts_updates_and_resumes_identically(tiny, tmp_path):
    settings = {
        "objectives": UNMT,
        "train.step_per_objective": "true",
        "train.steps": 4,
        "train.warmup_steps": 2,
        "data.valid_mono": "{}",
    }
    assert main(["train", *tiny("every", **settings, **{"train.save_every": 0})]) == 0
    every = records(tmp_path / "every")
    # dae's weight after 0..3 steps: 1, 1/2, then 0 (its updates skipped in steps 3 and 4)
    assert [every[s]["weight/dae"] for s in (1, 2, 3, 4)] == [1.0, 0.5, 0.0, 0.0]
    assert "weight/bt" not in every[1]  # a constant weight is not logged
    assert "loss/dae" in every[2] and "loss/dae" not in every[3] and "loss/bt" in every[3]
    # linear decay over 4 steps × 2 objectives = 8 updates (2 warm-up); updates after each
    # step: 2, 4, 5, 6
    lrs = [every[s]["lr"] for s in (1, 2, 3, 4)]
    assert lrs == pytest.approx([0.003 * (8 - u) / 6 for u in (2, 4, 5, 6)], rel=1e-6)

    args = tiny("one_line", **settings, **{"train.log_every": 4, "train.save_every": 3})
    assert main(["train", *args]) == 0
    line = records(tmp_path / "one_line")[4]
    # a line's means are over the steps that trained the objective: dae in steps 1 and 2
    dae = (every[1]["loss/dae"] + every[2]["loss/dae"]) / 2
    assert line["loss/dae"] == pytest.approx(dae, rel=1e-6)
    bt = sum(every[s]["loss/bt"] for s in (1, 2, 3, 4)) / 4
    assert line["loss/bt"] == pytest.approx(bt, rel=1e-6)
    assert line["loss"] == pytest.approx(line["loss/bt"], rel=1e-6)  # dae's weight is now 0

    shutil.rmtree(tmp_path / "one_line" / "checkpoints" / "step-00000004")
    assert main(["train", *args, "--resume"]) == 0  # from step 3: dae skipped once in the line
    resumed = records(tmp_path / "one_line")[4]
    timing = {k: resumed[k] for k in ("tokens_per_s", "train_seconds")}
    assert resumed == {**line, **timing}
