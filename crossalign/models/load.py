"""One loader for saved models, one language → token-type id rule, one input-length rule.

Wherever a model is named (``--model`` of align, eval, induce-dict; ``model.path``), it may be
a ``save_pretrained`` directory, a training run directory (its ``model/`` is meant) or a Hugging
Face hub id (``crossalign.hub``): ``model_dir`` is the one rule that resolves the name and
``model_source`` checks what it resolved to. ``load_model`` reads the model with the head a
command needs; every load failure is a one-line CrossalignError naming the option (``key``)
that gave the path. The
language embeddings of a crossalign model are its token-type rows, one per language of the
config's ``crossalign_languages``; ``language_type_id`` maps a language to its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForTokenClassification,
    EncoderDecoderModel,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from crossalign.errors import CrossalignError
from crossalign.hub import hub_load_error, is_hub_id

Head = Literal["masked_lm", "encoder", "token_classification"]
HEADS = {
    "masked_lm": AutoModelForMaskedLM,
    "encoder": AutoModel,
    "token_classification": AutoModelForTokenClassification,
}


def default_device() -> str:
    """The device a model goes to when none is given: CUDA when available, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(
    path: str | Path,
    *,
    head: Head = "masked_lm",
    device: str | None = None,
    num_labels: int | None = None,
    keep_layers: int | None = None,
    key: str = "--model",
) -> PreTrainedModel:
    """The ``save_pretrained`` model in ``path`` with ``head``, in eval mode on ``device``
    (``default_device()`` when None).

    ``num_labels`` sizes a new token-classification head. ``keep_layers`` keeps only the first
    transformer layers of a BERT-style ``encoder.layer`` list (hidden state L depends on no
    later layer). A missing directory, one without ``config.json`` or weights that do not load
    is a one-line CrossalignError naming ``key``; Hugging Face's warnings and progress bars
    stay quiet. The ``encoder`` of an encoder-decoder directory is its encoder.
    """
    source = model_source(path, key)
    kwargs = {} if num_labels is None else {"num_labels": num_labels}
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # unused pooler, newly initialised heads
    hf_logging.disable_progress_bar()
    try:
        model = _from_pretrained(source, head, kwargs, f"{key} {path}")
    except (OSError, ValueError, SafetensorError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        if not Path(source).is_dir():
            raise hub_load_error(key, str(path), first) from None
        raise CrossalignError(f"{key} {path}: cannot load: {first}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    if keep_layers is not None:
        _keep_layers(model, keep_layers, f"{key} {path}")
    return model.to(device or default_device()).eval()


def _from_pretrained(source: str, head: Head, kwargs: dict, name: str) -> PreTrainedModel:
    """``HEADS[head].from_pretrained``; for an encoder-decoder (a MASS or UNMT model) the
    ``encoder`` head is its encoder, and any other head a CrossalignError."""
    config = AutoConfig.from_pretrained(source)
    if not getattr(config, "is_encoder_decoder", False):
        return HEADS[head].from_pretrained(source, **kwargs)
    if head != "encoder":
        raise CrossalignError(
            f"{name} is an encoder-decoder, not a {head.replace('_', '-')} model: the word "
            "aligner (eval aer, crossalign align) reads its encoder and eval bleu translates "
            "with it"
        )
    return EncoderDecoderModel.from_pretrained(source).get_encoder()


RUN_CONFIG = "config.yaml"
"""The settings file of a training run directory (``crossalign.checkpoint.CONFIG``)."""


def model_dir(path: str | Path) -> Path:
    """The model a model argument names, unchecked: a training run directory (one holding
    ``config.yaml`` and ``model/`` but no ``config.json`` of its own) means its ``model/``;
    a ``save_pretrained`` directory, a hub id or a path that does not exist is itself."""
    path = Path(path)
    if (
        (path / RUN_CONFIG).is_file()
        and (path / "model").is_dir()
        and not (path / "config.json").is_file()
    ):
        return path / "model"
    return path


def model_source(path: str | Path, key: str) -> str:
    """``path`` as ``from_pretrained`` gets it: a local ``save_pretrained`` directory (it must
    hold ``config.json``; a run directory means its ``model/``, see ``model_dir``) or a Hugging
    Face hub id (``crossalign.hub``); anything else is a CrossalignError naming ``key``."""
    local = model_dir(Path(path).expanduser())
    if not local.exists():
        if is_hub_id(str(path)):
            return str(path)
        raise CrossalignError(f"{key} {path} does not exist")
    if not (local / "config.json").is_file():
        raise CrossalignError(
            f"{key} {path} is not a save_pretrained directory (no config.json); export a "
            f"backbone with 'crossalign backbone export' or point at a run's model directory"
        )
    return str(local)


def _keep_layers(model: PreTrainedModel, keep: int, name: str) -> None:
    """Cut a BERT-style ``encoder.layer`` list to its first ``keep`` layers (other layouts
    keep all of theirs)."""
    n_layers = model.config.num_hidden_layers
    if not 1 <= keep <= n_layers:
        raise CrossalignError(f"layer {keep} does not exist: {name} has layers 0-{n_layers}")
    encoder = getattr(model.base_model, "encoder", None)
    if isinstance(getattr(encoder, "layer", None), nn.ModuleList):
        encoder.layer = encoder.layer[:keep]
        model.config.num_hidden_layers = keep


def load_model_and_tokenizer(
    path: str | Path, *, masked_lm: bool = False, key: str = "--model", **kw
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """``load_model(path, key=key, **kw)`` and the tokenizer saved with it (``masked_lm``:
    the tokenizer must have a mask token)."""
    from crossalign.data.tokenizer import load_tokenizer

    model_source(path, key)  # before the tokenizer's own complaint about the directory
    tokenizer = load_tokenizer(model_dir(path), key, masked_lm=masked_lm)
    return load_model(path, key=key, **kw), tokenizer


def _config(model_or_config: PreTrainedModel | PretrainedConfig) -> PretrainedConfig:
    return model_or_config.config if isinstance(model_or_config, nn.Module) else model_or_config


def model_languages(model_or_config: PreTrainedModel | PretrainedConfig) -> list[str]:
    """The languages whose ids the model's language embeddings use ([] without them)."""
    return list(getattr(_config(model_or_config), "crossalign_languages", []) or [])


def language_type_id(model_or_config: PreTrainedModel | PretrainedConfig, lang: str | None) -> int:
    """The token-type (language embedding) id of ``lang``: 0 for ``None`` and for a model
    without language embeddings; a language the model has no embedding for is a
    CrossalignError naming the model's languages."""
    name = getattr(_config(model_or_config), "_name_or_path", "")
    return language_index(model_languages(model_or_config), lang, f"model {name}" if name else "")


def language_index(languages: Sequence[str], lang: str | None, model: str = "") -> int:
    """``language_type_id`` on a model's language list (``model`` names it in the error):
    0 for ``None`` and for an empty list, else the index of ``lang``."""
    if lang is None or not languages:
        return 0
    if lang not in languages:
        raise CrossalignError(
            f"{model or 'the model'} has no language embedding for '{lang}'; it has "
            f"{', '.join(languages)}"
        )
    return list(languages).index(lang)


def position_offset(model_or_config: PreTrainedModel | PretrainedConfig) -> int:
    """First position id of a sequence: ``padding_idx + 1`` for models whose position table
    reserves the rows up to the padding index (RoBERTa, XLM-R, CamemBERT), else 0. A config
    is instantiated on the meta device (no memory) to read its embeddings' rule."""
    if isinstance(model_or_config, nn.Module):
        model = model_or_config
    else:
        with torch.device("meta"):
            model = AutoModel.from_config(model_or_config)
    emb = getattr(model.base_model, "embeddings", None)
    padding_idx = getattr(emb, "padding_idx", None)
    return padding_idx + 1 if padding_idx is not None else 0


def input_limit(
    model_or_config: PreTrainedModel | PretrainedConfig,
    requested: int | None = None,
    specials: int = 0,
) -> int:
    """Longest input the model takes: ``max_position_embeddings - position_offset`` (special
    tokens included), at most ``requested``, less ``specials`` (room a caller keeps for its
    own special tokens)."""
    limit = _config(model_or_config).max_position_embeddings - position_offset(model_or_config)
    if requested is not None:
        limit = min(requested, limit)
    return limit - specials
