"""The controlled derived-language study (Deshpande et al. 2022; ALIGN-MLM, Tang et al. 2022,
Table 2): for each derived language (transform), pre-train one model per objective on English +
the derived language with the same budget and seed, then measure each model's alignment score
and its transfer gap Δ, and how the two correlate over every (objective × transform) point
(Spearman's ρ with its p-value; the paper finds alignment strongly anti-correlated with Δ).

Objectives: ``mlm`` (MLM on both languages), ``xlm`` (MLM + TLM on the parallel fraction of
the corpus), ``dict_mlm`` and ``align_mlm`` (MLM with the training dictionary). ALIGN-MLM and
the MLM baseline it is compared with have no language embeddings (App. G.5); XLM and DICT-MLM
have them. ``mlm_lang``, not in the default list, is MLM with language embeddings: the
baseline with XLM's and DICT-MLM's architecture. The budget is the same number of optimizer
steps with the same batch size per objective. XLM mixes MLM and TLM instances as one dataset:
its TLM pairs per step are the parallel fraction of its MLM sequences (25% by default) and one
mean runs over the predicted tokens of both (``train.objective_mix: pooled``).

The study is the study file ``configs/studies/derived.yaml`` run by ``crossalign compare``;
``crossalign study derived`` maps its flags onto that file, then writes the study's own table
(``results.json``/``results.md``) beside the report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from crossalign.data.derive.settings import DeriveSettings, parse_transform
from crossalign.errors import CrossalignError
from crossalign.stats import spearman

STUDY_FILE = Path(__file__).resolve().parents[2] / "configs" / "studies" / "derived.yaml"
"""The study file this module runs (in the source tree)."""
STUDY_OBJECTIVES = ("mlm", "xlm", "dict_mlm", "align_mlm")
VARIANT_OBJECTIVES = ("mlm_lang",)
"""Objectives the study also runs when named in ``--objectives``."""


def load_derived_study(objectives: Sequence[str] = STUDY_OBJECTIVES, overrides: Sequence[str] = ()):
    """The derived study (``configs/studies/derived.yaml``, with ``overrides`` to it) keeping
    only the runs of ``objectives``, in that order; an unknown objective is an error naming
    the known ones."""
    from crossalign.study.spec import load_study, select_runs

    if not STUDY_FILE.is_file():
        raise CrossalignError(
            f"{STUDY_FILE} is missing: the derived study runs from a crossalign source checkout"
        )
    known = STUDY_OBJECTIVES + VARIANT_OBJECTIVES
    for name in objectives:
        if name not in known:
            from crossalign.registry import did_you_mean

            raise CrossalignError(
                f"unknown study objective '{name}'{did_you_mean(name, list(known))}; "
                f"choose from {', '.join(known)}"
            )
    return select_runs(load_study(STUDY_FILE, overrides), list(objectives))


def study_vars(
    preset: str = "small",
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 5e-4,
    max_length: int = 128,
    parallel_fraction: float = DeriveSettings.parallel_fraction,
) -> dict[str, Any]:
    """The study file's budget variables for these settings: the same steps, batch, learning
    rate and length for every objective, warm-up over 5% of the steps, and XLM's TLM batch
    ``parallel_fraction`` of its MLM batch."""
    return {
        "preset": preset,
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "max_length": max_length,
        "warmup_steps": max(1, steps // 20),
        "tlm_batch_size": max(1, round(batch_size * parallel_fraction)),
    }


CORRELATIONS = (
    ("alignment", "delta"),
    ("alignment", "delta_f1"),
    ("alignment_nn", "delta"),
    ("alignment_csls", "delta"),
    ("alignment_train_nn", "delta"),
)
"""(alignment score, transfer gap) pairs the study correlates; the first is the paper's."""
LABELS = {
    "alignment": "alignment",
    "alignment_nn": "held-out dictionary (NN)",
    "alignment_csls": "held-out dictionary (CSLS)",
    "alignment_train_nn": "training dictionary (NN)",
    "delta": "Δ accuracy",
    "delta_f1": "Δ macro-F1",
}


def correlations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spearman's ρ and p of every ``CORRELATIONS`` pair over all rows (every objective ×
    transform point, ``over: all``) and over each transform's rows (``over: <transform>``)."""
    groups = {"all": rows}
    for r in rows:
        groups.setdefault(r["transform"], []).append(r)
    if len(groups) == 2:  # one transform: its rows are all the rows
        groups = {"all": rows}
    out = []
    for over, group in groups.items():
        for alignment, delta in CORRELATIONS:
            rho, p = spearman([r[alignment] for r in group], [r[delta] for r in group])
            out.append(
                {"alignment": alignment, "delta": delta, "over": over, "n": len(group),
                 "rho": rho, "p": p}
            )  # fmt: skip
    return out


def _number(x: float, spec: str) -> str:
    return "n/a" if math.isnan(x) else format(x, spec)


