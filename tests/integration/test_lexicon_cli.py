"""Code-switched pre-training, ``crossalign induce-dict`` and the lexicon evaluations, in
process on the tiny fixture."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from crossalign.cli import build_parser, main

from .conftest import FIXTURES

EN, ES = FIXTURES / "en.txt", FIXTURES / "es.txt"
GOLD = [
    ("the", "el"),
    ("the", "la"),
    ("cat", "gato"),
    ("dog", "perro"),
    ("bread", "pan"),
    ("book", "libro"),
    ("green", "verde"),
    ("mother", "madre"),
    ("house", "casa"),
]


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def run_eval(argv: list[str]) -> int:
    return main(["eval", *argv])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny model trained with TCS-MLM (dictionary refreshed every 3 steps)."""
    from .conftest import tiny_overrides

    run = tmp_path_factory.mktemp("tcs") / "run"
    objectives = "[{name: tcs_mlm, threshold: 1, other_max: 0, refresh_every: 3}]"
    extra = {"data.parallel": "{}", "train.steps": 6, "train.save_every": 0}
    args = tiny_overrides(run, objectives=objectives, **extra)
    assert main(["train", *args]) == 0
    return run


def test_tcs_training_logs_both_losses(trained):
    lines = [r for r in records(trained) if "loss" in r]
    assert len(lines) == 6
    for r in lines:
        assert math.isfinite(r["tcs_mlm/lm_loss"]) and math.isfinite(r["tcs_mlm/cs_loss"])
        assert r["loss"] == pytest.approx(r["tcs_mlm/lm_loss"] + r["tcs_mlm/cs_loss"], rel=1e-4)
        assert r["train/ppl"] == pytest.approx(math.exp(r["tcs_mlm/lm_loss"]), rel=1e-4)
        assert 0 < r["tcs_mlm/switch_frac"] <= 1


def test_tcs_resume_repeats_the_curve(tiny, tmp_path):
    objectives = "[{name: tcs_mlm, threshold: 1, other_max: 0, refresh_every: 2}]"
    # no warm-up: the refresh at step 2 then sees a changed model, so a lost dictionary shows
    extra = {"data.parallel": "{}", "train.steps": 6, "train.save_every": 3}
    args = tiny("a", objectives=objectives, **extra, **{"train.warmup_steps": 0})
    assert main(["train", *args]) == 0
    full = {r["step"]: r["loss"] for r in records(tmp_path / "a") if "loss" in r}
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "step-00000006")
    assert main(["train", *args, "--resume"]) == 0  # resumes at step 3, refreshed at 2
    resumed = {r["step"]: r["loss"] for r in records(tmp_path / "a") if "loss" in r}
    assert resumed == full  # bit-identical


def test_scs_training_runs(tiny, tmp_path):
    objectives = "[{name: scs_mlm, threshold: 1, other_max: 0}, {name: mlm}]"
    args = tiny("scs", objectives=objectives, **{"data.parallel": "{}", "train.steps": 4})
    assert main(["train", *args]) == 0
    lines = [r for r in records(tmp_path / "scs") if "loss" in r]
    assert all(math.isfinite(r["scs_mlm/cs_loss"]) for r in lines)


def test_code_switching_needs_two_languages(tiny, capsys):
    args = tiny(
        "one",
        objectives="[{name: tcs_mlm}]",
        **{"data.mono": f"{{en: {EN}}}", "data.parallel": "{}"},
    )
    assert main(["train", *args]) == 2
    assert "at least two languages" in capsys.readouterr().err


def test_induce_dict_writes_muse_with_scores(trained, tmp_path, capsys):
    out = tmp_path / "en-es.txt"
    for layer in ("0", "2"):
        argv = [
            "induce-dict",
            "--model",
            str(trained / "model"),
            "--src",
            "en",
            "--tgt",
            "es",
            "--src-text",
            str(EN),
            "--tgt-text",
            str(ES),
            "--threshold",
            "1",
            "--other-max",
            "0",
            "--layer",
            layer,
            "--out",
            str(out),
            "--backward",
            str(tmp_path / "b.txt"),
        ]
        assert main(argv) == 0
        lines = out.read_text().splitlines()
        assert lines and all(len(x.split()) == 3 for x in lines)
        scores = [float(x.split()[2]) for x in lines]
        assert scores == sorted(scores, reverse=True)
    assert "translations to" in capsys.readouterr().out
    assert (
        main(
            [
                "induce-dict",
                "--model",
                str(tmp_path),
                "--src",
                "en",
                "--tgt",
                "es",
                "--src-text",
                str(EN),
                "--tgt-text",
                str(ES),
                "--out",
                str(out),
            ]
        )
        == 2
    )


@pytest.fixture
def gold(tmp_path) -> Path:
    d = tmp_path / "en-es"
    d.mkdir()
    for name in ("test.txt", "full.txt"):
        (d / name).write_text("".join(f"{s} {t}\n" for s, t in GOLD))
    return d / "test.txt"


