"""Fault cases of ``crossalign compare``: a bad later run is refused before any work, and a
run whose directory is about to be replaced is named first."""

from __future__ import annotations

from pathlib import Path

import yaml

from crossalign.cli import main
from tests.integration.test_compare import _study


def _with_second_run(tmp_path: Path, second: dict) -> Path:
    study = yaml.safe_load(_study(tmp_path, seeds=[0]).read_text())
    base = study["runs"][0]["inline"]
    study["runs"][1]["inline"] = {**base, **second}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def test_a_typo_in_a_later_runs_objectives_stops_the_study_before_any_work(tmp_path, capsys):
    path = _with_second_run(tmp_path, {"objectives": [{"name": "mlm"}, {"name": "tlmm"}]})
    for argv in (["compare", str(path), "--dry-run"], ["compare", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "run 'xlm' (seed 0):" in err and "tlmm" in err and "did you mean 'tlm'" in err
        assert "--resume" not in err and "fix the study file" in err
    assert not (tmp_path / "study" / "runs").exists()


def test_a_missing_data_file_of_a_later_run_stops_the_study_before_any_work(tmp_path, capsys):
    study = yaml.safe_load(_study(tmp_path, seeds=[0]).read_text())
    missing = tmp_path / "gone.txt"
    path = _with_second_run(tmp_path, {**study["runs"][1]["inline"],
                                       "data": {**study["runs"][1]["inline"]["data"],
                                                "valid_mono": {"en": str(missing)}}})  # fmt: skip
    assert main(["compare", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"run 'xlm' (seed 0): data.valid_mono.en names {missing}, which does not exist" in err
    assert not (tmp_path / "study" / "runs").exists()


def test_a_run_about_to_be_replaced_is_named_first(tmp_path, capsys):
    path = _study(tmp_path, seeds=[0])
    assert main(["compare", str(path), "--no-report", "--runs", "mlm"]) == 0
    capsys.readouterr()
    assert main(["compare", str(path), "--no-report", "--runs", "mlm", "vars.steps=2"]) == 0
    printed = capsys.readouterr().out
    run = tmp_path / "study" / "runs" / "mlm"
    assert (
        f"{run} holds a run of another config than the study gives it now: its model, "
        "checkpoints and results are replaced" in printed
    )
