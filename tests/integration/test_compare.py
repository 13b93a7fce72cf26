"""``crossalign compare`` on the tiny fixture: 2 runs x 2 seeds, trained, evaluated and
reported; a second call reuses everything; a changed option re-runs only what depends on it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from crossalign.cli import main
from crossalign.errors import CrossalignError
from crossalign.evals.registry import EVALS, EvalOutput, Evaluation, Metric
from crossalign.study.spec import load_study, plan, select_runs, substitute

from .conftest import FIXTURES

EN, ES = FIXTURES / "en.txt", FIXTURES / "es.txt"


def _study(tmp_path: Path, **change) -> Path:
    base = {
        "model": {"preset": "tiny"},
        "tokenizer": {"vocab_size": 200},
        "data": {
            "mono": {"en": str(EN), "es": str(ES)},
            "parallel": {"en-es": [str(EN), str(ES)]},
            "valid_mono": {"en": str(EN)},
            "max_length": 32,
        },
        "train": {"steps": "{steps}", "batch_size": 8, "lr": 0.003, "warmup_steps": 1,
                  "log_every": 2, "save_every": 100},
    }  # fmt: skip
    study = {
        "name": "tiny study",
        "out": str(tmp_path / "study"),
        "seeds": [0, 1],
        "vars": {"steps": 4},
        "runs": [
            {"name": "mlm", "inline": {**base, "objectives": [{"name": "mlm"}]}},
            {"name": "xlm", "inline": {**base, "objectives": [{"name": "mlm"}, {"name": "tlm"}]}},
        ],
        "evaluations": [
            {"eval": "perplexity"},
            {"eval": "retrieval", "options": {"src_file": str(EN), "tgt_file": str(ES)}},
        ],
        **change,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def test_a_study_trains_evaluates_reports_and_then_reuses_everything(tmp_path, capsys):
    path = _study(tmp_path)
    assert main(["compare", str(path)]) == 0
    out = tmp_path / "study"
    runs = [out / "runs" / name / f"seed-{seed}" for name in ("mlm", "xlm") for seed in (0, 1)]
    for run in runs:
        assert (run / "model" / "config.json").is_file()
        records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
        assert [r["eval"] for r in records] == ["perplexity", "retrieval"]
        assert records[0]["metrics"]["mlm_ppl"] > 1.0
    assert yaml.safe_load((runs[1] / "config.yaml").read_text())["train"]["seed"] == 1
    report = (out / "report" / "report.md").read_text()
    assert "mlm" in report and "xlm" in report
    printed = capsys.readouterr().out
    assert printed.count("== pre-training") == 4 and printed.count("== evaluating") == 8

    stamp = (runs[0] / "model" / "model.safetensors").stat().st_mtime_ns
    assert main(["compare", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "== pre-training" not in printed and "== evaluating" not in printed
    assert (runs[0] / "model" / "model.safetensors").stat().st_mtime_ns == stamp

    # another evaluation option: only that evaluation runs again, on every run
    assert main(["compare", str(path), "evaluations.1.options.layer=1", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "== pre-training" not in printed and printed.count("== evaluating") == 4
    assert printed.count("retrieval") == 4

    # another budget: every run trains again (the saved config differs)
    assert main(["compare", str(path), "vars.steps=5", "--runs", "mlm", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("== pre-training") == 2 and "xlm" not in printed


def test_a_contrast_must_name_two_of_the_studys_runs(tmp_path, capsys):
    for pair, message in ((["mlm", "bert"], "contrast.0 names run 'bert'"),
                          (["mlm"], "contrast.0 must be [baseline, method]")):  # fmt: skip
        path = _study(tmp_path, contrast=[pair])
        assert main(["compare", str(path), "--dry-run"]) == 2
        assert message in capsys.readouterr().err


def test_study_files_are_checked_before_any_work(tmp_path, capsys):
    path = _study(tmp_path, run_dir="{out}/runs")
    assert main(["compare", str(path)]) == 2
    assert "must contain {run}" in capsys.readouterr().err
    path = _study(tmp_path, evaluations=[{"eval": "perplexty"}])
    assert main(["compare", str(path)]) == 2
    assert "did you mean 'perplexity'" in capsys.readouterr().err
    assert not (tmp_path / "study" / "runs").exists()
    path = _study(tmp_path)
    assert main(["compare", str(path), "--runs", "mlm,bert"]) == 2
    assert "has no run 'bert'" in capsys.readouterr().err
    assert main(["compare", str(path), "seed=[1]"]) == 2
    assert "did you mean 'seeds'" in capsys.readouterr().err
    # key=value pairs after the options are overrides too; bad run configs and evaluation
    # options are refused before anything is trained
    assert main(["compare", str(path), "--runs", "mlm", "vars.steps=x"]) == 2
    assert "train.steps='x' must be of type int" in capsys.readouterr().err
    assert main(["compare", str(path), "--no-report", "evaluations.1.options.layr=1"]) == 2
    assert "did you mean 'layer'" in capsys.readouterr().err
    assert not (tmp_path / "study" / "runs").exists()


def test_substitution_keeps_types_and_names_unknown_variables():
    variables = {"steps": 4, "out": "o", "corpus": ["a", "b"]}
    got = substitute(
        {"s": "{steps}", "p": "{out}/x", "c": "{corpus}", "e": "{k: 1}", "f": "[{name: mlm}]"},
        variables,
        "w",
    )
    assert got == {"s": 4, "p": "o/x", "c": ["a", "b"], "e": "{k: 1}", "f": "[{name: mlm}]"}
    with pytest.raises(CrossalignError, match=r"w.x: '\{stpes\}/y' names \{stpes\}"):
        substitute({"x": "{stpes}/y"}, variables, "w")


def test_the_derived_study_file_plans_one_run_per_transform_and_objective():
    root = Path(__file__).resolve().parents[2]
    study = load_study(root / "configs" / "studies" / "derived.yaml", ["seeds=[0,1]"])
    runs = plan(study)
    assert len(runs) == 3 * 7 * 2  # every run, optional ones included
    assert {r.run_dir.name for r in runs} == {"seed-0", "seed-1"}
    assert runs[0].variables["derived"] == "runs/studies/derived/trans/derived"


def test_select_picks_the_default_runs_and_runs_overrides_it():
    root = Path(__file__).resolve().parents[2]
    study = select_runs(load_study(root / "configs" / "studies" / "align_mlm.yaml"), None)
    assert [r.name for r in study.runs] == ["mlm", "xlm", "dict_mlm", "align_mlm", "align_mlm_full"]
    study = select_runs(load_study(root / "configs" / "studies" / "derived.yaml"), None)
    assert [r.name for r in study.runs] == ["mlm", "xlm", "dict_mlm", "align_mlm"]
    study = select_runs(load_study(root / "configs" / "studies" / "align_mlm.yaml"), ["mlm"])
    assert [r.name for r in study.runs] == ["mlm"]
    with pytest.raises(CrossalignError, match="has no run 'bert'"):
        select_runs(
            load_study(root / "configs" / "studies" / "align_mlm.yaml", ["select=[bert]"]), None
        )


def test_a_study_extends_another_key_by_key(tmp_path):
    parent = _study(tmp_path)
    child = tmp_path / "sub" / "child.yaml"
    child.parent.mkdir()
    child.write_text("extends: ../study.yaml\nname: child\nvars: {other: 1}\nseeds: [3]\n")
    study = load_study(child)
    assert (study.name, study.seeds, study.vars) == ("child", [3], {"steps": 4, "other": 1})
    assert [r.name for r in study.runs] == ["mlm", "xlm"]  # from the parent
    assert study.out == str(tmp_path / "study")
    (tmp_path / "loop.yaml").write_text("extends: sub/child.yaml\n")
    child.write_text("extends: ../loop.yaml\n")
    with pytest.raises(CrossalignError, match="comes back to this file"):
        load_study(child)
    child.write_text("extends: ../nothing.yaml\n")
    with pytest.raises(CrossalignError, match=r"nothing.yaml does not exist \(extended by"):
        load_study(child)
    assert parent.is_file()


def _chain(tmp_path: Path, base_seeds: list[int] | None = None) -> dict:
    """Study keys: a prepare step training a tokenizer, a ``base`` run (its own ``seeds``
    when given) and a ``cont`` run continuing from base's model, both using the tokenizer."""
    cfg = tmp_path / "tok.yaml"
    data = {"mono": {"en": str(EN), "es": str(ES)}, "valid_mono": {"en": str(EN)}, "max_length": 32}
    cfg.write_text(yaml.safe_dump({"tokenizer": {"vocab_size": 150}, "data": data}))
    train = {"steps": 3, "batch_size": 8, "lr": 0.003, "warmup_steps": 1, "log_every": 1}
    shared = {"tokenizer": {"path": "{out}/tokenizer"}, "data": data, "train": train,
              "objectives": [{"name": "mlm"}]}  # fmt: skip
    base = {"name": "base", "inline": {**shared, "model": {"preset": "tiny"}}}
    if base_seeds is not None:
        base["seeds"] = base_seeds
    return {
        "prepare": [{"command": f"data tokenizer --config {cfg} --out {{out}}/tokenizer",
                     "creates": "{out}/tokenizer"}],
        "runs": [base, {"name": "cont",
                        "inline": {**shared, "model": {"path": "{out}/runs/base/model"}}}],
        "evaluations": [{"eval": "perplexity"}],
    }  # fmt: skip


