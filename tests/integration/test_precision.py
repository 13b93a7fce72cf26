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


def test_resume_where_auto_resolves_otherwise(tmp_path, monkeypatch, capsys):
    """``auto`` is resolved on each machine: a checkpoint records what it trained in, a resume
    that resolves otherwise says so, and one to or from fp16 (a loss-scaler state) is refused."""
    from crossalign.checkpoint import write_manifest
    from crossalign.training import setup

    run = tmp_path / "auto"
    args = tiny_overrides(run, **{"train.precision": "auto", "train.steps": 4,
                                  "train.save_every": 2})  # fmt: skip
    monkeypatch.setattr(setup, "cpu_has_bf16", lambda: False)  # a CPU without bf16: fp32
    assert main(["train", *args, "train.steps=2"]) == 0
    state = run / "checkpoints" / "step-00000002" / "trainer_state.json"
    assert json.loads(state.read_text())["precision"] == "no"
    monkeypatch.setattr(setup, "cpu_has_bf16", lambda: True)  # resumed where auto is bf16
    assert main(["train", *args, "--resume"]) == 0
    assert "trained in no; it continues in bf16 on this machine" in capsys.readouterr().out
    saved = json.loads(state.read_text())
    state.write_text(json.dumps({**saved, "precision": "fp16"}))
    write_manifest(state.parent)  # as if it had been saved so
    assert main(["train", *args, "train.steps=6", "--resume", str(state.parent)]) == 2
    assert "keeps a loss-scaler state" in capsys.readouterr().err
