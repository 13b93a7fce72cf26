"""End-to-end training on the tiny fixture, in-process through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transformers import AutoModelForMaskedLM, AutoTokenizer

from crossalign.cli import main

from .conftest import FIXTURES, train_two_processes


def losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines) if "loss" in r}


def test_overfits_eight_sentences(tiny, tmp_path):
    en = tmp_path / "en8.txt"
    en.write_text("\n".join((FIXTURES / "en.txt").read_text().splitlines()[:8]) + "\n")
    args = tiny(
        "overfit",
        **{
            "data.mono": f"{{en: {en}}}",
            "data.parallel": "{}",
            "data.valid_mono": f"{{en: {en}}}",
            "objectives": "[{name: mlm}]",
            "train.steps": 200,
            "train.lr": 0.01,
            "train.save_every": 0,
            "tokenizer.vocab_size": 60,
        },
    )
    assert main(["train", *args]) == 0
    curve = losses(tmp_path / "overfit")
    first = sum(curve[s] for s in range(1, 6)) / 5
    last = sum(curve[s] for s in range(196, 201)) / 5
    assert last < 0.5 * first, (first, last)
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "overfit" / "model")
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 32
    AutoTokenizer.from_pretrained(tmp_path / "overfit" / "model")


def test_resume_continues_the_same_curve(tiny, tmp_path, capsys):
    assert main(["train", *tiny("a")]) == 0
    full = losses(tmp_path / "a")
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "step-00000012")
    # a half-written newer checkpoint must be skipped, never used or overwritten blindly
    (tmp_path / "a" / "checkpoints" / "step-00000011").mkdir()
    assert main(["train", *tiny("a"), "--resume"]) == 0
    resumed = losses(tmp_path / "a")
    assert sorted(resumed) == sorted(full)
    for step in range(7, 13):
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=1e-6), step
    # it is not deleted: a resume from an older checkpoint moves later ones aside
    assert not (tmp_path / "a" / "checkpoints" / "step-00000011").exists()
    assert list((tmp_path / "a" / "checkpoints" / "abandoned").glob("*/step-00000011"))
    assert "resumed from" in capsys.readouterr().out
    # the wall-clock time trained counts on from the checkpoint's (step 6), never restarts
    seconds = {
        r["step"]: r["train_seconds"]
        for r in map(json.loads, (tmp_path / "a" / "metrics.jsonl").read_text().splitlines())
        if "train_seconds" in r
    }
    saved = json.loads(
        (tmp_path / "a" / "checkpoints" / "step-00000006" / "trainer_state.json").read_text()
    )
    assert 0 < seconds[6] <= saved["train_seconds"] < seconds[7] < seconds[12]


def test_existing_checkpoints_are_not_overwritten(tiny, tmp_path, capsys):
    assert main(["train", *tiny("b", **{"train.steps": 2, "train.save_every": 0})]) == 0
    before = (tmp_path / "b" / "checkpoints" / "step-00000002" / "model.safetensors").read_bytes()
    assert main(["train", *tiny("b", **{"train.steps": 2, "train.save_every": 0})]) == 2
    assert "already holds a run (checkpoints, config.yaml" in capsys.readouterr().err
    after = (tmp_path / "b" / "checkpoints" / "step-00000002" / "model.safetensors").read_bytes()
    assert before == after


def test_corrupt_checkpoint_is_detected(tiny, tmp_path, capsys):
    bad = tmp_path / "ck"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    assert main(["train", *tiny("c"), "--resume", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"cannot resume from {bad}: not a checkpoint" in err
    assert main(["train", *tiny("d"), "--resume"]) == 2
    assert "no good checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "train.batch_sise=4",
            "unknown config key 'train.batch_sise' (did you mean 'batch_size'?)",
        ),
        ("objectives=[{name: mlmm}]", "unknown objective 'mlmm' (did you mean 'mlm'?)"),
        (
            "objectives=[{name: mlm, mask_prb: 0.2}]",
            "unknown option 'mask_prb' (did you mean 'mask_prob'?)",
        ),
        ("data.mono={xx: tests/fixtures/tiny/en.txt}", "unknown language code 'xx' in data.mono"),
        (
            "data.parallel={en-es: [tests/fixtures/tiny/en.txt, pyproject.toml]}",
            "differ in line count",
        ),
        ("train.grad_accum=3", "train.batch_size=8 must be divisible by processes (1)"),
        ("objectives=[{name: mlm, batch_size: 0}]", "objective mlm: batch_size=0 must be >= 1"),
        ("train.objective_mix=mixed", "train.objective_mix 'mixed' must be weighted or pooled"),
    ],
)
def test_bad_input_one_line_error(tiny, override, message, capsys):
    assert main(["train", *tiny("e"), override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("crossalign: error: ")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "crossalign", *args]


def test_two_processes(tiny, tmp_path):
    args = tiny("ddp", **{"train.steps": 4, "train.log_every": 2, "train.save_every": 0})
    train_two_processes(args, 29531)
    records = [json.loads(x) for x in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["processes"] == 2 and records[-1]["valid/mlm_ppl"] > 1
    AutoModelForMaskedLM.from_pretrained(tmp_path / "ddp" / "model")


def test_ctrl_c_saves_a_checkpoint(tiny, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = tiny("int", **{"train.steps": 100000, "train.save_every": 0, "train.log_every": 1})
    proc = subprocess.Popen(_cli("train", *args), env=env, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "int" / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err[-2000:]
    assert "interrupted at step" in err and "--resume" in err
    (ckpt,) = (tmp_path / "int" / "checkpoints").glob("step-*")
    assert (ckpt / "COMPLETE").exists()


def test_help_and_ls(capsys):
    for cmd in (["--help"], ["train", "--help"], ["data", "--help"], ["backbone", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(cmd)
        assert e.value.code == 0
    assert main(["ls", "objectives"]) == 0
    out = capsys.readouterr().out
    assert "mlm " in out and "tlm " in out


def test_roberta_style_model_and_tokenizer_from_path(tiny, tmp_path):
    args = tiny("xlmr", **{"model.arch": "xlm-roberta", "train.steps": 2, "train.save_every": 0})
    assert main(["train", *args]) == 0
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "xlmr" / "model")
    assert model.config.model_type == "xlm-roberta"
    # positions start after the padding index and the TLM pair restarts them: 32 + 2 rows
    assert model.config.max_position_embeddings == 32 + model.config.pad_token_id + 1
    tokenizer = tmp_path / "xlmr" / "tokenizer"
    more = tiny(
        "bert", **{"tokenizer.path": str(tokenizer), "train.steps": 2, "train.save_every": 0}
    )
    assert main(["train", *more]) == 0
    saved = AutoTokenizer.from_pretrained(tmp_path / "bert" / "model")
    assert saved.get_vocab() == AutoTokenizer.from_pretrained(tokenizer).get_vocab()
    assert not (tmp_path / "bert" / "tokenizer").exists()


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_dataloader_workers_on_gpu(tiny, tmp_path):
    """Workers are forked from a process that uses CUDA: they must collate on CPU copies of
    the objectives' buffers."""
    args = tiny("gpu", **{"data.num_workers": 2, "train.steps": 4, "train.save_every": 2})
    assert main(["train", *args]) == 0
    assert (
        main(["train", *tiny("gpu", **{"data.num_workers": 2, "train.steps": 6}), "--resume"]) == 0
    )


