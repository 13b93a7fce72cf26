"""``crossalign eval`` appends exactly one result record per run, where it should, under a
lock, and tolerates a half-written last line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from crossalign.cli import main
from crossalign.evals.results import read_results

from .test_bli_rsim import make_tokenizer

KEYS = {"eval", "model", "options", "metrics", "versions", "time"}
PAIRS = [("cat", "gato"), ("dog", "perro"), ("house", "casa"), ("bread", "pan"), ("the", "el")]


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture
def aer_files(tmp_path) -> list[str]:
    """``--pred``/``--gold``/``--text`` of a 3-sentence test: 2 of 3 links right."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "src.txt").write_text("a b\nc d\ne f\n")
    (d / "tgt.txt").write_text("x y\nz w\nv u\n")
    (d / "gold.txt").write_text("0 1 1 S\n1 1 1 S\n2 2 2 S\n")
    (d / "pred.txt").write_text("0-0\n1-1\n1-1\n")
    text = [str(d / "src.txt"), str(d / "tgt.txt")]
    return ["--pred", str(d / "pred.txt"), "--gold", str(d / "gold.txt"), "--text", *text]


def test_one_record_beside_the_predictions(aer_files, tmp_path, capsys):
    assert main(["eval", "aer", *aer_files, "--json", str(tmp_path / "aer.json")]) == 0
    (record,) = lines(tmp_path / "data" / "results.jsonl")
    assert set(record) == KEYS
    assert record["eval"] == "aer" and record["model"]["path"] is None
    assert record["options"]["pred"] == aer_files[1] and record["options"]["gold_ids"] == "auto"
    legacy = json.loads((tmp_path / "aer.json").read_text())
    assert legacy == {"pred.txt": record["metrics"]}  # the old --json shape
    assert record["metrics"]["recall"] == pytest.approx(2 / 3)
    assert record["versions"]["eval"] == 2 and record["versions"]["python"]
    assert record["time"]["seconds"] >= 0 and record["time"]["started"].endswith("Z")
    out = capsys.readouterr().out
    assert out.splitlines()[-1].split()[1:] == ["33.33", "66.67", "66.67", "66.67"]
    assert main(["eval", "aer", *aer_files]) == 0
    assert len(lines(tmp_path / "data" / "results.jsonl")) == 2


def test_results_flag_and_no_results(aer_files, tmp_path):
    target = tmp_path / "elsewhere" / "r.jsonl"
    assert main(["eval", "aer", *aer_files, "--results", str(target)]) == 0
    assert main(["eval", "aer", *aer_files, "--no-results"]) == 0
    assert len(lines(target)) == 1
    assert not (tmp_path / "data" / "results.jsonl").exists()


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A run directory (config.yaml) holding a tiny BERT and its tokenizer in model/."""
    torch.manual_seed(0)
    tok = make_tokenizer([w for pair in PAIRS for w in pair])
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    run = tmp_path / "run"
    BertForMaskedLM(config).save_pretrained(run / "model")
    tok.save_pretrained(run / "model")
    (run / "config.yaml").write_text("run_dir: run\n")
    gold = tmp_path / "en-es"
    gold.mkdir()
    (gold / "test.txt").write_text("".join(f"{s} {t}\n" for s, t in PAIRS))
    return run


@pytest.mark.parametrize("model", ["run/model", "run"])
def test_a_runs_model_records_in_the_run(run_dir, tmp_path, model, capsys):
    gold = str(tmp_path / "en-es" / "test.txt")
    assert main(["eval", "rsim", "--model", str(tmp_path / model), "--dict", gold]) == 0
    (record,) = read_results(run_dir)
    assert record.model["path"] == str(run_dir / "model") and record.model["run"] == str(run_dir)
    assert record.model["config_sha256"] is not None
    assert record.metrics["pairs"] == len(PAIRS) and -1 <= record.metrics["rsim"] <= 1
    assert "RSIM" in capsys.readouterr().out


APPEND = """
import sys
from crossalign.evals.registry import evaluations
from crossalign.evals.results import run_evaluation
aer = evaluations().get("aer")
options = dict(pred=sys.argv[1], gold=sys.argv[2], text=[sys.argv[3], sys.argv[4]])
for _ in range(int(sys.argv[6])):
    run_evaluation(aer, None, options, results=sys.argv[5], label=sys.argv[7] * 100_000)
