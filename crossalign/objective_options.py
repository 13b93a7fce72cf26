"""Objective options as a run records them: every option with the value the run used, the
defaults included, so that a default changed by a later crossalign never changes a run silently
on ``--resume`` or in a study's reuse of finished runs.

A run's ``config.yaml`` holds ``run_config_dict(cfg)``: the config with each objective's
options completed by its options' defaults. A saved config is compared after
``normalise_saved``, which completes options the same way; for a config written before an
option existed, or before its default changed, the option takes the value such runs used
(``DEFAULTS_BEFORE``), not today's default.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from crossalign.checks import RENAMED
from crossalign.config import RunConfig, config_from_data, config_to_dict
from crossalign.errors import CrossalignError
from crossalign.objectives import OBJECTIVES
from crossalign.options import MISSING, field_default

_DWA_BEFORE = {
    "sinkhorn_order": "rows-first",
    "ot_filter": "eq9-literal",
    "reduction": "sum",
    "layout": "tlm",
    "pointer_label": "max-plan",
}
_SCS_BEFORE = {"csls_neighbourhood": "vocabulary", "max_sentences": 100_000}
DEFAULTS_BEFORE: dict[str, dict[str, Any]] = {
    "dwa": _DWA_BEFORE,
    "mass_gc": {"masked_neighbours": False},
    "dict_mlm": {"random_replacement": "language"},
    "scs_mlm": _SCS_BEFORE,
    "scs_mass": _SCS_BEFORE,
    "tcs_mlm": {"max_sentences": 100_000},
    "tcs_mass": {"max_sentences": 100_000},
}
"""Per objective, the options a run saved without them used: what a run of an earlier
crossalign did where its default has changed since. Add a row here with every change of an
objective's default."""


def objective_defaults(name: str) -> dict[str, Any]:
    """The options of objective ``name`` that have a default, with it (tuples as lists), read
    from its options dataclass as evaluations' options are."""
    defaults = {f.name: field_default(f) for f in fields(OBJECTIVES.get(name).Options)}
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in defaults.items()
        if value is not MISSING
    }


def run_config_dict(cfg: RunConfig) -> dict:
    """``config_to_dict(cfg)`` with every objective's options completed by its defaults: the
    ``config.yaml`` of a run and what a saved one is compared with."""
    data = config_to_dict(cfg)
    for entry in data["objectives"]:
        entry["options"] = {**objective_defaults(entry["name"]), **entry["options"]}
    return data


def normalise_saved(saved: dict) -> dict:
    """A saved ``config.yaml`` as ``run_config_dict`` would write it today: fields added since
    take their defaults, options a legacy file lacks take the value its run used
    (``DEFAULTS_BEFORE``, else the default), renamed option values their names now. A file that
    is no valid config any more is returned as it is (it then differs)."""
    try:
        cfg = config_from_data(saved)
    except CrossalignError:
        return saved
    data = config_to_dict(cfg)
    for entry in data["objectives"]:
        name, given = entry["name"], entry["options"]
        if name not in OBJECTIVES.names():
            return saved
        given = {k: RENAMED.get(v, v) if isinstance(v, str) else v for k, v in given.items()}
        entry["options"] = {**objective_defaults(name), **DEFAULTS_BEFORE.get(name, {}), **given}
    return data