def test_eval_bli_rsim_layers(trained, gold, tmp_path, capsys):
    model = str(trained / "model")
    common = ["--model", model, "--dict", str(gold), "--words", "mean"]
    assert run_eval(["bli", *common, "--json", str(tmp_path / "bli.json")]) == 0
    bli = json.loads((tmp_path / "bli.json").read_text())
    assert bli["pair"] == "en-es" and bli["words"] == 8 and bli["candidates"] == 9
    for method in ("nn", "csls_knn_10"):
        p1, p5, p10 = (bli[f"precision_at_{k}-{method}"] for k in (1, 5, 10))
        assert 0 <= p1 <= p5 <= p10 <= 100
    assert bli["source_vocabulary"] == 8  # the source words of full.txt
    text = ["--src-text", str(EN), "--tgt-text", str(ES)]
    assert run_eval(["bli", *common, *text, "--layer", "1"]) == 0
    assert run_eval(["rsim", *common, "--json", str(tmp_path / "rsim.json")]) == 0
    rsim = json.loads((tmp_path / "rsim.json").read_text())
    assert -1 <= rsim["rsim"] <= 1 and rsim["pairs"] == 8
    png, table = tmp_path / "layers.png", tmp_path / "layers.json"
    assert run_eval(["layers", *common, *text, "--png", str(png), "--json", str(table)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads(table.read_text())["layers"]
    assert [r["layer"] for r in rows] == [0, 1, 2]
    assert len({r["words"] for r in rows}) == 1  # every layer on the same words
    assert "P@1 CSLS" in capsys.readouterr().out


def test_vocabulary_flags_default_to_the_paper():
    parser = build_parser()
    common = ["--model", "m", "--src", "en", "--tgt", "es"]
    induce = parser.parse_args(["induce-dict", *common, "--out", "o"])
    induced = parser.parse_args(["eval", "induced-dict", *common, "--dict", "d"])
    for args in (induce, induced):
        assert (args.threshold, args.other_max) == (100, 100)


def test_eval_induced_dict_reports_precision_and_bli(trained, gold, tmp_path, capsys):
    model, out = str(trained / "model"), tmp_path / "induced.json"
    vocab = ["--threshold", "1", "--other-max", "0", "--words", "mean", "--json", str(out)]
    text = ["--src-text", str(EN), "--tgt-text", str(ES)]
    assert run_eval(["induced-dict", "--model", model, "--dict", str(gold), *text, *vocab]) == 0
    record = json.loads(out.read_text())
    induced, bli = record["induced"], record["bli"]
    assert record["pair"] == "en-es" and 0 < induced["scored"] <= induced["pairs"]
    assert induced["precision"] == pytest.approx(induced["correct"] / induced["scored"])
    assert bli["words"] == 8 and bli["candidates"] == 9  # the same numbers as eval bli
    printed = capsys.readouterr().out
    assert "precision" in printed and "P@1 CSLS" in printed
    # the paper's direction, X->en, from the en-X dictionary read the other way round
    text = ["--src-text", str(ES), "--tgt-text", str(EN)]
    argv = ["induced-dict", "--model", model, "--dict", str(gold), "--reverse", *text, *vocab]
    assert run_eval([*argv, "--layer", "1"]) == 0
    record = json.loads(out.read_text())
    assert record["pair"] == "es-en" and record["layer"] == 1
    assert record["bli"]["candidates"] == 8  # the distinct English words of the dictionary
    assert main(["eval", "induced-dict", "--model", model, "--dict", str(gold)]) == 2
    assert "no text for 'en': give --corpus DIR, or --src-text" in capsys.readouterr().err


def test_eval_retrieval_identity_and_corpus(trained, tmp_path):
    model = str(trained / "model")
    out = tmp_path / "r.json"
    assert (
        run_eval(
            [
                "retrieval",
                "--model",
                model,
                "--src-file",
                str(EN),
                "--tgt-file",
                str(EN),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    scores = json.loads(out.read_text())
    assert scores["acc_src_tgt"] == 1.0 and scores["acc_tgt_src"] == 1.0 and scores["n"] == 24
    assert (
        run_eval(
            [
                "retrieval",
                "--model",
                model,
                "--src-file",
                str(EN),
                "--tgt-file",
                str(ES),
                "--layer",
                "1",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert 0 <= json.loads(out.read_text())["acc_src_tgt"] <= 1


def test_python_shortcuts_equal_the_commands(trained, gold, tmp_path):
    """``crossalign.induce_dictionary`` returns the pairs ``induce-dict`` writes and
    ``crossalign.evaluate`` the metrics ``crossalign eval`` records (writing no record)."""
    import crossalign

    model = str(trained / "model")
    out = tmp_path / "en-es.txt"
    options = ["--threshold", "1", "--other-max", "0", "--src-text", str(EN), "--tgt-text", str(ES)]
    assert (
        main(
            [
                "induce-dict",
                "--model",
                model,
                "--src",
                "en",
                "--tgt",
                "es",
                *options,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    pairs = crossalign.induce_dictionary(
        model, "en", "es", threshold=1, other_max=0, src_text=[str(EN)], tgt_text=[str(ES)]
    )
    assert [f"{s} {t} {x:.4f}" for s, t, x in pairs] == out.read_text().splitlines()

    results = tmp_path / "results.jsonl"
    assert run_eval(["bli", "--model", model, "--dict", str(gold), "--results", str(results)]) == 0
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert crossalign.evaluate("bli", model, dict=str(gold)) == record["metrics"]
    assert results.read_text().count("\n") == 1  # the shortcut wrote no record
