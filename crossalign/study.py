"""The controlled derived-language study (Deshpande et al. 2022; ALIGN-MLM, Tang et al. 2022,
Table 2): pre-train one model per objective on English + a derived language with the same
budget and seed, then measure each model's alignment score and its transfer gap Δ, and how the
two correlate (Spearman's ρ; the paper finds alignment strongly anti-correlated with Δ).

Objectives: ``mlm`` (MLM on both languages), ``xlm`` (MLM + TLM on the parallel fraction of
the corpus), ``dict_mlm`` and ``align_mlm`` (MLM with the training dictionary). The budget is
the same number of optimizer steps with the same batch size per objective (XLM's TLM batch
comes on top of its MLM batch, as in XLM).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from crossalign.errors import CrossalignError

STUDY_OBJECTIVES = ("mlm", "xlm", "dict_mlm", "align_mlm")


def objective_entries(name: str, derived: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``objectives`` list of a study objective and the data it adds (XLM's pairs)."""
    from crossalign.data.derive import DERIVED_LANG

    dictionary = f"{derived}/dictionary/train.txt"
    if name == "mlm":
        return [{"name": "mlm"}], {}
    if name == "xlm":
        pairs = [f"{derived}/parallel/train.en", f"{derived}/parallel/train.{DERIVED_LANG}"]
        return [{"name": "mlm"}, {"name": "tlm"}], {"parallel": {f"en-{DERIVED_LANG}": pairs}}
    if name == "dict_mlm":
        entry = {"name": "dict_mlm", "dictionary": dictionary, "vocab": f"{derived}/vocab.json"}
        return [entry], {}
    if name == "align_mlm":
        return [{"name": "align_mlm", "dictionary": dictionary, "alpha": 10.0}], {}
    from crossalign.registry import did_you_mean

    raise CrossalignError(
        f"unknown study objective '{name}'{did_you_mean(name, list(STUDY_OBJECTIVES))}; "
        f"choose from {', '.join(STUDY_OBJECTIVES)}"
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
) -> dict[str, Any]:
    """The run config (plain data, as in ``configs/derived/*.yaml``) of one study objective
    on the derived corpus ``derived``: a from-scratch model on the twin tokenizer, MLM text of
    both languages, equal steps, batch, learning rate and seed for every objective."""
    from crossalign.data.derive import DERIVED_LANG

    objectives, extra = objective_entries(name, derived)
    pair = f"{derived}/en-{DERIVED_LANG}"
    return {
        "run_dir": run_dir,
        "model": {"preset": preset},
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
        },
    }


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values``, ties getting the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation ρ: Pearson's correlation of the (tie-averaged) ranks.
    NaN when either side is constant or has fewer than two values."""
    if len(x) != len(y):
        raise ValueError("spearman: x and y differ in length")
    rx, ry = ranks(x), ranks(y)
    n = len(rx)
    if n < 2:
        return float("nan")
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return float("nan")
    return cov / (vx * vy) ** 0.5


def format_results(rows: list[dict[str, Any]], correlation: dict[str, float]) -> str:
    """The study table (accuracies and alignment in %) and the correlations, as Markdown.
    Alignment is scored on the evaluation dictionary, and (NN) on the training dictionary."""
    lines = [
        "| objective | SUP | ZS | Δ | alignment (NN) | alignment (CSLS) | alignment on the "
        "training dictionary (NN) | held-out MLM ppl |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['objective']} | {r['sup']:.1f} | {r['zs']:.1f} | {r['delta']:.1f} | "
            f"{100 * r['alignment_nn']:.1f} | {100 * r['alignment_csls']:.1f} | "
            f"{100 * r['alignment_train_nn']:.1f} | {r.get('valid_mlm_ppl', float('nan')):.1f} |"
        )
    lines.append("")
    lines.append(
        f"Spearman ρ(alignment, Δ): {correlation['nn']:.2f} (NN), {correlation['csls']:.2f} "
        f"(CSLS), {correlation['train_nn']:.2f} (NN on the training dictionary)"
    )
    return "\n".join(lines)


def _derive(out: Path, derive: dict[str, Any], command: str) -> None:
    """Write the derived corpus unless ``out`` already holds the one ``command`` writes."""
    from crossalign.data.corpus import load_card
    from crossalign.data.derive import write_derived

    if (out / "card.json").is_file() and load_card(out).get("command") == command:
        print(f"derived corpus: {out} (already written)")
        return
    write_derived(out, command=command, **derive)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def run_study(
    out: str | Path,
    objectives: Sequence[str],
    derive: dict[str, Any],
    derive_command: str,
    train: dict[str, Any],
    finetune,
    task: str = "pos",
    download: bool = False,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """Derive the corpus (``write_derived(**derive)``), pre-train every objective with the
    same ``train`` settings (``study_config`` keywords) and ``overrides``, score alignment
    and transfer (``finetune``: a FinetuneConfig), and write ``results.json`` and
    ``results.md`` under ``out``. Finished pre-trainings and evaluations with the same settings
    are reused, so an interrupted study continues where it stopped."""
    from crossalign.config import config_to_dict, load_config
    from crossalign.data.derive import DERIVED_LANG
    from crossalign.evals.alignment_score import evaluate_alignment
    from crossalign.evals.transfer import evaluate_transfer
    from crossalign.fileio import write_json_atomic, write_text_atomic
    from crossalign.train import train as pretrain

    for name in objectives:
        objective_entries(name, "")  # unknown names fail before any work
    if "trans" not in derive["transform"].split("+"):
        raise CrossalignError(
            "the study needs a transliterated language (a dictionary between distinct tokens): "
            "add trans to --transform, e.g. trans+inv"
        )
    out = Path(out)
    derived = out / "derived"
    _derive(derived, derive, derive_command)
    rows = []
    for name in objectives:
        run_dir = out / "runs" / name
        config_path = out / "configs" / f"{name}.yaml"
        plain = study_config(name, str(derived), str(run_dir), **train)
        write_text_atomic(config_path, yaml.safe_dump(plain, sort_keys=False))
        cfg = load_config(config_path, list(overrides))
        resolved = config_to_dict(cfg)
        model = run_dir / "model"
        same = _read_json(run_dir / "study_config.json") == resolved
        if not (same and model.is_dir()):
            resume = same and any((run_dir / "checkpoints").glob("step-*"))
            if not same and run_dir.exists():
                import shutil

                shutil.rmtree(run_dir)  # this study's run of other settings
            write_json_atomic(run_dir / "study_config.json", resolved)
            print(f"== pre-training {name} ({cfg.train.steps} steps)")
            pretrain(cfg, resume="last" if resume else None)
        key = {"task": task, "finetune": asdict(finetune), "config": resolved}
        cached = _read_json(run_dir / "study_eval.json")
        if cached is None or cached.get("key") != key:
            print(f"== evaluating {name}")
            scores = evaluate_alignment(
                model, derived / "dictionary" / "test.txt", derived / "vocab.json", "en",
                DERIVED_LANG,
            )  # fmt: skip
            scores.update(evaluate_transfer(model, derived, task, finetune, download))
            scores["valid_mlm_ppl"] = _last_valid_ppl(run_dir)
            cached = {"key": key, "scores": scores}
            write_json_atomic(run_dir / "study_eval.json", cached)
        if "alignment_train_nn" not in cached["scores"]:
            # the same score on the training dictionary: what the dictionary objectives saw
            train_scores = evaluate_alignment(
                model, derived / "dictionary" / "train.txt", derived / "vocab.json", "en",
                DERIVED_LANG,
            )  # fmt: skip
            cached["scores"]["alignment_train_nn"] = train_scores["alignment_nn"]
            write_json_atomic(run_dir / "study_eval.json", cached)
        rows.append({"objective": name, **cached["scores"]})
    deltas = [r["delta"] for r in rows]
    correlation = {
        m: spearman([r[f"alignment_{m}"] for r in rows], deltas) for m in ("nn", "csls", "train_nn")
    }
    results = {
        "transform": derive["transform"],
        "task": task,
        "derive_command": derive_command,
        "train": train,
        "overrides": list(overrides),
        "finetune": asdict(finetune),
        "rows": rows,
        "spearman_alignment_delta": correlation,
    }
    write_json_atomic(out / "results.json", results)
    table = format_results(rows, correlation)
    write_text_atomic(out / "results.md", table + "\n")
    return results


def _last_valid_ppl(run_dir: Path) -> float:
    """The final held-out MLM perplexity in a run's metrics.jsonl (NaN when absent)."""
    ppl = float("nan")
    path = run_dir / "metrics.jsonl"
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            ppl = record.get("valid/mlm_ppl", ppl)
    return ppl
