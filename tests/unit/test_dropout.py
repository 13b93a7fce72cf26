"""``model.dropout``: every dropout of a loaded or new model set to one rate."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from crossalign.config import ModelConfig
from crossalign.errors import CrossalignError
from crossalign.models.build import set_dropout


def tiny_bert() -> BertForMaskedLM:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3,
    )  # fmt: skip
    return BertForMaskedLM(config)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_zero_dropout_makes_training_mode_deterministic(attention):
    model = tiny_bert()
    model.config._attn_implementation = attention
    ids = torch.randint(5, 30, (2, 9))
    model.train()
    assert not torch.equal(model(ids).logits, model(ids).logits)  # dropout on: the check can fail
    set_dropout(model, 0.0)
    torch.testing.assert_close(model(ids).logits, model(ids).logits, rtol=0, atol=0)
    model.eval()
    torch.testing.assert_close(model(ids).logits, model.train()(ids).logits)
    assert model.config.hidden_dropout_prob == model.config.attention_probs_dropout_prob == 0.0


def test_dropout_is_a_rate():
    with pytest.raises(CrossalignError, match="model.dropout"):
        ModelConfig(path="x", dropout=1.5)
    assert ModelConfig(path="x", dropout=0.0).dropout == 0.0


@pytest.mark.parametrize("arch", ["xlm", "roberta"])
def test_other_architectures_and_a_nonzero_rate(arch):
    """XLM keeps its rates as floats on its modules; a rate above 0 is set too."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(
        arch, vocab_size=30, hidden_size=16, emb_dim=16, n_layers=2, n_heads=2,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        dropout=0.3, attention_dropout=0.3, hidden_dropout_prob=0.3,
        attention_probs_dropout_prob=0.3,
    )  # fmt: skip
    model = AutoModelForMaskedLM.from_config(config).train()
    ids = torch.randint(5, 30, (2, 9))
    set_dropout(model, 0.0)
    torch.testing.assert_close(model(ids).logits, model(ids).logits, rtol=0, atol=0)
    set_dropout(model, 0.5)
    assert not torch.equal(model(ids).logits, model(ids).logits)
    rates = [
        float(getattr(m, "p", getattr(m, "dropout", 0.5)))
        for m in model.modules()
        if isinstance(m, torch.nn.Dropout) or isinstance(getattr(m, "dropout", None), float)
    ]
    assert rates and all(r == 0.5 for r in rates)
