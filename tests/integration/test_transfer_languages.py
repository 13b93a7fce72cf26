"""``eval transfer --test-lang``: XTREME's zero-shot protocol between real languages, on the tiny
en/es fixture with a made-up task (word shapes), so no spaCy pipeline is needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.evals.transfer import TASKS, TokenTask

from .conftest import FIXTURES, tiny_overrides


def _word_class(word: str) -> str:
    if not word.isalnum():
        return "PUNCT"
    return "SHORT" if len(word) <= 3 else "LONG"


def _tagged(lang: str):
    lines = (FIXTURES / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
    return [(ws, [_word_class(w) for w in ws]) for ws in map(str.split, lines)]


def _language(lang: str, download: bool, seed: int):
    """en and es: 18 training, 6 test sentences; de (es text): test sentences only."""
    tagged = _tagged("es" if lang == "de" else lang)
    return {"test": tagged[18:]} if lang == "de" else {"train": tagged[:18], "test": tagged[18:]}


TASKS.register("test-shape-langs")(
    TokenTask(
        "test-shape-langs",
        ("PUNCT", "SHORT", "LONG"),
        lambda download, seed: {"train": _tagged("en")[:18], "test": _tagged("en")[18:]},
        _language,
        protocol="made-up labels (word shapes)",
    )
)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    run = tmp_path_factory.mktemp("runs") / "langs"
    overrides = tiny_overrides(run, **{"train.steps": 2, "model.language_embeddings": "true"})
    assert main(["train", *overrides]) == 0
    return str(run / "model")


def _transfer(model: str, *argv: str, out: Path) -> int:
    common = ["--task", "test-shape-langs", "--model", model, "--epochs", "1", "--batch-size", "8"]
    return main(["eval", "transfer", *common, *argv, "--json", str(out)])


def test_zero_shot_and_supervised_in_a_real_language(model, tmp_path, capsys):
    out = tmp_path / "es.json"
    assert _transfer(model, "--train-lang", "en", "--test-lang", "es", out=out) == 0
    t = json.loads(out.read_text())
    assert t["delta"] == pytest.approx(t["sup"] - t["zs"])
    assert t["delta_f1"] == pytest.approx(t["sup_f1"] - t["zs_f1"])
    assert (t["train_sentences"], t["test_sentences"]) == (18, 6)
    assert (t["target_train_sentences"], t["target_test_sentences"]) == (18, 6)
    assert all(0 <= t[k] <= 100 for k in ("sup", "zs", "en", "sup_f1", "zs_f1", "en_f1"))
    printed = capsys.readouterr().out
    assert "en -> es" in printed and "ZS: fine-tuned on en, scored on es" in printed
    assert "made-up labels (word shapes)" in printed  # the task's protocol note
    # split=valid: each language's training sentences less those held out
    assert _transfer(model, "--test-lang", "es", "--split", "valid", "valid_sentences=4",
                     out=out) == 0  # fmt: skip
    v = json.loads(out.read_text())
    assert (v["train_sentences"], v["test_sentences"], v["target_test_sentences"]) == (14, 4, 4)


def test_a_language_without_training_data_or_embedding(model, tmp_path, capsys):
    out = tmp_path / "de.json"
    assert _transfer(model, "--test-lang", "de", out=out) == 2
    err = capsys.readouterr().err
    assert "no language embedding for 'de'" in err and "--embedding-lang en" in err
    assert _transfer(model, "--test-lang", "de", "--embedding-lang", "en", out=out) == 0
    t = json.loads(out.read_text())
    assert "sup" not in t and "delta" not in t and t["target_train_sentences"] == 0
    assert t["target_test_sentences"] == 6 and 0 <= t["zs"] <= 100
    printed = capsys.readouterr().out
    assert "no SUP: de has no training data" in printed and "with the en embedding" in printed
    argv = ["--test-lang", "de", "--embedding-lang", "en", "--split", "valid"]
    assert _transfer(model, *argv, out=out) == 2
    assert "no de training data to hold valid sentences out of" in capsys.readouterr().err


def test_options_and_tasks_without_real_languages(model, tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main(["eval", "transfer", "--model", model, "--json", str(out)]) == 2
    assert "give --derived DIR (a derived language) or --test-lang" in capsys.readouterr().err
    argv = ["eval", "transfer", "--model", model, "--derived", "d", "--test-lang", "fr"]
    assert main(argv) == 2 and "not both" in capsys.readouterr().err
    assert main(["eval", "transfer", "--model", model, "--test-lang", "en"]) == 2
    assert "is the training language" in capsys.readouterr().err
    assert main(["eval", "transfer", "--task", "pos", "--model", model, "--test-lang", "es"]) == 2
    assert "task 'pos' has no data in real languages" in capsys.readouterr().err


def _spans(lang: str, download: bool, seed: int):
    """Words longer than 3 characters as one-word spans (BIO), the others O."""
    return {
        name: [(ws, ["B-X" if tag == "LONG" else "O" for tag in tags]) for ws, tags in part]
        for name, part in _language(lang, download, seed).items()
    }


TASKS.register("test-spans-langs")(
    TokenTask("test-spans-langs", ("O", "B-X", "I-X"), lambda d, s: {}, _spans)
)


def test_span_labels_add_span_f1(model, tmp_path):
    out = tmp_path / "spans.json"
    argv = ["eval", "transfer", "--task", "test-spans-langs", "--model", model, "--test-lang",
            "es", "--epochs", "1", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    t = json.loads(out.read_text())
    for name in ("sup", "zs", "en"):
        assert 0 <= t[f"{name}_span_f1"] <= 100
    assert t["delta_span_f1"] == pytest.approx(t["sup_span_f1"] - t["zs_span_f1"])


def test_most_frequent_tag_in_a_real_language_on_the_sentences_transfer_keeps(model, tmp_path):
    from crossalign.evals.most_frequent_tag import most_frequent_tag_accuracy

    out = tmp_path / "mft.json"
    argv = ["eval", "most-frequent-tag", "--task", "test-shape-langs", "--test-lang", "es",
            "--tokenizer", model, "--json", str(out), "--no-results"]  # fmt: skip
    assert main(argv) == 0
    m = json.loads(out.read_text())
    # every fixture sentence fits: the baseline over all of them, by the word-shape rule
    assert (m["target_train_sentences"], m["target_test_sentences"]) == (18, 6)
    assert (m["train_sentences"], m["test_sentences"]) == (18, 6)  # English's, as transfer's
    es, en = _tagged("es"), _tagged("en")
    assert m["sup"] == pytest.approx(most_frequent_tag_accuracy(es[:18], es[18:]))
    assert m["en"] == pytest.approx(most_frequent_tag_accuracy(en[:18], en[18:]))
    # a short limit leaves out the sentences eval transfer leaves out
    assert main([*argv, "--max-length", "18"]) == 0
    short = json.loads(out.read_text())
    assert short["target_test_sentences"] < 6
    assert _transfer(model, "--test-lang", "es", "--max-length", "18", out=tmp_path / "t.json") == 0
    t = json.loads((tmp_path / "t.json").read_text())
    counts = ("train_sentences", "test_sentences", "target_train_sentences",
              "target_test_sentences")  # fmt: skip
    assert [short[k] for k in counts] == [t[k] for k in counts]


def test_most_frequent_tag_options(model, capsys):
    base = ["eval", "most-frequent-tag", "--task", "test-shape-langs"]
    assert main([*base, "--test-lang", "es"]) == 2
    assert "--test-lang needs --tokenizer DIR" in capsys.readouterr().err
    assert main([*base, "--derived", "d", "--test-lang", "es", "--tokenizer", model]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "give --derived DIR" in err and "not both" not in err
    assert main([*base, "--derived", "d", "--tokenizer", model]) == 2
    assert "--tokenizer goes with --test-lang" in capsys.readouterr().err
    assert main([*base, "--test-lang", "en", "--tokenizer", model]) == 2
    assert "is the training language" in capsys.readouterr().err
    assert main([*base, "--test-lang", "de", "--tokenizer", model]) == 2  # test pages only
    assert "has no de training data" in capsys.readouterr().err


def test_frozen_embeddings_stay_as_pre_training_left_them(model):
    import torch

    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.evals.finetune_config import FinetuneConfig
    from crossalign.evals.transfer import encode_tagged, finetune
    from crossalign.models.load import load_model

    tokenizer = load_tokenizer(model)
    labels = {"PUNCT": 0, "SHORT": 1, "LONG": 2}
    train = [x for x in encode_tagged(tokenizer, _tagged("en")[:18], labels, 64) if x]
    before = load_model(model, key="model").get_input_embeddings().weight.detach().clone()
    tuned = {}
    for freeze in (False, True):
        cfg = FinetuneConfig(epochs=1, lr=1e-2, batch_size=8, freeze_embeddings=freeze)
        tuned[freeze] = finetune(model, train, 3, 0, tokenizer, cfg)
    frozen, free = tuned[True], tuned[False]
    assert torch.equal(frozen.get_input_embeddings().weight, before)
    assert not torch.equal(free.get_input_embeddings().weight, before)
    # the layers above the embeddings train in both
    name = "encoder.layer.0.attention.self.query.weight"
    start = load_model(model, key="model").base_model.state_dict()[name]
    assert not torch.equal(frozen.base_model.state_dict()[name], start)


def test_bf16_fine_tuning_runs_its_forward_passes_in_bfloat16(model):
    """``precision: bf16`` autocasts fine-tuning's and scoring's forward passes (the linear
    layers compute in bfloat16) and keeps the weights fp32; fp32, the default, does not."""
    import torch

    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.evals.finetune_config import FinetuneConfig
    from crossalign.evals.transfer import encode_tagged, evaluate_tagging, finetune

    tokenizer = load_tokenizer(model)
    labels = {"PUNCT": 0, "SHORT": 1, "LONG": 2}
    train = [x for x in encode_tagged(tokenizer, _tagged("en")[:18], labels, 64) if x]
    seen: dict[str, set] = {}

    def record(module, args, out):
        if isinstance(module, torch.nn.Linear):
            seen[precision].add(out.dtype)

    for precision in ("fp32", "bf16"):
        seen[precision] = set()
        handle = torch.nn.modules.module.register_module_forward_hook(record)
        try:
            cfg = FinetuneConfig(epochs=1, lr=1e-2, batch_size=8, precision=precision)
            tuned = finetune(model, train, 3, 0, tokenizer, cfg)
            scores = evaluate_tagging(tuned, train, 0, tokenizer, 8, tuple(labels), precision)
        finally:
            handle.remove()
        assert 0 <= scores["accuracy"] <= 100
        assert {p.dtype for p in tuned.parameters()} == {torch.float32}
    assert seen == {"fp32": {torch.float32}, "bf16": {torch.bfloat16}}


def test_group_by_length_batches_sentences_of_similar_length():
    """``group_by_length``: each epoch is a permutation drawn by transformers'
    LengthGroupedSampler with the epoch's seed, its batches carry less padding than the
    seeded shuffle's, and another epoch draws another order. (The sampler sorts megabatches of
    up to 50 batches, at most a quarter of the data: 2,000 sentences make 15.)"""
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from crossalign.evals.finetune_config import FinetuneConfig
    from crossalign.evals.transfer import epoch_order

    lengths = [3 + (7 * i) % 40 for i in range(2000)]
    train = [(list(range(n)), [0] * n) for n in lengths]
    grouped, plain = FinetuneConfig(group_by_length=True, seed=2), FinetuneConfig(seed=2)
    order = epoch_order(train, grouped, 1)
    generator = torch.Generator().manual_seed(2001)
    sampler = LengthGroupedSampler(32, lengths=lengths, generator=generator)
    assert order == list(sampler) and sorted(order) == list(range(2000))
    assert epoch_order(train, grouped, 2) != order

    def padding(order: list[int]) -> int:
        batches = [[lengths[j] for j in order[i : i + 32]] for i in range(0, len(order), 32)]
        return sum(max(b) * len(b) - sum(b) for b in batches)

    assert padding(order) < padding(epoch_order(train, plain, 1)) / 3


def test_transfer_precision_is_fp32_or_bf16(tmp_path, capsys):
    args = ["eval", "transfer", "--model", str(tmp_path), "--derived", "d", "--precision", "fp16"]
    assert main(args) == 2
    assert "precision" in capsys.readouterr().err
