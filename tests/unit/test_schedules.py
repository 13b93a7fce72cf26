"""Objective weight schedules against a transcription of XLM's ``get_lambda_value``, the
config's checks of a schedule and of ``train.step_per_objective``, and the shipped UNMT configs
that use both (the CPU study keeps the settings of its recorded results)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from crossalign.config import config_from_data, config_to_dict, load_config
from crossalign.errors import CrossalignError
from crossalign.schedules import WeightSchedule, parse_weight
from crossalign.study.spec import load_study, plan, substitute
from crossalign.training.setup import check_step_per_objective

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def xlm_parse_lambda_config(x: str) -> tuple[float, list[tuple[int, float]] | None]:
    """XLM ``src/utils.py`` ``parse_lambda_config`` for one coefficient, as written there:
    (the starting value, the schedule or None for a constant)."""
    split = x.split(",")
    if len(split) == 1:
        return float(x), None
    split = [s.split(":") for s in split]
    assert all(len(s) == 2 for s in split)
    assert all(k.isdigit() for k, _ in split)
    assert all(int(split[i][0]) < int(split[i + 1][0]) for i in range(len(split) - 1))
    return float(split[0][1]), [(int(k), float(v)) for k, v in split]


def xlm_get_lambda_value(config: list[tuple[int, float]], n_iter: int) -> float:
    """XLM ``src/utils.py`` ``get_lambda_value``, as written there."""
    ranges = [i for i in range(len(config) - 1) if config[i][0] <= n_iter < config[i + 1][0]]
    if len(ranges) == 0:
        assert n_iter >= config[-1][0]
        return config[-1][1]
    assert len(ranges) == 1
    i = ranges[0]
    x_a, y_a = config[i]
    x_b, y_b = config[i + 1]
    return y_a + (n_iter - x_a) * float(y_b - y_a) / float(x_b - x_a)


XLM_SCHEDULES = [
    "0:1,100000:0.1,300000:0",  # XLM's UNMT --lambda_ae
    "0:1,1000:0",  # the examples of parse_lambda_config's docstring
    "0:0,1000:0,2000:1",
    "0:0.3,7:0.9,8:0.2,13:0.2",
]


@pytest.mark.parametrize("text", XLM_SCHEDULES)
def test_schedule_is_xlms_get_lambda_value_at_every_step(text):
    start, config = xlm_parse_lambda_config(text)
    schedule = parse_weight("w", text)
    assert schedule.value(0) == start
    last = config[-1][0]
    steps = sorted({*range(0, 2100), *range(0, last + 5000, 97), last - 1, last, last + 1, 10**7})
    for n in steps:
        assert schedule.value(n) == xlm_get_lambda_value(config, n), n


def test_xlm_lambda_ae_by_hand():
    schedule = parse_weight("w", "0:1,100000:0.1,300000:0")
    assert schedule.value(50_000) == pytest.approx(0.55)
    assert schedule.value(100_000) == pytest.approx(0.1)
    assert schedule.value(200_000) == pytest.approx(0.05)
    assert schedule.value(300_000) == schedule.value(10**9) == 0.0
    assert not schedule.is_constant and not schedule.is_zero


def test_a_number_is_a_constant_schedule_and_no_step_precedes_zero():
    assert parse_weight("w", 0.5) == WeightSchedule.constant(0.5)
    assert parse_weight("w", 2).value(10**6) == 2.0
    assert parse_weight("w", "0:0.5").is_constant
    assert parse_weight("w", "0:0,10:0").is_zero
    with pytest.raises(ValueError, match="before the schedule's first point"):
        parse_weight("w", "0:1,5:0").value(-1)  # XLM asserts n_iter >= the last step here


FIX = "write STEP:VALUE points with steps increasing from 0, e.g. '0:1,100000:0.1,300000:0'"


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        ("0:1,100", f"objective dae: weight: '100' in '0:1,100' is not STEP:VALUE; {FIX}"),
        ("0:1;10:0", "objective dae: weight: the value '1;10:0' in '0:1;10:0' must be a finite"),
        ("0:1,1e3:0", f"objective dae: weight: '1e3:0' in '0:1,1e3:0' is not STEP:VALUE; {FIX}"),
        ("0:1,-5:0", f"objective dae: weight: '-5:0' in '0:1,-5:0' is not STEP:VALUE; {FIX}"),
        ("0:1,10:x", "objective dae: weight: the value 'x' in '0:1,10:x' must be a finite number"),
        ("0:1,10:-1", "objective dae: weight: the value '-1' in '0:1,10:-1' must be a finite"),
        ("0:1,10:nan", "objective dae: weight: the value 'nan' in '0:1,10:nan' must be a finite"),
        ("5:1,10:0", f"objective dae: weight: '5:1,10:0' starts at step 5; {FIX}"),
        ("0:1,10:0,10:1", "objective dae: weight: in '0:1,10:0,10:1' step 10 follows step 10"),
        ("0:1,10:0,5:1", f"objective dae: weight: in '0:1,10:0,5:1' step 5 follows step 10; {FIX}"),
        ("", f"objective dae: weight: '' in '' is not STEP:VALUE; {FIX}"),
        (-1, "objective dae: weight=-1.0 must be >= 0"),
        (True, "objectives.0.weight=True must be of type float"),
        ([1], "objectives.0.weight=[1] must be of type float"),
    ],
)
def test_a_bad_schedule_is_one_line_naming_the_key(weight, message):
    with pytest.raises(CrossalignError) as e:
        config_from_data({"objectives": [{"name": "dae", "weight": weight}, {"name": "bt"}]})
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_schedule_in_the_config_and_on_the_command_line():
    data = {"objectives": [{"name": "dae", "weight": "0:1,100:0"}, {"name": "bt"}]}
    cfg = config_from_data(data, ["objectives.1.weight=0:0,10:1", "objectives.0.weight=5e-1"])
    assert cfg.objectives[0].weight == 0.5
    assert cfg.objectives[1].schedule().value(5) == 0.5
    assert config_to_dict(cfg)["objectives"][1]["weight"] == "0:0,10:1"  # config.yaml keeps it


def test_every_objective_zero_at_every_step_is_refused():
    data = {"objectives": [{"name": "dae", "weight": "0:0,100:0"}, {"name": "bt", "weight": 0}]}
    with pytest.raises(CrossalignError, match="every objective has weight 0"):
        config_from_data(data)
    data["objectives"][1]["weight"] = "0:0,100:1"
    assert config_from_data(data).objectives[1].schedule().value(100) == 1.0


def test_step_per_objective_with_pooled_mixing_is_refused():
    with pytest.raises(CrossalignError) as e:
        config_from_data({"train": {"step_per_objective": True, "objective_mix": "pooled"}})
    assert str(e.value) == (
        "train.step_per_objective gives each objective its own update, so its loss cannot be "
        "pooled with the others': drop train.objective_mix: pooled or train.step_per_objective"
    )
    with pytest.raises(CrossalignError, match="train.step_per_objective='yes' must be of type"):
        config_from_data({"train": {"step_per_objective": "yes"}})


class Headed(nn.Module):
    """An objective with parameters of its own (as DWA's pointer network)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(2, 2)


def test_step_per_objective_refuses_own_parameters_on_several_processes():
    cfg = config_from_data({"train": {"step_per_objective": True}})
    objectives = {"mlm": nn.Module(), "dwa": Headed()}
    check_step_per_objective(cfg, objectives, 1)
    check_step_per_objective(cfg, {"mlm": nn.Module(), "tlm": nn.Module()}, 2)
    with pytest.raises(CrossalignError, match="objective 'dwa' has parameters of its own"):
        check_step_per_objective(cfg, objectives, 2)
    summed = config_from_data({})
    check_step_per_objective(summed, objectives, 2)


def test_the_unmt_config_follows_xlm():
    cfg = load_config(CONFIGS / "unmt.yaml")
    weights = {oc.name: oc.weight for oc in cfg.objectives}
    assert weights == {"dae": "0:1,100000:0.1,300000:0", "bt": 1.0}
    assert cfg.train.step_per_objective and cfg.train.objective_mix == "weighted"


@pytest.mark.parametrize(
    ("study", "dae_weight", "per_objective"),
    [
        ("unmt.yaml", 1.0, False),  # the settings of its recorded results
        ("gpu/unmt.yaml", "0:1,100000:0.1,300000:0", True),
    ],
)
def test_the_unmt_studies_loops(study, dae_weight, per_objective):
    spec = load_study(CONFIGS / "studies" / study)
    runs = [r for r in plan(spec) if r.name.startswith("unmt_")]
    for run in runs:
        inline = next(r.inline for r in spec.runs if r.name == run.name)
        cfg = config_from_data(substitute(inline, run.variables, run.name), run.overrides)
        assert cfg.objectives[0].name == "dae" and cfg.objectives[0].weight == dae_weight
        assert cfg.train.step_per_objective is per_objective
    assert runs
