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
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from crossalign.data.derive_settings import DeriveSettings, parse_transform
from crossalign.errors import CrossalignError

STUDY_OBJECTIVES = ("mlm", "xlm", "dict_mlm", "align_mlm")
VARIANT_OBJECTIVES = ("mlm_lang",)
"""Objectives the study also runs when named in ``--objectives``."""
LANGUAGE_EMBEDDINGS = {
    "mlm": False,
    "mlm_lang": True,
    "xlm": True,
    "dict_mlm": True,
    "align_mlm": False,
}
"""``model.language_embeddings`` of each study objective."""
EVAL_VERSION = 2
"""Part of the key of a cached evaluation: bumped when the scores it holds change."""


def objective_entries(
    name: str, derived: str, tlm_batch_size: int = 8
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``objectives`` list of a study objective and the data it adds (XLM's pairs, whose
    TLM objective draws ``tlm_batch_size`` pairs a step)."""
    from crossalign.data.derive import DERIVED_LANG

    dictionary = f"{derived}/dictionary/train.txt"
    if name in ("mlm", "mlm_lang"):
        return [{"name": "mlm"}], {}
    if name == "xlm":
        pairs = [f"{derived}/parallel/train.en", f"{derived}/parallel/train.{DERIVED_LANG}"]
        tlm = {"name": "tlm", "batch_size": tlm_batch_size}
        return [{"name": "mlm"}, tlm], {"parallel": {f"en-{DERIVED_LANG}": pairs}}
    if name == "dict_mlm":
        entry = {"name": "dict_mlm", "dictionary": dictionary, "vocab": f"{derived}/vocab.json"}
        return [entry], {}
    if name == "align_mlm":
        return [{"name": "align_mlm", "dictionary": dictionary, "alpha": 10.0}], {}
    from crossalign.registry import did_you_mean

    known = STUDY_OBJECTIVES + VARIANT_OBJECTIVES
    raise CrossalignError(
        f"unknown study objective '{name}'{did_you_mean(name, list(known))}; "
        f"choose from {', '.join(known)}"
    )


def study_config(
    name: str,
    derived: str,
    run_dir: str,
    *,
    preset: str = "small",
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 5e-4,
    max_length: int = 128,
    seed: int = 0,
    parallel_fraction: float = DeriveSettings.parallel_fraction,
) -> dict[str, Any]:
    """The run config (plain data, as in ``configs/derived/*.yaml``) of one study objective
    on the derived corpus ``derived``: a from-scratch model on the twin tokenizer (language
    embeddings as ``LANGUAGE_EMBEDDINGS`` says), MLM text of both languages, equal steps,
    batch, learning rate and seed for every objective. XLM's TLM batch is
    ``parallel_fraction`` of its MLM batch, pooled with it into one mean."""
    from crossalign.data.derive import DERIVED_LANG

    tlm_batch_size = max(1, round(batch_size * parallel_fraction))
    objectives, extra = objective_entries(name, derived, tlm_batch_size)
    pair = f"{derived}/en-{DERIVED_LANG}"
    return {
        "run_dir": run_dir,
        "model": {"preset": preset, "language_embeddings": LANGUAGE_EMBEDDINGS[name]},
        "tokenizer": {"path": f"{derived}/tokenizer"},
        "data": {
            "mono": {"en": f"{pair}/train.en", DERIVED_LANG: f"{pair}/train.{DERIVED_LANG}"},
            "valid_mono": {"en": f"{pair}/valid.en", DERIVED_LANG: f"{pair}/valid.{DERIVED_LANG}"},
            "max_length": max_length,
            **extra,
        },
        "objectives": objectives,
        "train": {
            "steps": steps,
            "batch_size": batch_size,
            "lr": lr,
            "warmup_steps": max(1, steps // 20),
            "seed": seed,
            "log_every": 50,
            **({"objective_mix": "pooled"} if name == "xlm" else {}),
        },
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


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman's rank correlation ρ of ``x`` and ``y`` and its two-sided p-value
    (``scipy.stats.spearmanr``); (NaN, NaN) with fewer than three points or a constant side."""
    if len(x) != len(y):
        raise ValueError("spearman: x and y differ in length")
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return float("nan"), float("nan")
    from scipy.stats import spearmanr

    result = spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


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


def _derive(out: Path, derive: DeriveSettings, command: str) -> None:
    """Write the derived corpus unless ``out`` already holds the one ``command`` writes."""
    from crossalign.data.corpus import load_card
    from crossalign.data.derive import write_derived

    if (out / "card.json").is_file() and load_card(out).get("command") == command:
        print(f"derived corpus: {out} (already written)")
        return
    write_derived(out, derive, command)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None


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


def run_study(
    out: str | Path,
    objectives: Sequence[str],
    derives: Sequence[tuple[DeriveSettings, str]],
    train: dict[str, Any],
    finetune,
    task: str = "pos",
    download: bool = False,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """For each ``(derive, command)`` of ``derives`` (the settings of one transform and the
    ``crossalign data derive`` command line that writes them, the corpus's reuse key), derive the
    corpus under ``out/<transform>/``, pre-train every objective with the same ``train``
    settings (``study_config`` keywords) and ``overrides``, score alignment and transfer
    (``finetune``: a FinetuneConfig); then correlate alignment with Δ over every (objective ×
    transform) point and write ``results.json`` and ``results.md`` under ``out``. Finished
    pre-trainings and evaluations with the same settings are reused, so an interrupted study
    continues where it stopped."""
    from crossalign.fileio import write_json_atomic, write_text_atomic

    for name in objectives:
        objective_entries(name, "")  # unknown names fail before any work
    dirs = transform_dirs([derive.transform for derive, _ in derives])
    out = Path(out)
    rows = []
    for directory, (derive, command) in zip(dirs, derives):
        rows += _run_transform(
            out / directory, objectives, derive, command, train, finetune, task, download,
            overrides,
        )  # fmt: skip
    correlation = correlations(rows)
    results = {
        "transforms": [derive.transform for derive, _ in derives],
        "task": task,
        "derive_commands": [command for _, command in derives],
        "train": train,
        "overrides": list(overrides),
        "finetune": asdict(finetune),
        "rows": rows,
        "spearman_alignment_delta": correlation,
    }
    write_json_atomic(out / "results.json", results)
    write_text_atomic(out / "results.md", format_results(rows, correlation) + "\n")
    return results


def _run_transform(
    out: Path,
    objectives: Sequence[str],
    derive: DeriveSettings,
    derive_command: str,
    train: dict[str, Any],
    finetune,
    task: str,
    download: bool,
    overrides: Sequence[str],
) -> list[dict[str, Any]]:
    """One transform of ``run_study``: its corpus in ``out/derived``, its runs in
    ``out/runs/<objective>``; the rows of its objectives."""
    from crossalign.checkpoint import list_checkpoints
    from crossalign.config import config_to_dict, load_config
    from crossalign.data.derive import DERIVED_LANG
    from crossalign.evals.alignment_score import (
        evaluate_alignment,
        evaluate_counterpart_alignment,
    )
    from crossalign.evals.transfer import evaluate_transfer
    from crossalign.fileio import write_json_atomic, write_text_atomic
    from crossalign.train import train as pretrain

    derived = out / "derived"
    _derive(derived, derive, derive_command)
    vocab = derived / "vocab.json"
    rows = []
    for name in objectives:
        run_dir = out / "runs" / name
        config_path = out / "configs" / f"{name}.yaml"
        plain = study_config(
            name,
            str(derived),
            str(run_dir),
            parallel_fraction=derive.parallel_fraction,
            **train,
        )
        write_text_atomic(config_path, yaml.safe_dump(plain, sort_keys=False))
        cfg = load_config(config_path, list(overrides))
        resolved = config_to_dict(cfg)
        model = run_dir / "model"
        same = _read_yaml(run_dir / "config.yaml") == resolved
        if not (same and model.is_dir()):
            resume = same and bool(list_checkpoints(run_dir))
            print(f"== pre-training {name} on {derive.transform} ({cfg.train.steps} steps)")
            # a run of this study with other settings (or an unfinished start) is replaced
            pretrain(cfg, resume="last" if resume else None, overwrite=not resume)
        key = {
            "version": EVAL_VERSION,
            "task": task,
            "finetune": asdict(finetune),
            "config": resolved,
        }
        cached = _read_json(run_dir / "study_eval.json")
        if cached is None or cached.get("key") != key:
            print(f"== evaluating {name} on {derive.transform}")
            scores = evaluate_counterpart_alignment(model, derived)
            held_out = derived / "dictionary" / "test.txt"
            scores.update(evaluate_alignment(model, held_out, vocab, "en", DERIVED_LANG))
            # the same retrieval on the training dictionary: what the dictionary objectives saw
            on_train = derived / "dictionary" / "train.txt"
            train_scores = evaluate_alignment(model, on_train, vocab, "en", DERIVED_LANG)
            scores["alignment_train_nn"] = train_scores["alignment_nn"]
            scores.update(evaluate_transfer(model, derived, task, finetune, download))
            scores["valid_mlm_ppl"] = _last_valid_ppl(run_dir)
            cached = {"key": key, "scores": scores}
            write_json_atomic(run_dir / "study_eval.json", cached)
        rows.append({"transform": derive.transform, "objective": name, **cached["scores"]})
    return rows


def _last_valid_ppl(run_dir: Path) -> float:
    """The final held-out MLM perplexity in a run's metrics.jsonl (NaN when absent)."""
    from crossalign.run_dir import read_metrics

    ppl = float("nan")
    for record in read_metrics(run_dir):
        ppl = record.get("valid/mlm_ppl", ppl)
    return ppl