def test_objectives_with_their_own_batch_size_pooled(tiny, tmp_path):
    """XLM's mixed data: TLM pairs 25% of MLM sequences, one mean over both objectives."""
    args = tiny(
        "mixed",
        **{
            "objectives": "[{name: mlm, batch_size: 8}, {name: tlm, batch_size: 2}]",
            "train.objective_mix": "pooled",
            "train.adam_eps": 1e-6,
            "train.grad_accum": 2,
            "train.steps": 3,
            "train.save_every": 0,
        },
    )
    assert main(["train", *args]) == 0
    lines = (tmp_path / "mixed" / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[-2])
    assert record["step"] == 3 and "loss/tlm" in record
    for record in map(json.loads, lines[:-1]):  # one mean over both: between the two losses
        low, high = sorted((record["loss/mlm"], record["loss/tlm"]))
        assert low - 1e-6 <= record["loss"] <= high + 1e-6
    assert main(["train", *tiny("odd", **{"objectives": "[{name: tlm, batch_size: 3}]",
                                          "train.grad_accum": 2})]) == 2  # fmt: skip


def test_python_api_train_takes_a_dict_a_file_or_a_config_like_the_cli(tiny, tmp_path):
    """``crossalign.train`` runs the CLI's training from a dict, a YAML file or a RunConfig
    (with overrides) and returns the final held-out metrics the CLI run logs."""
    import yaml

    import crossalign
    import crossalign.training  # the module does not shadow the function
    from crossalign.config import config_to_dict, load_config

    args = tiny("cli", **{"train.steps": 3, "train.save_every": 0})
    assert main(["train", *args]) == 0
    logged = [json.loads(x) for x in (tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()]
    final = {k: v for k, v in logged[-1].items() if k.startswith("valid/")}

    cfg = load_config(None, args)
    data = yaml.safe_load(yaml.safe_dump(config_to_dict(cfg)))
    from_dict = crossalign.train({**data, "run_dir": str(tmp_path / "dict")})
    assert from_dict == pytest.approx(final)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    from_file = crossalign.train(path, [f"run_dir={tmp_path / 'file'}"])
    assert from_file == pytest.approx(final)
    from_config = crossalign.train(cfg, [f"run_dir={tmp_path / 'config'}"])
    assert from_config == pytest.approx(final)
    assert callable(crossalign.train) and crossalign.training.train is not crossalign.train
