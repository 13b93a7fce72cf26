"""``crossalign eval perplexity``: the logged held-out figures of a tiny run, and the same
figures computed again from its model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.evals.results import read_results

from .conftest import FIXTURES, tiny_overrides

EN, ES = FIXTURES / "en.txt", FIXTURES / "es.txt"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("ppl") / "run"
    extra = {
        "data.valid_parallel": f"{{en-es: [{EN}, {ES}]}}",
        "train.steps": 4,
        "train.eval_every": 2,
        "train.save_every": 2,
    }
    assert main(["train", *tiny_overrides(run, **extra)]) == 0
    return run


def held_out(run: Path, step: int) -> dict[str, float]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    (line,) = [r for r in lines if r["step"] == step and "valid/mlm_ppl" in r]
    return {k.removeprefix("valid/"): v for k, v in line.items() if k.startswith("valid/")}


def test_log_and_compute_give_the_logged_figures(run, tmp_path):
    final = held_out(run, 4)
    assert set(final) == {"mlm_loss", "mlm_ppl", "tlm_loss", "tlm_ppl"}
    assert main(["eval", "perplexity", "--model", str(run)]) == 0
    assert main(["eval", "perplexity", "--model", str(run / "model"), "--source", "compute"]) == 0
    logged, computed = read_results(run)
    assert logged.options["source"] == "log" and logged.metrics == final
    assert computed.options["source"] == "compute"
    assert computed.metrics == pytest.approx(final, rel=1e-6)
    # a checkpoint: the line logged at its step, and the same again when computed
    step2 = run / "checkpoints" / "step-00000002"
    out = tmp_path / "ppl.json"
    assert main(["eval", "perplexity", "--model", str(step2), "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == held_out(run, 2) != final
    args = ["eval", "perplexity", "--model", str(step2), "--source", "compute"]
    assert main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == pytest.approx(held_out(run, 2), rel=1e-6)
    # other text: only what is given is measured
    assert main([*args, "--text", f"es={ES}", "--json", str(out)]) == 0
    assert set(json.loads(out.read_text())) == {"mlm_loss", "mlm_ppl"}


def test_perplexity_errors_are_one_line(run, tmp_path, capsys):
    model = str(run / "model")
    assert main(["eval", "perplexity", "--model", model, "--text", f"es={ES}"]) == 2
    assert "go with --source compute" in capsys.readouterr().err
    args = ["eval", "perplexity", "--model", model, "--source", "compute"]
    assert main([*args, "--text", str(ES)]) == 2
    assert f"--text '{ES}' must look like en=valid.en" in capsys.readouterr().err
    step1 = run / "checkpoints" / "step-00000001"
    shutil.copytree(run / "checkpoints" / "step-00000002", step1)  # no held-out line at step 1
    assert main(["eval", "perplexity", "--model", str(step1)]) == 2
    assert "has no held-out line at step 1" in capsys.readouterr().err
