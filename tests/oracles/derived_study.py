"""The run config the derived study file gives one objective, spelt out (a test oracle: the
shipped configs/derived/*.yaml must equal it)."""

from __future__ import annotations

from typing import Any

from crossalign.config import RunConfig
from crossalign.data.derive.settings import DeriveSettings
from crossalign.schema import apply_override
from crossalign.study.derived import load_derived_study, study_vars
from crossalign.study.spec import substitute


def study_config(
    name: str,
    derived: str,
    run_dir: str,
    *,
    seed: int = 0,
    parallel_fraction: float = DeriveSettings.parallel_fraction,
    **budget: Any,
) -> dict[str, Any]:
    """The run config (plain data, as in ``configs/derived/*.yaml``) the study file gives
    objective ``name`` on the derived corpus ``derived``; ``budget``: ``study_vars`` keywords."""
    study = load_derived_study([name])
    (run,) = study.runs
    variables = {
        **study.vars,
        **study_vars(parallel_fraction=parallel_fraction, **budget),
        "derived": derived,
        "run": name,
        "seed": seed,
    }
    plain = substitute(run.inline, variables, f"runs.{name}")
    for item in [*substitute(run.overrides, variables, "overrides"), f"run_dir={run_dir}"]:
        apply_override(plain, item, RunConfig)
    plain.setdefault("train", {})["seed"] = seed
    return plain