def test_prepare_steps_and_a_shared_starting_run(tmp_path, capsys, monkeypatch):
    """A ``prepare`` step trains one tokenizer that every run uses (through the library, not
    the command line's handler); a ``base`` run with its own ``seeds: [0]`` trains once and
    the other run continues from its model per seed; a second call repeats nothing; a changed
    step command runs it again."""
    import crossalign.cli.data as cli_data

    def not_the_cli(args):
        raise AssertionError("a prepare step ran the command line's handler")

    monkeypatch.setattr(cli_data, "_tokenizer", not_the_cli)
    cfg = tmp_path / "tok.yaml"
    path = _study(tmp_path, **_chain(tmp_path, base_seeds=[0]))
    assert main(["compare", str(path), "--no-report"]) == 0
    out = tmp_path / "study"
    printed = capsys.readouterr().out
    assert printed.count("== crossalign data tokenizer") == 1
    assert printed.count("== pre-training") == 3
    assert (out / "runs" / "base" / "model").is_dir()
    assert not (out / "runs" / "base" / "seed-0").exists()
    for seed in (0, 1):
        run = out / "runs" / "cont" / f"seed-{seed}"
        saved = yaml.safe_load((run / "config.yaml").read_text())
        assert saved["model"]["path"] == str(out / "runs" / "base" / "model")
        tokens = json.loads((run / "model" / "tokenizer.json").read_text())["model"]
        assert tokens == json.loads((out / "tokenizer" / "tokenizer.json").read_text())["model"]
    ledger = json.loads((out / "prepared.json").read_text())
    assert ledger[str(out / "tokenizer")].startswith("data tokenizer --config")

    assert main(["compare", str(path), "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "already made" in printed and "== crossalign" not in printed
    assert "== pre-training" not in printed
    # --dry-run says what is done and what is not, and does nothing
    (out / "runs" / "cont" / "seed-1" / "results.jsonl").unlink()
    assert main(["compare", str(path), "--dry-run", "vars.steps=5"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("prepare  made    crossalign data tokenizer")
    assert printed[1].startswith(f"run      done    {out / 'runs' / 'base'}  (3 steps; 0 of 1")
    assert printed[3].endswith("(3 steps; 1 of 1 evaluations to run)")
    assert not (out / "runs" / "cont" / "seed-1" / "results.jsonl").exists()

    # another command for the same output: the step runs again
    assert main(["compare", str(path), "--no-report", "--runs", "base",
                 "prepare.0.command=data tokenizer --config " + str(cfg) + " --out "
                 "{out}/tokenizer tokenizer.vocab_size=140"]) == 0  # fmt: skip
    assert capsys.readouterr().out.count("== crossalign data tokenizer") == 1


def test_prepare_only_makes_the_shared_outputs_and_trains_nothing(tmp_path, capsys):
    """``--prepare-only`` (data made on one machine for runs on another): the prepare step's
    output and its ledger, no run; the study then finds the step made."""
    path = _study(tmp_path, **_chain(tmp_path, base_seeds=[0]))
    assert main(["compare", str(path), "--prepare-only"]) == 0
    out = tmp_path / "study"
    printed = capsys.readouterr().out
    assert printed.count("== crossalign data tokenizer") == 1 and "== pre-training" not in printed
    assert (out / "tokenizer" / "tokenizer.json").is_file() and not (out / "runs").exists()
    assert main(["compare", str(path), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("prepare  made    crossalign data tokenizer")
    for flag in (["--dry-run"], ["--seeds", "0"], ["--jobs", "2"]):
        assert main(["compare", str(path), "--prepare-only", *flag]) == 2
        assert f"drop {flag[0]}" in capsys.readouterr().err


def test_a_bad_prepare_step_is_refused_before_any_work(tmp_path, capsys):
    path = _study(tmp_path, prepare=[{"command": "data tokeniser --out x", "creates": "x"}])
    assert main(["compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        "prepare.0: 'data tokeniser --out x' is not a command a prepare step can run (did "
        "you mean 'data tokenizer'?); steps run one of: data tokenizer, data unmt-split, "
        "data dictionary-split, cooc build" in err
    )
    assert not (tmp_path / "study" / "runs").exists()
    path = _study(tmp_path, prepare=[{"command": "data tokenizer --window 2", "creates": "x"}])
    assert main(["compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert "prepare.0: 'data tokenizer --window 2' has options 'crossalign data tokenizer'" in err
    assert not (tmp_path / "study" / "runs").exists()
    path = _study(tmp_path, runs=[{"name": "a", "seeds": [], "inline": {"model": {}}}])
    assert main(["compare", str(path)]) == 2
    assert "run 'a' has empty 'seeds'" in capsys.readouterr().err


def test_a_model_run_is_evaluated_as_it_is(tmp_path, capsys):
    """A ``model`` run (the starting model of the others) is not trained: it is evaluated
    once, its records go to its run directory, the report shows it beside the trained runs,
    and a second call measures nothing again."""
    inline = yaml.safe_load(_study(tmp_path).read_text())["runs"][0]["inline"]
    base = tmp_path / "study" / "runs" / "base" / "model"
    retrieval = {"eval": "retrieval", "options": {"src_file": str(EN), "tgt_file": str(ES)}}
    path = _study(
        tmp_path,
        seeds=[0],
        runs=[{"name": "base", "inline": inline},
              {"name": "start", "model": "{out}/runs/base/model"},
              {"name": "cont", "inline": {**inline, "model": {"path": "{out}/runs/base/model"}}}],
        evaluations=[retrieval],
    )  # fmt: skip
    capsys.readouterr()
    assert main(["compare", str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("== pre-training") == 2 and printed.count("== evaluating") == 3
    start = tmp_path / "study" / "runs" / "start"
    assert not (start / "model").exists() and not (start / "seed-0").exists()
    assert yaml.safe_load((start / "config.yaml").read_text())["train"] == {"steps": 0, "seed": 0}
    (record,) = [json.loads(line) for line in (start / "results.jsonl").read_text().splitlines()]
    assert record["model"]["path"] == str(base.resolve())
    assert not (base / "results.jsonl").exists()
    report = (tmp_path / "study" / "report" / "report.md").read_text()
    # the seed its run-seeded evaluations used, and no training time: 0 minutes, not n/a
    assert f"| start | 0 | {start} | 0.0 |" in report and "without a logged time" not in report
    assert main(["compare", str(path), "--dry-run"]) == 0
    assert f"run      as is   {start}  (0 steps; 0 of 1" in capsys.readouterr().out
    assert main(["compare", str(path), "--no-report"]) == 0
    assert "== evaluating" not in capsys.readouterr().out


def test_a_model_run_must_name_one_source(tmp_path, capsys):
    path = _study(tmp_path, runs=[{"name": "start", "model": "m", "config": "c.yaml"}])
    assert main(["compare", str(path)]) == 2
    assert "needs one of 'config' (a file), 'inline' or 'model'" in capsys.readouterr().err
    path = _study(tmp_path, runs=[{"name": "start", "model": str(tmp_path / "none")}])
    assert main(["compare", str(path), "--no-report"]) == 2
    assert "model " + str(tmp_path / "none") + " does not exist" in capsys.readouterr().err


def test_an_evaluation_input_that_does_not_exist_is_refused_before_any_work(tmp_path, capsys):
    """A file an evaluation still to run reads is checked when the study is planned, not when
    the evaluation runs after the first run's training; a measured run's recorded evaluation
    does not need it again."""
    src, moved = tmp_path / "src.txt", tmp_path / "moved.txt"
    src.write_text(EN.read_text())
    retrieval = {"eval": "retrieval", "options": {"src_file": str(src), "tgt_file": str(ES)}}
    path = _study(tmp_path, seeds=[0], evaluations=[retrieval])
    src.rename(moved)
    for flags in (["--dry-run"], ["--no-report"]):
        assert main(["compare", str(path), *flags]) == 2
        err = capsys.readouterr().err
        assert f"evaluation retrieval: its option 'src_file' names {src}, which does not" in err
        assert "run 'mlm' (seed 0)" in err
    assert not (tmp_path / "study" / "runs").exists()  # nothing trained
    moved.rename(src)
    assert main(["compare", str(path), "--runs", "mlm", "--no-report"]) == 0
    src.rename(moved)
    assert main(["compare", str(path), "--runs", "mlm", "--no-report"]) == 0  # measured
    assert main(["compare", str(path), "--dry-run"]) == 2  # xlm still reads it
    assert "run 'xlm' (seed 0)" in capsys.readouterr().err


def test_an_evaluation_can_measure_some_runs_only(tmp_path, capsys):
    retrieval = {"eval": "retrieval", "options": {"src_file": str(EN), "tgt_file": str(ES)}}
    path = _study(
        tmp_path, seeds=[0], evaluations=[{"eval": "perplexity"}, {**retrieval, "runs": ["xlm"]}]
    )
    assert main(["compare", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    study = tmp_path / "study" / "runs"
    assert f"{study / 'mlm'}  (4 steps; 1 of 1 evaluations" in out
    assert f"{study / 'xlm'}  (4 steps; 2 of 2 evaluations" in out
    path = _study(tmp_path, evaluations=[{**retrieval, "runs": ["xml"]}])
    assert main(["compare", str(path), "--dry-run"]) == 2
    assert "evaluations.0 (retrieval) names run 'xml'" in capsys.readouterr().err


@dataclass
class _NoOptions:
    """Options of the test's model-free evaluation."""


def _model_free(model_dir: None, opts: _NoOptions) -> EvalOutput:
    return EvalOutput(metrics={"n": 1.0})


MODEL_FREE = Evaluation(name="test-model-free", summary="reads no model", options=_NoOptions,
                        metrics={"n": Metric("n", "count", None)},
                        run=f"{__name__}:_model_free", model="none")  # fmt: skip
"""A model-free evaluation, registered only while the test that uses it runs."""


def test_records_without_models_are_reused_and_a_new_evaluation_retrains(
    tmp_path, capsys, monkeypatch
):
    import shutil

    monkeypatch.setitem(EVALS._items, MODEL_FREE.name, MODEL_FREE)

    path = _study(tmp_path, seeds=[0], contrast=[["mlm", "xlm"]])
    assert main(["compare", str(path), "--no-report"]) == 0
    out = tmp_path / "study"
    runs = [out / "runs" / name for name in ("mlm", "xlm")]
    for run in runs:  # the records kept without the models, as a study moved off its machine
        shutil.rmtree(run / "model")
        shutil.rmtree(run / "checkpoints", ignore_errors=True)
    capsys.readouterr()
    assert main(["compare", str(path), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("measured") == 2
    assert main(["compare", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "== pre-training" not in printed and "== evaluating" not in printed
    report = (out / "report" / "report.md").read_text()
    assert "## Contrasts" in report and "**xlm vs mlm**: of " in report

    # an evaluation that reads no model runs on the measured runs without training them
    evals = yaml.safe_load(path.read_text())["evaluations"]
    with_free = [*evals, {"eval": "test-model-free"}]
    assert main(["compare", str(path), f"evaluations={json.dumps(with_free)}"]) == 0
    printed = capsys.readouterr().out
    assert "== pre-training" not in printed and printed.count("== evaluating") == 2
    assert not any((run / "model").exists() for run in runs)
    # once recorded, the model-free evaluation counts as done in the dry run
    assert main(["compare", str(path), f"evaluations={json.dumps(with_free)}", "--dry-run"]) == 0
    assert capsys.readouterr().out.count("0 of 3 evaluations to run") == 2

    # an evaluation they were not measured by needs the model: the runs are trained again,
    # bit-identical to the models their records measured, so only the new evaluation runs
    assert main(["compare", str(path), "evaluations.1.options.layer=1", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("== pre-training") == 2 and printed.count("bit-identical") == 2
    assert printed.count("== evaluating") == 2 and "retrieval" in printed
    assert all((run / "model").is_dir() for run in runs)


def test_records_kept_outside_the_study_carry_it_to_a_machine_without_its_files(tmp_path, capsys):
    """``--records DIR``: each measured run's records (no model) are copied to DIR; on a fresh
    machine (the study directory gone) they are restored, so the measured run is reused and
    only the rest trains; a run directory with records of its own is never overwritten."""
    import shutil

    from crossalign.study.parallel import child_command

    path = _study(tmp_path, seeds=[0])
    out, keep = tmp_path / "study", tmp_path / "kept"
    command = ["compare", str(path), "--runs", "mlm", "--no-report", "--records", str(keep)]
    assert main(command) == 0
    kept = keep / "runs" / "mlm"
    assert sorted(p.name for p in kept.iterdir()) == [
        "config.yaml",
        "metrics.jsonl",
        "model.sha256",
        "results.jsonl",
    ]
    assert (
        kept.joinpath("results.jsonl").read_text() == (out / "runs/mlm/results.jsonl").read_text()
    )

    shutil.rmtree(out)  # a fresh clone: only the kept records
    capsys.readouterr()
    assert main(["compare", str(path), "--records", str(keep), "--dry-run"]) == 0
    assert "the records of 1 runs would be restored first" in capsys.readouterr().out
    assert not (out / "runs/mlm/results.jsonl").exists()
    assert main(["compare", str(path), "--records", str(keep)]) == 0
    printed = capsys.readouterr().out
    assert "restored the records of 1 runs" in printed
    assert printed.count("== pre-training") == 1 and "== pre-training xlm" in printed
    assert not (out / "runs/mlm/model").exists() and (out / "report/report.md").is_file()
    assert (keep / "runs/xlm/results.jsonl").is_file()

    # the study directory's own records win over the kept ones, which are then brought up to date
    mine = (out / "runs/mlm/results.jsonl").read_text()
    kept.joinpath("results.jsonl").write_text("not a record\n")
    assert main(["compare", str(path), "--records", str(keep), "--no-report"]) == 0
    assert "restored the records of 0 runs" in capsys.readouterr().out
    assert (out / "runs/mlm/results.jsonl").read_text() == mine
    assert kept.joinpath("results.jsonl").read_text() == mine

    # records have their place under the study directory only
    outside = _study(tmp_path, seeds=[0], run_dir=str(tmp_path / "elsewhere/{run}"))
    assert main(["compare", str(outside), "--records", str(keep), "--dry-run"]) == 2
    assert "is outside it; keep the study's run_dir under its 'out'" in capsys.readouterr().err
    # the seed processes of --jobs keep their records too
    assert child_command("s.yaml", [], ["mlm"], 3, keep)[-2:] == ["--records", str(keep)]


def test_a_measured_run_trained_again_keeps_its_records_only_when_bit_identical(tmp_path, capsys):
    """On a fresh machine, a measured ``base`` whose model a run still to train continues from
    is trained again: bit-identical to the model its records measured (model.sha256), its
    records stand; trained to other weights than a run was continued from (start.sha256), the
    study stops before measuring anything, naming both."""
    import shutil

    path = _study(tmp_path, seeds=[0, 1], **_chain(tmp_path, base_seeds=[0]))
    out, keep = tmp_path / "study", tmp_path / "kept"
    command = ["compare", str(path), "--no-report", "--records", str(keep)]
    assert main(command) == 0
    digest = (keep / "runs/base/model.sha256").read_text().split()[0]
    for seed in (0, 1):
        started = keep / f"runs/cont/seed-{seed}/start.sha256"
        assert started.read_text().split()[0] == digest
    assert (out / "runs/base/model.sha256").read_text().split()[0] == digest

    def fresh_machine_with_cont_seed_1_to_train() -> None:
        shutil.rmtree(out)
        shutil.rmtree(keep / "runs/cont/seed-1")

    fresh_machine_with_cont_seed_1_to_train()
    capsys.readouterr()
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "== pre-training base seed 0" in printed and "bit-identical" in printed
    assert "== evaluating base" not in printed and "== pre-training cont seed 1" in printed
    assert "== pre-training cont seed 0" not in printed

    # records of an earlier base (weights 'f...f') that cont seed 0 was continued from
    fresh_machine_with_cont_seed_1_to_train()
    other = "f" * 64 + "  model\n"
    (keep / "runs/base/model.sha256").write_text(other)
    (keep / "runs/cont/seed-0/start.sha256").write_text(other)
    assert main(command) == 2
    captured = capsys.readouterr()
    assert "trained again to other weights than its records measured" in captured.out
    assert "== evaluating" not in captured.out  # stopped before measuring the new base
    assert f"has two digests in this study's records ({digest[:12]} by base (seed 0)" in (
        captured.err
    )
    assert "ffffffffffff by cont (seed 0), continued from it" in captured.err
    assert not (out / "runs/base/results.jsonl").exists()  # its old records are dropped

    # a malformed digest is an error naming the file
    (out / "runs/cont/seed-0/start.sha256").write_text("not a digest\n")
    assert main(command) == 2
    assert "start.sha256 is not a digest line" in capsys.readouterr().err


def test_a_starting_model_trained_to_other_weights_is_no_conflict_when_its_runs_train_again(
    tmp_path, capsys
):
    """Records of an earlier ``base`` (weights 'f...f') whose continued runs must all train
    again: ``base`` is trained again to other weights and measured again, and the runs then
    continue from it; nothing is compared across the two models, so nothing stops."""
    import shutil

    path = _study(tmp_path, seeds=[0, 1], **_chain(tmp_path, base_seeds=[0]))
    out, keep = tmp_path / "study", tmp_path / "kept"
    command = ["compare", str(path), "--no-report", "--records", str(keep)]
    assert main(command) == 0
    shutil.rmtree(out)
    shutil.rmtree(keep / "runs/cont")
    (keep / "runs/base/model.sha256").write_text("f" * 64 + "  model\n")
    capsys.readouterr()
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "trained again to other weights" in printed and "== evaluating base" in printed
    digest = (keep / "runs/base/model.sha256").read_text().split()[0]
    assert digest != "f" * 64
    assert (keep / "runs/cont/seed-1/start.sha256").read_text().split()[0] == digest


def test_a_model_run_is_measured_again_when_its_model_changes(tmp_path, capsys):
    """A ``model`` run records its model's digest; other weights under the same path drop its
    records and its evaluations run again."""
    import shutil

    trained = _study(tmp_path, seeds=[0], **_chain(tmp_path))
    assert main(["compare", str(trained), "--no-report"]) == 0
    runs = tmp_path / "study" / "runs"
    exported = tmp_path / "exported"
    shutil.copytree(runs / "base" / "model", exported)
    retrieval = {"eval": "retrieval", "options": {"src_file": str(EN), "tgt_file": str(ES)}}
    frozen = [{"name": "frozen", "model": str(exported)}]
    study = {"name": "frozen", "out": str(tmp_path / "frozen"), "seeds": [0], "runs": frozen,
             "evaluations": [retrieval]}  # fmt: skip
    path = tmp_path / "frozen.yaml"
    path.write_text(yaml.safe_dump(study))
    assert main(["compare", str(path), "--no-report"]) == 0
    recorded = (tmp_path / "frozen/runs/frozen/model.sha256").read_text().split()[0]
    capsys.readouterr()
    assert main(["compare", str(path), "--no-report"]) == 0
    assert "== evaluating" not in capsys.readouterr().out
    shutil.rmtree(exported)
    shutil.copytree(runs / "cont" / "model", exported)  # other weights, same path
    assert main(["compare", str(path), "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "is no longer the one its records measured" in printed
    assert "== evaluating frozen seed 0: retrieval" in printed
    assert (tmp_path / "frozen/runs/frozen/model.sha256").read_text().split()[0] != recorded


@pytest.mark.slow  # two seed processes, each loading the library: about 20 s alone
def test_jobs_with_records_trains_a_measured_starting_model_again_for_its_seed_processes(
    tmp_path, capsys
):
    """``--jobs`` with ``--records`` on a fresh machine: the shared ``base`` is planned with the
    whole study, so it is trained again for the seed process that continues from it (not
    reused without a model), and its bit-identical records stand."""
    import shutil

    path = _study(tmp_path, seeds=[0, 1], **_chain(tmp_path, base_seeds=[0]))
    out, keep = tmp_path / "study", tmp_path / "kept"
    command = ["compare", str(path), "--jobs", "2", "--records", str(keep)]
    assert main([*command, "--no-report"]) == 0
    shutil.rmtree(out)
    shutil.rmtree(keep / "runs/cont/seed-1")
    capsys.readouterr()
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "restored the records of 2 runs" in printed  # base and cont seed 0
    assert "== pre-training base seed 0" in printed and "bit-identical" in printed
    assert "== seed 1: done" in printed and (keep / "runs/cont/seed-1/results.jsonl").is_file()
    assert "== pre-training cont" in (out / "logs/seed-1.log").read_text()
    assert "== pre-training cont" not in (out / "logs/seed-0.log").read_text()
    assert (out / "report/report.md").is_file()


def test_records_keep_their_place_in_a_study_with_derived_corpora(tmp_path, capsys):
    """A study whose cells derive a corpus keeps each run's records under the study
    directory's layout (not the derived corpus's)."""
    study = Path(__file__).resolve().parents[2] / "configs/studies/derived.yaml"
    keep = tmp_path / "kept"
    argv = [
        "compare", str(study), "--runs", "mlm", "--no-report", "--records", str(keep),
        f"out={tmp_path / 'study'}", f"vars.corpus=[{EN}]", "matrix.transform=[trans]",
        "vars.preset=tiny", "vars.steps=2", "vars.batch_size=4", "vars.max_length=32",
        "derive.settings.vocab_size=120", 'evaluations=[{"eval": "perplexity"}]',
    ]  # fmt: skip
    assert main(argv) == 0
    kept = keep / "trans/runs/mlm"
    assert (kept / "results.jsonl").is_file() and (kept / "model.sha256").is_file()
    assert not (keep / "trans/derived").exists()


def test_seeds_runs_some_seeds_in_the_whole_studys_directories(tmp_path, capsys):
    path = _study(tmp_path)
    assert main(["compare", str(path), "--seeds", "1", "--runs", "mlm", "--no-report"]) == 0
    out = tmp_path / "study" / "runs" / "mlm"
    assert (out / "seed-1" / "model").is_dir() and not (out / "seed-0").exists()
    capsys.readouterr()
    assert main(["compare", str(path), "--runs", "mlm", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("== pre-training") == 1 and "mlm seed 0" in printed
    assert main(["compare", str(path), "--seeds", "0,3", "--dry-run"]) == 2
    assert "has no seed 3; its seeds: 0, 1" in capsys.readouterr().err


def test_records_without_models_through_a_chain_of_runs(tmp_path, capsys):
    """Records copied without models: a study whose runs are all measured needs neither its
    prepare steps nor its models; a run that must train again first retrains the measured run
    whose model it starts from."""
    import shutil

    study = {"seeds": [0], **_chain(tmp_path)}
    path = _study(tmp_path, **study)
    assert main(["compare", str(path), "--no-report"]) == 0
    out = tmp_path / "study"
    for name in ("base", "cont"):
        shutil.rmtree(out / "runs" / name / "model")
        shutil.rmtree(out / "runs" / name / "checkpoints", ignore_errors=True)
    shutil.rmtree(out / "tokenizer")
    capsys.readouterr()
    assert main(["compare", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "== crossalign" not in printed and "== pre-training" not in printed
    assert not (out / "tokenizer").exists() and (out / "report" / "report.md").is_file()

    # a new evaluation of cont alone: cont trains again, so base (measured) trains first
    study["evaluations"] = [{"eval": "perplexity"},
                            {"eval": "perplexity", "label": "again", "runs": ["cont"]}]  # fmt: skip
    path = _study(tmp_path, **study)
    assert main(["compare", str(path), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "run      train   " in printed and "measured" not in printed
    assert main(["compare", str(path), "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "== crossalign data tokenizer" in printed
    assert printed.index("== pre-training base") < printed.index("== pre-training cont")
    assert (out / "runs" / "cont" / "model").is_dir()


def test_jobs_runs_the_seeds_in_parallel_processes_after_the_shared_run(tmp_path, capsys):
    """``--jobs 2``: the shared ``base`` run (its own seeds) and the prepare step in this
    process, then one process per seed for ``cont``, then the report over everything."""
    path = _study(tmp_path, **_chain(tmp_path, base_seeds=[0]))
    assert main(["compare", str(path), "--jobs", "2"]) == 0
    out = tmp_path / "study"
    printed = capsys.readouterr().out
    assert "== shared runs first: base" in printed
    assert printed.count("== pre-training") == 1  # base here; cont in the seed processes
    for seed in (0, 1):
        assert f"== seed {seed}: done" in printed
        log = (out / "logs" / f"seed-{seed}.log").read_text()
        assert "== pre-training cont seed" in log
        assert (out / "runs" / "cont" / f"seed-{seed}" / "results.jsonl").is_file()
    assert (out / "report" / "report.md").is_file()
    # nothing is left to do
    assert main(["compare", str(path), "--jobs", "2", "--no-report"]) == 0
    assert "== pre-training" not in capsys.readouterr().out
    assert main(["compare", str(path), "--jobs", "2", "--seeds", "0"]) == 2
    assert "--jobs runs every seed in its own process" in capsys.readouterr().err


def test_jobs_splits_a_seed_into_runs_unless_one_run_uses_another(tmp_path):
    """``--jobs``: each run of a seed in its own process (the last process then holds one
    run, not a seed's every run); a seed whose run continues from, or evaluates, another of
    its runs keeps them in one process, in order; a directory that only starts like another
    run's (``mlm`` and ``mlm_x``) is not a use of it."""
    from crossalign.study.parallel import units
    from crossalign.study.spec import load_study

    study = load_study(_study(tmp_path))
    assert [(u.seed, u.runs, u.log) for u in units(study, ["mlm", "xlm"], [0, 1])] == [
        (0, ("mlm",), "seed-0-mlm.log"),
        (0, ("xlm",), "seed-0-xlm.log"),
        (1, ("mlm",), "seed-1-mlm.log"),
        (1, ("xlm",), "seed-1-xlm.log"),
    ]
    chain = _chain(tmp_path)
    chain["runs"][1]["inline"]["model"]["path"] = "{out}/runs/base/seed-{seed}/model"
    study = load_study(_study(tmp_path, **chain))
    assert [(u.seed, u.runs, u.log) for u in units(study, ["base", "cont"], [0, 1])] == [
        (0, ("base", "cont"), "seed-0.log"),
        (1, ("base", "cont"), "seed-1.log"),
    ]
    runs = yaml.safe_load(_study(tmp_path).read_text())["runs"]
    runs = [runs[0], {**runs[1], "name": "mlm_x"}]
    for target, together in (("mlm_x/extra", False), ("mlm/model", True)):
        options = {"src_file": f"{{out}}/runs/{target}", "tgt_file": str(ES)}
        evaluation = {"eval": "retrieval", "runs": ["mlm_x"], "options": options}
        study = load_study(_study(tmp_path, seeds=[0], runs=runs, evaluations=[evaluation]))
        assert len(units(study, ["mlm", "mlm_x"], [0])) == (1 if together else 2)
    # a model measured as it is (at the first seed only) that another run of the seed trains
    as_is = {"name": "as_is", "model": "{out}/runs/mlm/seed-{seed}/model"}
    study = load_study(_study(tmp_path, runs=[runs[0], as_is]))
    assert [(u.seed, u.runs, u.log) for u in units(study, ["mlm", "as_is"], [0, 1])] == [
        (0, ("mlm", "as_is"), "seed-0.log"),
        (1, ("mlm",), "seed-1.log"),
    ]


def test_an_evaluation_measures_checkpoints_for_a_learning_curve(tmp_path, capsys, monkeypatch):
    """``checkpoints``: each run's checkpoints are measured as well as its final model, each
    record under its own model; the report draws the metric against the step; records kept
    without the models are reused; steps the run does not keep are refused before training."""
    import shutil

    curve = {"eval": "perplexity", "options": {"source": "compute"}, "checkpoints": [2, 4]}
    path = _study(
        tmp_path, seeds=[0, 1], vars={"steps": 6}, evaluations=[curve],
        overrides=["train.save_every=2", "train.keep_checkpoints=3"],
    )  # fmt: skip
    assert main(["compare", str(path), "--runs", "mlm"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("== evaluating") == 6 and printed.count("at step 2:") == 2
    run = tmp_path / "study" / "runs" / "mlm" / "seed-0"
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    places = [Path(r["model"]["path"]).relative_to(run).as_posix() for r in records]
    assert places == ["model", "checkpoints/step-00000002", "checkpoints/step-00000004"]
    ppl = [r["metrics"]["mlm_ppl"] for r in records]
    assert len(set(ppl)) == 3  # three models, three measurements
    report = tmp_path / "study" / "report"
    text = (report / "report.md").read_text()
    assert "## Against the training step" in text and "model checkpoints/step-00000002" in text
    (figure,) = (report / "figures").glob("checkpoints-perplexity-*.png")
    assert figure.stat().st_size > 1000
    # hypotheses, gates and contrasts read the final models' records only
    from crossalign.study.run import report_study, run_study

    result = run_study(select_runs(load_study(path), ["mlm"]), report=False)
    assert [[r.place for r in kept] for kept in result.records.values()] == [["model"]] * 2
    assert result.records[run][0].metrics == records[0]["metrics"]
    result = report_study(select_runs(load_study(path), ["mlm"]))  # from the records alone
    assert [[r.place for r in kept] for kept in result.records.values()] == [["model"]] * 2
    assert "perplexity (final model)" in text

    # kept without their models, the records are reused; a checkpoint's record is not
    # mistaken for the final model's
    for seed_run in run.parent.iterdir():
        shutil.rmtree(seed_run / "model")
        shutil.rmtree(seed_run / "checkpoints")
    assert main(["compare", str(path), "--runs", "mlm", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "== pre-training" not in printed and "== evaluating" not in printed

    # a step the run would prune, or one it never saves, is refused before any training; so
    # are checkpoints of an evaluation that reads no model, or that measures no trained run.
    # 7 steps saving every 2 keep steps 2, 4, 6 and the last step's own, 7: 4 checkpoints
    monkeypatch.setitem(EVALS._items, MODEL_FREE.name, MODEL_FREE)
    free = {"eval": MODEL_FREE.name, "checkpoints": [2]}
    start = {"name": "start", "model": str(run)}
    for steps, keep, change, why in (
        (6, 2, {"evaluations": [{**curve, "checkpoints": [2]}]}, "set it to at least 3"),
        (7, 3, {"evaluations": [{**curve, "checkpoints": [2]}]}, "set it to at least 4"),
        (6, 2, {"evaluations": [{**curve, "checkpoints": [3]}]}, "is not a checkpoint"),
        (6, 2, {"evaluations": [free]}, "reads no model, so it has no checkpoints"),
        (6, 2, {"evaluations": [{**curve, "runs": ["start"]}], "runs": [start]},
         "measures no trained run"),
    ):  # fmt: skip
        path = _study(
            tmp_path, seeds=[0], vars={"steps": steps},
            overrides=["train.save_every=2", f"train.keep_checkpoints={keep}"], **change,
        )  # fmt: skip
        assert (
            main(["compare", str(path), "--runs", change.get("runs", [{"name": "xlm"}])[0]["name"]])
            == 2
        )
        assert why in capsys.readouterr().err
        assert not (tmp_path / "study" / "runs" / "xlm").exists()
    # a curve of a run that --runs leaves out measures nothing in this process: not refused
    only_mlm = [{**curve, "checkpoints": [2], "runs": ["mlm"]}]
    path = _study(
        tmp_path, seeds=[0], vars={"steps": 7}, evaluations=only_mlm,
        overrides=["train.save_every=2", "train.keep_checkpoints=4"],
    )  # fmt: skip
    assert main(["compare", str(path), "--runs", "xlm", "--dry-run"]) == 0
    path = _study(
        tmp_path, seeds=[0], vars={"steps": 7}, evaluations=[{**curve, "checkpoints": [2]}],
        overrides=["train.save_every=2", "train.keep_checkpoints=4"],
    )  # fmt: skip
    assert main(["compare", str(path), "--runs", "xlm", "--no-report"]) == 0
    xlm = tmp_path / "study" / "runs" / "xlm" / "checkpoints"
    assert sorted(p.name for p in xlm.iterdir() if p.name.startswith("step-"))[0] == "step-00000002"


def test_prune_checkpoints_deletes_a_measured_runs_checkpoints_unless_a_run_names_them(
    tmp_path, capsys
):
    """``--prune-checkpoints``: once a run's model is saved and measured its checkpoints go,
    except those another run of the study continues from; the study is then reused whole."""
    path = _study(
        tmp_path, seeds=[0], overrides=["train.save_every=2", "train.keep_checkpoints=2"]
    )  # fmt: skip
    study = yaml.safe_load(path.read_text())
    mlm, xlm = study["runs"]
    start = "{out}/runs/mlm/checkpoints/step-00000002"  # one seed: no seed-N folder
    inline = {k: v for k, v in mlm["inline"].items() if k not in ("model", "tokenizer")}
    study["runs"].append({"name": "cont", "inline": {**inline, "model": {"path": start}}})
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    # cont, left out here, still keeps mlm's checkpoints
    assert main(["compare", str(path), "--prune-checkpoints", "--runs", "mlm", "--no-report"]) == 0
    assert "checkpoint(s)" not in capsys.readouterr().out
    assert main(["compare", str(path), "--prune-checkpoints", "--no-report"]) == 0
    printed = capsys.readouterr().out
    runs = tmp_path / "study" / "runs"
    assert printed.count("checkpoint(s); its model and records stay") == 2
    assert sorted(p.name for p in (runs / "mlm" / "checkpoints").iterdir()) == [
        "step-00000002",
        "step-00000004",
    ]
    for name in ("xlm", "cont"):
        assert not (runs / name / "checkpoints").exists()
        assert (runs / name / "model").is_dir()
        assert len((runs / name / "results.jsonl").read_text().splitlines()) == 2
    assert main(["compare", str(path), "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "== pre-training" not in printed and "== evaluating" not in printed
    assert main(["compare", str(path), "--prepare-only", "--prune-checkpoints"]) == 2
    assert "drop --prune-checkpoints" in capsys.readouterr().err
