"""Experiment tracking through accelerate's trackers (TensorBoard, Weights & Biases, MLflow...).

The training loop logs every ``metrics.jsonl`` record to the trackers named by
``train.log_with`` too, with the same keys and ``step``; the run's config, flattened to
``section.key`` hyper-parameters, is stored when the trackers start. Nothing here imports a
tracker package: accelerate does, when the ``Accelerator`` is built.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean

# accelerate's tracker names -> (a module accelerate needs for it, the PyPI package to install)
TRACKERS: dict[str, tuple[tuple[str, ...], str]] = {
    "tensorboard": (("tensorboard", "tensorboardX"), "tensorboard"),
    "wandb": (("wandb",), "wandb"),
    "mlflow": (("mlflow",), "mlflow"),
    "comet_ml": (("comet_ml",), "comet-ml"),
    "aim": (("aim",), "aim"),
    "clearml": (("clearml",), "clearml"),
    "dvclive": (("dvclive",), "dvclive"),
    "swanlab": (("swanlab",), "swanlab"),
    "trackio": (("trackio",), "trackio"),
}


def check_tracker_names(names: list[str], where: str = "train.log_with") -> None:
    """Raise a one-line error for a name that is not one of ``TRACKERS`` (with the nearest)
    or that is listed twice."""
    for i, name in enumerate(names):
        if name not in TRACKERS:
            raise CrossalignError(
                f"{where}.{i}: unknown tracker '{name}'{did_you_mean(str(name), list(TRACKERS))}; "
                f"trackers: {', '.join(TRACKERS)}"
            )
        if name in names[:i]:
            raise CrossalignError(f"{where}.{i}: tracker '{name}' is listed twice")


def check_trackers_installed(names: list[str]) -> None:
    """Raise a one-line error naming the package to install for a tracker whose package is
    missing (accelerate would otherwise drop that tracker with a warning)."""
    for name in names:
        modules, package = TRACKERS[name]
        if not any(importlib.util.find_spec(m) is not None for m in modules):
            raise CrossalignError(
                f"train.log_with: tracker '{name}' needs the {package} package, which is not "
                f"installed: pip install {package}"
            )


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``config`` (plain data) as one level of ``a.b.c`` keys with values every tracker
    stores as a hyper-parameter: numbers, strings and booleans kept, anything else (None,
    lists, an empty mapping) as its JSON text."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_config(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value)
    return out
