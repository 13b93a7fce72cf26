"""``train.freeze``: the frozen parameters do not move, the others train, bad keys are refused."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM

from crossalign.cli import main
from crossalign.errors import CrossalignError
from crossalign.training.setup import freeze_parameters


def tiny_bert() -> BertForMaskedLM:
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32)  # fmt: skip
    return BertForMaskedLM(config)


def test_encoder_names_the_base_model_and_leaves_the_head():
    model = tiny_bert()
    frozen = freeze_parameters(model, ["encoder"])
    assert frozen and all(name.startswith("bert.") for name in frozen)
    training = {n for n, p in model.named_parameters() if p.requires_grad}
    # the head's transform and output bias train; its output projection is the (frozen,
    # tied) input embedding matrix
    assert training == {n for n, _ in model.named_parameters() if n.startswith("cls.")}
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert not model.cls.predictions.decoder.weight.requires_grad


def test_glob_patterns_and_their_errors():
    model = tiny_bert()
    frozen = freeze_parameters(model, ["bert.encoder.layer.0.*"])
    assert frozen and all(n.startswith("bert.encoder.layer.0.") for n in frozen)
    assert model.bert.encoder.layer[1].output.dense.weight.requires_grad
    with pytest.raises(CrossalignError, match="train.freeze: 'decoder.*' names no parameter"):
        freeze_parameters(tiny_bert(), ["decoder.*"])
    with pytest.raises(CrossalignError, match="leaves no parameter to train"):
        freeze_parameters(tiny_bert(), ["*"])
    with pytest.raises(CrossalignError, match="its own base model"):
        freeze_parameters(tiny_bert().bert, ["encoder"])


def test_training_moves_only_the_head(tiny, tmp_path):
    args = tiny("warm", **{"train.freeze": "[encoder]", "train.lr": 0.01, "train.steps": 5,
                           "objectives": "[{name: mlm}]"})  # fmt: skip
    assert main(["train", *args]) == 0
    first = tmp_path / "first"
    assert main(["train", *tiny("first", **{"train.steps": 1, "train.lr": 1e-12,
                                             "objectives": "[{name: mlm}]"})]) == 0  # fmt: skip
    start = AutoModelForMaskedLM.from_pretrained(first / "model").state_dict()
    after = AutoModelForMaskedLM.from_pretrained(tmp_path / "warm" / "model").state_dict()
    moved = {k for k in after if not torch.allclose(after[k], start[k], atol=1e-8)}
    assert moved and all(k.startswith("cls.") for k in moved), sorted(moved)
