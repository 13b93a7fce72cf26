"""Build a Hugging Face masked-LM from a size preset, or load one for continued pre-training.

Language embeddings (XLM) use the model's token type embeddings: one row per language, the
language id of every token passed as ``token_type_ids``. The language list is stored in the
model config as ``crossalign_languages`` so a saved model keeps its language ids.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, PretrainedConfig, PreTrainedModel

from crossalign.config import PRESETS, ModelConfig
from crossalign.errors import CrossalignError
from crossalign.models.load import (
    input_limit,
    load_model,
    model_languages,
    position_offset,
)


def _load_checkpoint(path: str) -> PreTrainedModel:
    """The masked-LM of ``model.path`` on the CPU (training moves it)."""
    return load_model(path, head="masked_lm", device="cpu", key="model.path")


def extend_language_rows(model: PreTrainedModel, known: list[str], languages: list[str]) -> None:
    """Give a loaded model one token-type row per language: rows of ``known`` languages are
    kept, every other row is a copy of row 0, so the pretrained function is unchanged at the
    start of continued pre-training."""
    embeddings = model.base_model.embeddings
    old = embeddings.token_type_embeddings.weight.detach()
    rows = [old[: len(known)]] if known else []
    rows.append(old[:1].expand(len(languages) - len(known), -1))
    new = torch.nn.Embedding(len(languages), old.shape[1])
    with torch.no_grad():
        new.weight.copy_(torch.cat(rows))
    embeddings.token_type_embeddings = new
    model.config.type_vocab_size = len(languages)
    model.config.crossalign_languages = list(languages)


def check_fits(model: PreTrainedModel, path: str, vocab_size: int, max_length: int) -> None:
    """Refuse a loaded ``model.path`` (``path``) whose vocabulary is smaller than the
    tokenizer's ``vocab_size`` or whose positions cannot hold ``data.max_length``."""
    if model.config.vocab_size < vocab_size:
        raise CrossalignError(
            f"model.path {path}: vocabulary ({model.config.vocab_size}) is smaller than "
            f"the tokenizer's ({vocab_size}); use the model's own tokenizer"
        )
    limit = input_limit(model)
    if max_length > limit:
        raise CrossalignError(
            f"data.max_length={max_length} exceeds the {limit} positions "
            f"of model.path {path}; set data.max_length <= {limit}"
        )


def build_model(
    cfg: ModelConfig, vocab_size: int, pad_token_id: int, languages: list[str], max_length: int
) -> PreTrainedModel:
    """A masked-LM: loaded from ``cfg.path`` or built from ``cfg.arch`` and ``cfg.preset``.

    With ``cfg.language_embeddings`` the model gets one language embedding per entry of
    ``languages`` (a loaded model keeps its own list and appends missing languages).
    """
    if cfg.path:
        model = _load_checkpoint(cfg.path)
        check_fits(model, cfg.path, vocab_size, max_length)
        if cfg.language_embeddings:
            known = model_languages(model)
            extend_language_rows(model, known, known + [x for x in languages if x not in known])
    else:
        config = scratch_config(cfg, vocab_size, pad_token_id, languages, max_length)
        try:
            model = AutoModelForMaskedLM.from_config(config)
        except ValueError as e:
            raise CrossalignError(
                f"model.arch '{cfg.arch}' has no masked-LM head: {str(e).splitlines()[0]}"
            ) from None
    return model


DROPOUT_FIELDS = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "dropout",
    "attention_dropout",
    "activation_dropout",
)
"""Hugging Face config fields holding a dropout rate (BERT-style and BART-style names)."""


def set_dropout(model: PreTrainedModel, p: float) -> None:
    """Make every dropout of ``model`` (a masked-LM or an encoder-decoder) ``p``: the dropout
    fields of its configs (so a saved model keeps the rate), every ``nn.Dropout`` module, and
    the rates modules keep as floats (``dropout_prob`` passed to
    ``scaled_dot_product_attention``; XLM's and BART's ``dropout``, ``attention_dropout``,
    ``activation_dropout``)."""
    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            for name in DROPOUT_FIELDS:
                if isinstance(getattr(module.config, name, None), float):
                    setattr(module.config, name, p)
        if isinstance(module, nn.Dropout):
            module.p = p
        for name in (*DROPOUT_FIELDS, "dropout_prob"):  # rates kept as floats (XLM, BART)
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, p)


def scratch_config(
    cfg: ModelConfig, vocab_size: int, pad_token_id: int, languages: list[str], max_length: int
) -> PretrainedConfig:
    """The Hugging Face config of a model built from ``cfg.arch`` and ``cfg.preset`` (with
    ``cfg.hf_overrides``): one language embedding per entry of ``languages`` when
    ``cfg.language_embeddings``, room for ``max_length`` positions after the position offset."""
    fields = dict(PRESETS[cfg.preset])
    fields.update(
        vocab_size=vocab_size,
        pad_token_id=pad_token_id,
        max_position_embeddings=max_length,
        type_vocab_size=max(1, len(languages)) if cfg.language_embeddings else 1,
    )
    fields.update(cfg.hf_overrides)
    try:
        config = AutoConfig.for_model(cfg.arch, **fields)
    except ValueError as e:
        if "Unrecognized model identifier" in str(e):
            raise CrossalignError(
                f"model.arch '{cfg.arch}' is not a Hugging Face model_type; e.g. bert, roberta, "
                "xlm-roberta, distilbert"
            ) from None
        raise CrossalignError(f"model.arch '{cfg.arch}': {str(e).splitlines()[0]}") from None
    except Exception as e:  # transformers' strict config dataclasses reject bad field values
        raise CrossalignError(
            f"model.hf_overrides {cfg.hf_overrides}: {' '.join(str(e).split())[:300]}"
        ) from None
    config.crossalign_languages = list(languages) if cfg.language_embeddings else []
    if "max_position_embeddings" not in cfg.hf_overrides:  # room for the position offset
        config.max_position_embeddings = max_length + position_offset(config)
    return config
