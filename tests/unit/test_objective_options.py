"""Objective options recorded with their defaults; a saved config from before a default
changed is compared with the values its run used, never with today's defaults."""

from __future__ import annotations

from crossalign.config import config_from_data
from crossalign.objective_options import (
    DEFAULTS_BEFORE,
    normalise_saved,
    objective_defaults,
    run_config_dict,
)
from crossalign.run_dir import setting_changes

BASE = {"model": {"path": "runs/m"}, "data": {"corpus": "data/c"}}


def config(objectives: list) -> dict:
    return {**BASE, "objectives": objectives}


def test_run_config_records_every_option_with_its_default():
    data = run_config_dict(config_from_data(config([{"name": "dwa", "layer": 4}])))
    options = data["objectives"][0]["options"]
    assert options["layer"] == 4  # given
    assert options["ot_filter"] == "itermax" and options["reduction"] == "pooled"  # defaults
    assert options["replace_probs"] == [0.8, 0.1]  # plain data
    assert options == {**objective_defaults("dwa"), "layer": 4}
    assert normalise_saved(data) == data  # a config saved today compares equal to itself


def test_a_legacy_run_is_compared_with_the_values_it_used():
    """A dwa run saved before its defaults changed (options not recorded) ran rows-first
    Sinkhorn, Eq. 8-9 read literally and the summed loss: resuming it with today's defaults is
    a different run; naming those values resumes it."""
    legacy = config([{"name": "mlm"}, {"name": "dwa", "layer": 4}])
    now = run_config_dict(config_from_data(legacy))
    refused, _ = setting_changes(normalise_saved(legacy), now)
    changed = {r.split()[0] for r in refused}
    assert changed == {f"objectives.1.options.{k}" for k in DEFAULTS_BEFORE["dwa"]}
    old_values = {"name": "dwa", "layer": 4, **DEFAULTS_BEFORE["dwa"]}
    same = run_config_dict(config_from_data(config([{"name": "mlm"}, old_values])))
    assert setting_changes(normalise_saved(legacy), same) == ([], [])


def test_renamed_values_and_newer_fields():
    """``iterative`` is ``eq9-literal`` now; a field added since (``model.dropout``) takes its
    default; an objective whose defaults did not change compares equal."""
    legacy = config([{"name": "dwa", "ot_filter": "iterative"}, {"name": "mlm"}])
    normalised = normalise_saved(legacy)
    assert normalised["objectives"][0]["options"]["ot_filter"] == "eq9-literal"
    assert normalised["model"]["dropout"] is None
    mlm_only = config([{"name": "mlm"}])
    assert normalise_saved(mlm_only) == run_config_dict(config_from_data(mlm_only))


def test_an_invalid_saved_config_differs():
    bad = config([{"name": "no_such_objective"}])
    assert normalise_saved(bad) is bad
