"""The evaluation registry: each evaluation declares its options (a dataclass), its metrics
(direction and unit) and where its implementation lives, so the CLI, the result records and the
report all read one description. Importing this module imports no torch."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crossalign.errors import CrossalignError
from crossalign.registry import Registry

Unit = Literal["fraction", "percent", "ratio", "count", "nats", "perplexity", "seconds"]


@dataclass(frozen=True)
class Metric:
    """How one metric is read: its direction and unit, and its column header."""

    label: str
    """Column header, e.g. ``Hit@1``, ``AER``, ``Δ macro-F1``."""
    unit: Unit
    """``fraction`` values are shown as percentages; ``percent`` values already are."""
    higher_is_better: bool | None = True
    """None for counts and sizes: reported, never ranked."""


@dataclass
class EvalOutput:
    """What an evaluation's implementation returns."""

    metrics: dict[str, float]
    """Flat; per layer ``L8/aer``, per bin ``bin3/translated``; every base name declared."""
    notes: list[str] = field(default_factory=list)
    """Lines printed above the table (gold-set summary, encoding, warnings)."""
    legacy: dict | None = None
    """The evaluation's own JSON payload (``--json FILE``), when it has one."""
    files: dict[str, str] = field(default_factory=dict)
    """Files it wrote (plots, reports), by role."""


def split_key(key: str) -> tuple[str, str]:
    """A metric key's (prefix, base name): ``L8/aer`` → (``L8``, ``aer``); ``aer`` →
    (``""``, ``aer``)."""
    prefix, _, base = key.rpartition("/")
    return prefix, base


@dataclass(frozen=True)
class Evaluation:
    """One registered evaluation."""

    name: str
    summary: str
    """One line for ``crossalign ls evaluations`` and ``--help``."""
    options: type
    """A dataclass of its options; each field documented by the comment string below it."""
    metrics: Mapping[str, Metric]
    """Its metrics by base name (a per-layer key ``L8/aer`` has base name ``aer``)."""
    run: str
    """``module:function`` taking ``(model_dir: str | None, options) -> EvalOutput``;
    imported only when the evaluation runs."""
    model: Literal["required", "optional", "none"] = "required"
    """Whether it reads a model."""
    version: int = 1
    """Bumped whenever its figures change for the same options; part of the reuse key."""
    run_seed: bool = False
    """In a study, its ``seed`` option follows the run's seed unless the study sets it (the
    fine-tuning of ``transfer``: its variance is sampled with the runs')."""

    def metric(self, key: str) -> Metric:
        """The declaration of ``key`` (``L8/aer`` → ``aer``, ``bin3/translated`` →
        ``translated``); an undeclared key is a programming error."""
        base = split_key(key)[1]
        if base not in self.metrics:
            raise KeyError(f"evaluation '{self.name}' returned undeclared metric '{key}'")
        return self.metrics[base]

    def build_options(self, options: Mapping[str, Any] | Any) -> Any:
        """Options as the dataclass, from a mapping (YAML values, did-you-mean on unknown
        keys) or an instance."""
        from crossalign.schema import build_dataclass

        return build_dataclass(self.options, options, where=f"eval {self.name}")

    def implementation(self) -> Callable[[str | None, Any], EvalOutput]:
        """The function that runs it."""
        module, _, func = self.run.partition(":")
        return getattr(importlib.import_module(module), func)

    def __call__(self, model_dir: str | Path | None, **options: Any) -> dict[str, float]:
        """Run it on ``model_dir`` with keyword options; the metrics (no record written)."""
        return evaluate(self, model_dir, self.build_options(options)).metrics


def evaluate(evaluation: Evaluation, model_dir: str | Path | None, opts: Any) -> EvalOutput:
    """Run ``evaluation`` with built options ``opts``, checking the model argument and that
    every returned metric is declared."""
    if evaluation.model == "required" and model_dir is None:
        raise CrossalignError(f"eval {evaluation.name} needs a model: give --model DIR")
    if evaluation.model == "none" and model_dir is not None:
        raise CrossalignError(f"eval {evaluation.name} reads no model; drop --model")
    out = evaluation.implementation()(None if model_dir is None else str(model_dir), opts)
    for key in out.metrics:
        evaluation.metric(key)
    return out


def _plain(value: Any) -> Any:
    """An option value as plain record data: paths absolute strings, tuples lists."""
    if isinstance(value, Path):
        return str(value.resolve())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def options_dict(opts: Any) -> dict[str, Any]:
    """Options as plain data for a record: paths made absolute strings, tuples lists."""
    return {f.name: _plain(getattr(opts, f.name)) for f in dataclasses.fields(opts)}


def option_defaults(evaluation: Evaluation) -> dict[str, Any]:
    """The defaults of ``evaluation``'s options (those that have one), as record data: what a
    record written before an option existed measured with."""
    out = {}
    for f in dataclasses.fields(evaluation.options):
        if f.default is not dataclasses.MISSING:
            out[f.name] = _plain(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = _plain(f.default_factory())
    return out


EVALS: Registry[Evaluation] = Registry("evaluation", plugins="crossalign.evaluations")
"""Every evaluation, by name; filled by ``crossalign.evals.catalog``."""


def evaluations() -> Registry[Evaluation]:
    """The registry with the catalog loaded (``crossalign.evals`` loads it on import, so the
    catalog, which imports this module, is not imported back from here)."""
    return EVALS
