"""Experiment tracking (``train.log_with``) and the exported model's card, on a tiny run over a
hand-made corpus with a data card; TensorBoard's own reader is the oracle for the logged
scalars."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from crossalign.cli import main
from crossalign.tracking import TRACKERS

from .conftest import FIXTURES


def _corpus(root: Path) -> Path:
    """An en-es corpus in the ``crossalign data`` layout (20 train, 4 valid pairs), with a
    data card naming two public-domain sources."""
    corpus = root / "corpus"
    (corpus / "en-es").mkdir(parents=True)
    for lang in ("en", "es"):
        lines = (FIXTURES / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
        for split, part in (("train", lines[:20]), ("valid", lines[20:]), ("test", [])):
            (corpus / "en-es" / f"{split}.{lang}").write_text(
                "".join(x + "\n" for x in part), encoding="utf-8"
            )
    card = {
        "format": "parallel",
        "sources": [
            {"package": "fixture-en", "version": "1", "licence": "public-domain"},
            {"package": "fixture-es", "version": "1", "licence": "public-domain"},
        ],
        "languages": ["en", "es"],
        "pairs": {"en-es": {"src": "en", "tgt": "es", "train": 20, "valid": 4, "test": 0}},
    }
    (corpus / "card.json").write_text(json.dumps(card), encoding="utf-8")
    return corpus


def _scalars(logdir: Path) -> dict[str, dict[int, float]]:
    """Every scalar TensorBoard's reader finds in ``logdir``: tag -> {step: value}; a step
    logged twice under one tag is a failure."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    out: dict[str, dict[int, float]] = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        out[tag] = {e.step: e.value for e in events}
        assert len(out[tag]) == len(events), f"{tag} logged twice at one step"
    return out


def _front_matter(path: Path) -> dict:
    head = path.read_text(encoding="utf-8")[4:].partition("\n---\n")[0]
    return yaml.safe_load(head)


def test_tensorboard_logs_metrics_jsonl_and_model_has_card(tiny, tmp_path):
    pytest.importorskip("tensorboard")
    corpus = _corpus(tmp_path)
    args = tiny(
        "tracked",
        **{
            "data.corpus": str(corpus),
            "data.mono": "{}",
            "data.parallel": "{}",
            "data.valid_mono": "{}",
            "train.log_with": "[tensorboard]",
            "train.steps": 6,
            "train.log_every": 2,
            "train.eval_every": 3,
            "train.save_every": 0,
        },
    )
    assert main(["train", *args]) == 0
    run = tmp_path / "tracked"
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    held = [r for r in records if "valid/mlm_ppl" in r]
    assert [r["step"] for r in held] == [3, 6]  # at eval_every and the final evaluation

    # every key of every metrics.jsonl record, at its step, and nothing else
    scalars = _scalars(run / "tracking" / "tracked")
    expected: dict[str, dict[int, float]] = {}
    for record in records:
        for key, value in record.items():
            if key != "step":
                expected.setdefault(key, {})[record["step"]] = value
    assert set(scalars) == set(expected)
    for key, by_step in expected.items():
        assert scalars[key].keys() == by_step.keys(), key
        for step, value in by_step.items():
            assert scalars[key][step] == pytest.approx(value, rel=1e-6), (key, step)

    # the config as hyper-parameters (accelerate also writes them to hparams.yml)
    (hparams,) = (run / "tracking" / "tracked").glob("*/hparams.yml")
    stored = yaml.safe_load(hparams.read_text(encoding="utf-8"))
    assert stored["train.lr"] == 0.003 and stored["data.corpus"] == str(corpus)

    # the exported model's card: front matter from the run and the corpus's data card
    card_path = run / "model" / "README.md"
    meta = _front_matter(card_path)
    assert meta["language"] == ["en", "es"]
    assert meta["license"] == "other" and meta["license_name"] == "public-domain"
    assert meta["tags"] == ["crossalign", "fill-mask", "mlm", "tlm"]
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "fill-mask"
    assert "base_model" not in meta
    text = card_path.read_text(encoding="utf-8")
    final = held[-1]
    assert f"| `valid/mlm_ppl` | {final['valid/mlm_ppl']:.4f} |" in text
    assert "fixture-es" in text and "steps: 6 of 6" in text
    hub = pytest.importorskip("huggingface_hub")
    assert hub.ModelCard.load(card_path).data.language == ["en", "es"]


