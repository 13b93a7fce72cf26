"""Every run config and study file shipped in configs/ loads, and every objective it lists
takes the options it gives (a misspelt option would otherwise fail only when a run starts)."""

from pathlib import Path

import pytest

from crossalign.config import load_config
from crossalign.study.spec import load_study
from crossalign.training.setup import objective_classes, run_is_seq2seq

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RUN_CONFIGS = sorted(
    p for p in CONFIGS.rglob("*.yaml") if "studies" not in p.parts and "accelerate" not in p.parts
)
STUDIES = sorted((CONFIGS / "studies").rglob("*.yaml"))


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_run_config_loads_and_its_objectives_take_their_options(path):
    cfg = load_config(str(path), [])
    assert len(objective_classes(cfg)) == len(cfg.objectives) > 0
    assert run_is_seq2seq(cfg) == (path.name in ("unmt.yaml", "mass.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_study_file_loads(path):
    assert load_study(path).runs


def test_the_unmt_configs_are_found():
    names = {p.name for p in RUN_CONFIGS}
    assert {"unmt.yaml", "mass.yaml", "quickstart.yaml"} <= names