def format_results(rows: list[dict[str, Any]], correlation: list[dict[str, Any]]) -> str:
    """The study table (scores in %) and the correlations, as Markdown. ``alignment`` is the
    paper's score over all source tokens; the dictionary columns score only the source tokens
    of the held-out evaluation dictionary and of the training dictionary."""
    lines = [
        "| transform | objective | SUP | ZS | Δ | Δ macro-F1 | alignment | held-out dictionary "
        "(NN) | held-out dictionary (CSLS) | training dictionary (NN) | held-out MLM ppl |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['transform']} | {r['objective']} | {r['sup']:.1f} | {r['zs']:.1f} | "
            f"{r['delta']:.1f} | {r['delta_f1']:.1f} | {100 * r['alignment']:.1f} | "
            f"{100 * r['alignment_nn']:.1f} | {100 * r['alignment_csls']:.1f} | "
            f"{100 * r['alignment_train_nn']:.1f} | {r.get('valid_mlm_ppl', float('nan')):.1f} |"
        )
    lines += [
        "",
        "| Spearman ρ of | with | over | points | ρ | p |",
        "|---|---|---|---|---|---|",
    ]
    for c in correlation:
        lines.append(
            f"| {LABELS[c['alignment']]} | {LABELS[c['delta']]} | {c['over']} | {c['n']} | "
            f"{_number(c['rho'], '.2f')} | {_number(c['p'], '.2g')} |"
        )
    return "\n".join(lines)


def transform_dirs(transforms: Sequence[str]) -> list[str]:
    """The study's directory name of each transform (as given), after checking that each is a
    valid composition with ``trans`` and that no two are the same composition."""
    seen: dict[tuple[str, ...], str] = {}
    for spec in transforms:
        names = parse_transform(spec)
        if "trans" not in names:
            raise CrossalignError(
                f"the study needs a transliterated language (a dictionary between distinct "
                f"tokens): add trans to '{spec}', e.g. trans+inv"
            )
        if names in seen:
            raise CrossalignError(f"--transform lists '{seen[names]}' and '{spec}': the same one")
        seen[names] = spec
    return [spec.strip() for spec in transforms]


def run_derived_study(
    out: str | Path,
    objectives: Sequence[str],
    derive: DeriveSettings,
    transforms: Sequence[str],
    budget: dict[str, Any],
    finetune,
    task: str = "pos-silver",
    download: bool = False,
    overrides: Sequence[str] = (),
    seed: int = 0,
) -> dict[str, Any]:
    """Run the derived study in ``out`` (``crossalign compare`` on the study file): derive
    each transform's corpus with the settings ``derive``, pre-train every objective with the
    same ``budget`` (``study_vars`` keywords) and seed, with run-config ``overrides``; score
    alignment, transfer (``finetune``: a FinetuneConfig; the most-frequent-tag baseline on the
    same task and sentences) and held-out perplexity; then write
    ``results.json``/``results.md`` (the study's table and Spearman's ρ of alignment with Δ
    over every objective × transform point) and the report under ``out/report``. Finished
    corpora, runs and evaluations with the same settings are reused."""
    from crossalign.evals.options import MostFrequentTagOptions
    from crossalign.fileio import write_json_atomic, write_text_atomic
    from crossalign.study.run import run_study

    dirs = transform_dirs(transforms)
    study = load_derived_study(objectives)
    study.out = str(out)
    study.seeds = [seed]
    study.matrix = {"transform": dirs}
    study.overrides = [*study.overrides, *overrides]
    study.vars.update(study_vars(parallel_fraction=derive.parallel_fraction, **budget))
    corpus = list(derive.corpus)
    study.derive.settings = {**asdict(derive), "transform": "{transform}", "corpus": corpus}
    data = {"task": task, "download": download}
    shared = {f.name for f in fields(MostFrequentTagOptions)}  # seed, max_length, max_train/test
    baseline = {k: v for k, v in asdict(finetune).items() if k in shared}
    # eval transfer also drops sentences longer than the model's positions, which are the
    # pre-training length (models.build); the baseline gets the same limit
    baseline["max_length"] = min(finetune.max_length, int(study.vars["max_length"]))
    for spec in study.evaluations:
        if spec.eval == "transfer":
            spec.options = {**spec.options, **asdict(finetune), **data}
        elif spec.eval == "most-frequent-tag":  # the tagger's baseline on the same sentences
            spec.options = {**spec.options, **baseline, **data}
    result = run_study(study)
    rows = []
    for run in result.runs:
        metrics = {r.label or r.eval: r.metrics for r in result.records[run.run_dir]}
        row = {"transform": run.cell["transform"], "objective": run.name}
        row.update(metrics["alignment-score"])
        row["alignment_train_nn"] = metrics["alignment_train"]["alignment_nn"]
        row.update(metrics["transfer"])
        row["valid_mlm_ppl"] = metrics["perplexity"].get("mlm_ppl", float("nan"))
        rows.append(row)
    correlation = correlations(rows)
    results = {
        "transforms": list(dirs),
        "task": task,
        "derive": asdict(derive),
        "train": budget,
        "overrides": list(overrides),
        "finetune": asdict(finetune),
        "rows": rows,
        "spearman_alignment_delta": correlation,
    }
    write_json_atomic(Path(out) / "results.json", results)
    write_text_atomic(Path(out) / "results.md", format_results(rows, correlation) + "\n")
    return results
