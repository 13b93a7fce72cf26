"""Code-switching state (refreshed dictionaries and cached CSLS terms) survives a resume: a run
resumed between two refreshes logs the losses of the uninterrupted run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.run_dir import read_metrics

SWITCH = "threshold: 1, other_max: 0, refresh_every: 2"


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(run_dir) if "loss" in r}


@pytest.mark.parametrize(
    ("objectives", "grad_accum", "resume_at"),
    [
        # SCS with cached terms reads them in forward: resumed at 2, step 3 uses the terms
        # refreshed before step 2, which only the checkpoint holds
        (f"[{{name: scs_mlm, {SWITCH}, csls_neighbourhood: vocabulary}}, {{name: mlm}}]", 1, 2),
        # SCS's default takes its CSLS terms from each batch: no state beyond the step
        ("[{name: scs_mlm, threshold: 1, other_max: 0}]", 1, 2),
        # TCS reads its dictionary in collate, before the refresh of step 4
        (f"[{{name: tcs_mlm, {SWITCH}}}]", 2, 3),
        # both code-switched MASS objectives in one encoder-decoder run
        (
            f"[{{name: scs_mass, {SWITCH}, csls_neighbourhood: vocabulary}}, "
            f"{{name: tcs_mass, {SWITCH}, layer: 1}}]",
            1,
            2,
        ),
    ],
    ids=["scs-vocabulary", "scs-batch", "tcs-grad-accum-2", "scs-tcs-mass"],
)
def test_resume_repeats_the_curve(tiny, tmp_path, capsys, objectives, grad_accum, resume_at):
    # no warm-up: with it the first update has lr 0, the refresh before step 2 repeats
    # start()'s state and a buffer missing from the checkpoint would go unnoticed
    extra = {"data.parallel": "{}", "train.steps": 4, "train.save_every": resume_at}
    extra["train.warmup_steps"] = 0
    args = tiny("a", objectives=objectives, **extra, **{"train.grad_accum": grad_accum})
    assert main(["train", *args]) == 0
    capsys.readouterr()
    full = losses(tmp_path / "a")
    assert sorted(full) == [1, 2, 3, 4]
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "step-00000004")
    assert main(["train", *args, "--resume"]) == 0
    assert f"step-{resume_at:08d} at step {resume_at}" in capsys.readouterr().out
    assert losses(tmp_path / "a") == full  # exactly: the state in force is restored