"""


def test_concurrent_appends_do_not_interleave(aer_files, tmp_path):
    target = tmp_path / "shared.jsonl"
    args = [aer_files[1], aer_files[3], *aer_files[5:7], str(target), "20"]
    procs = [subprocess.Popen([sys.executable, "-c", APPEND, *args, mark]) for mark in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    records = read_results(target)  # every line is one whole record
    assert sorted(r.label[0] for r in records) == ["a"] * 20 + ["b"] * 20
    assert all(len(r.label) == 100_000 for r in records)


def test_a_half_written_last_line_is_dropped(aer_files, tmp_path, capsys):
    results = tmp_path / "data" / "results.jsonl"
    assert main(["eval", "aer", *aer_files]) == 0
    whole = results.read_text()
    results.write_text(whole + '{"eval": "aer", "mod')  # a crash in the middle of a write
    assert len(read_results(results)) == 1
    assert "dropping a half-written last line" in capsys.readouterr().err
    assert main(["eval", "aer", *aer_files]) == 0
    assert results.read_text().startswith(whole) and len(lines(results)) == 2


def test_a_record_older_than_an_option_is_reused_at_that_options_default():
    """An option added to an evaluation after its records were written (transfer's
    freeze_embeddings) reads as its default, so a study reuses those records; a run asking
    for another value does not."""
    from dataclasses import dataclass

    from crossalign.evals.registry import Evaluation
    from crossalign.evals.results import ResultRecord, find_record

    @dataclass
    class Options:
        lr: float = 1e-4
        freeze: bool = False

    evaluation = Evaluation("toy", "a toy", Options, {}, "x:y", model="none", version=2)
    old = ResultRecord(eval="toy", model={"config_sha256": None}, options={"lr": 1e-4},
                       metrics={"m": 1.0}, versions={"eval": 2})  # fmt: skip
    assert find_record([old], evaluation, None, {"lr": 1e-4}) is old
    assert find_record([old], evaluation, None, {"lr": 1e-4, "freeze": True}) is None
    assert find_record([old], evaluation, None, {"lr": 2e-4}) is None
    stale = ResultRecord(eval="toy", model={"config_sha256": None}, options={"lr": 1e-4},
                         metrics={"m": 1.0}, versions={"eval": 1})  # fmt: skip
    assert find_record([stale], evaluation, None, {}) is None  # another version: not reused


def test_a_checkpoints_record_is_not_the_final_models(tmp_path):
    """A run's checkpoint and its final model share the run's config hash; a record of one
    must not be reused for the other. A record copied with its run (another absolute path)
    still matches."""
    from dataclasses import dataclass

    from crossalign.evals.registry import Evaluation
    from crossalign.evals.results import ResultRecord, find_record, model_identity

    @dataclass
    class Options:
        lr: float = 1e-4

    run = tmp_path / "run"
    for place in ("model", "checkpoints/step-00000500"):
        (run / place).mkdir(parents=True)
    (run / "config.yaml").write_text("train: {steps: 1000}\n")
    evaluation = Evaluation("toy", "a toy", Options, {}, "x:y", version=1)

    def record(model: Path) -> ResultRecord:
        return ResultRecord(eval="toy", model=model_identity(model), options={"lr": 1e-4},
                            metrics={"m": 1.0}, versions={"eval": 1})  # fmt: skip

    checkpoint = record(run / "checkpoints" / "step-00000500")
    assert checkpoint.place == "checkpoints/step-00000500"
    assert find_record([checkpoint], evaluation, run / "model", {}) is None
    assert find_record([checkpoint], evaluation, checkpoint.model["path"], {}) is checkpoint
    final = record(run / "model")
    assert find_record([final, checkpoint], evaluation, run / "model", {}) is final
    copied = tmp_path / "copy"
    (run).rename(copied)
    assert find_record([final], evaluation, copied / "model", {}) is final
    assert find_record([final], evaluation, copied / "checkpoints" / "step-00000500", {}) is None