def test_unknown_tracker_is_one_line_error(tiny, capsys):
    assert main(["train", *tiny("e"), "train.log_with=[tensorbord]"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "train.log_with.0: unknown tracker 'tensorbord' (did you mean 'tensorboard'?)" in err


def test_missing_tracker_package_names_it(tiny, tmp_path, capsys):
    missing = [
        name
        for name, (modules, _) in TRACKERS.items()
        if all(importlib.util.find_spec(m) is None for m in modules)
    ]
    if not missing:
        pytest.skip("every tracker package is installed")
    name = missing[0]
    assert main(["train", *tiny("e"), f"train.log_with=[{name}]"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"tracker '{name}' needs" in err and f"pip install {TRACKERS[name][1]}" in err
    assert not (tmp_path / "e").exists()  # refused before the run directory is made


WORDS = [
    ("cat", "gato"), ("dog", "perro"), ("mother", "madre"), ("book", "libro"),
    ("bread", "pan"), ("cheese", "queso"), ("bed", "cama"), ("park", "parque"),
    ("green", "verde"), ("ball", "pelota"), ("children", "niños"), ("long", "largo"),
]  # fmt: skip


def _probe_data(root: Path) -> tuple[Path, Path]:
    """A gold test set ``en-es/`` (the fixture's last 4 pairs, two links each, ids 0-based)
    and a dictionary folder ``en-es/`` (test.txt, full.txt)."""
    testset = root / "gold" / "en-es"
    testset.mkdir(parents=True)
    for lang in ("en", "es"):
        lines = (FIXTURES / f"{lang}.txt").read_text(encoding="utf-8").splitlines()[20:]
        (testset / f"test.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (testset / "alignv2.txt").write_text(
        "".join(f"{k} 1 1 S\n{k} 2 2 P\n" for k in range(4)), encoding="utf-8"
    )
    dictionary = root / "dict" / "en-es"
    dictionary.mkdir(parents=True)
    (dictionary / "full.txt").write_text("".join(f"{s} {t}\n" for s, t in WORDS))
    (dictionary / "test.txt").write_text("".join(f"{s} {t}\n" for s, t in WORDS[:8]))
    return testset, dictionary


@pytest.mark.slow
def test_probes_equal_the_evaluations_of_the_exported_model(tiny, tmp_path):
    from crossalign.evals.aer import evaluate_aer
    from crossalign.evals.bli import evaluate_bli
    from crossalign.evals.options import AEROptions, BLIOptions

    testset, dictionary = _probe_data(tmp_path)
    args = tiny(
        "probed",
        **{
            "train.steps": 4,
            "train.eval_every": 2,
            "train.save_every": 0,
            "train.probe_aer": f"{{gold: {testset}, layer: 1}}",
            "train.probe_bli": f"{{dict: {dictionary}, layer: 0, words: mean}}",
        },
    )
    assert main(["train", *args]) == 0
    run = tmp_path / "probed"
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    probed = [r for r in records if "probe/aer" in r]
    assert [r["step"] for r in probed] == [2, 4]  # with the held-out lines
    assert all("valid/mlm_ppl" in r for r in probed)
    final = probed[-1]

    # oracle: `eval aer` and `eval bli` of the exported model (the final step's weights)
    model = str(run / "model")
    aer = evaluate_aer(model, AEROptions(testset=str(testset), layers="1")).metrics
    for key in ("aer", "precision", "recall", "f1"):
        name = "probe/aer" if key == "aer" else f"probe/aer_{key}"
        assert final[name] == pytest.approx(aer[f"L1/{key}"], abs=1e-12), key
    bli = evaluate_bli(model, BLIOptions(dict=str(dictionary), layer=0, words="mean")).metrics
    assert {f"probe/bli_{k}": float(v) for k, v in bli.items()} == {
        k: v for k, v in final.items() if k.startswith("probe/bli_")
    }


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.probe_aer={gold: nowhere, layer: 1}", "test set nowhere is not a directory"),
        ("train.probe_aer={gold: nowhere, layer: 3}", "train.probe_aer.layer=3: the model has"),
        ("train.probe_bli={dict: d, layer: 1}", "train.probe_bli.layer >= 1 averages"),
        ("train.probe_bli={dict: d, words: all}", "train.probe_bli.words"),
    ],
)
def test_probe_settings_are_checked_before_training(tiny, override, message, capsys):
    assert main(["train", *tiny("e", **{"data.corpus": "null"}), override]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in err


def test_flat_config_keeps_scalars_and_writes_the_rest_as_json():
    from crossalign.tracking import flat_config

    config = {"run_dir": "r", "train": {"lr": 0.1, "betas": [0.9, 0.98], "log_with": []}}
    config |= {"model": {"path": None, "hf_overrides": {}, "language_embeddings": True}}
    assert flat_config(config) == {
        "run_dir": "r",
        "train.lr": 0.1,
        "train.betas": "[0.9, 0.98]",
        "train.log_with": "[]",
        "model.path": "null",
        "model.hf_overrides": "{}",
        "model.language_embeddings": True,
    }
