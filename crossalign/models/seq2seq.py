"""Encoder-decoder models for MASS pre-training and unsupervised machine translation.

A crossalign sequence-to-sequence model is a Hugging Face ``EncoderDecoderModel``: an encoder
(``AutoModel``) and a decoder (``AutoModelForCausalLM`` with cross-attention) of the same
architecture, each with its own embeddings, the decoder's output layer tied to its input
embeddings. Built from scratch both sides take the ``model.preset`` size; from a pretrained
encoder (a crossalign masked-LM or a hub model) both sides are initialised from it and only
the decoder's cross-attention starts fresh, as XLM initialises encoder and decoder from one
cross-lingual LM (Conneau & Lample 2019, §5.2). An ``EncoderDecoderModel`` directory (a MASS
model, a UNMT checkpoint) loads as it is.

Languages are told by the language embeddings on both sides (the token-type rows of a
crossalign model, ``crossalign_languages`` in the config): the encoder's tokens carry the source
language, the decoder's the language to produce. Sequences are ``<s> tokens </s>`` on both
sides; the decoder starts from ``<s>`` and stops at ``</s>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    EncoderDecoderModel,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from crossalign.config import ModelConfig
from crossalign.errors import CrossalignError
from crossalign.models.build import check_fits, extend_language_rows, scratch_config
from crossalign.models.load import (
    default_device,
    input_limit,
    language_index,
    model_languages,
    model_source,
)


def is_seq2seq(model_or_config: PreTrainedModel | PretrainedConfig) -> bool:
    """Whether a model (or config) is an encoder-decoder."""
    config = getattr(model_or_config, "config", model_or_config)
    return bool(getattr(config, "is_encoder_decoder", False))


def encoder_of(model: PreTrainedModel) -> PreTrainedModel:
    """The encoder of an encoder-decoder; any other model is its own encoder."""
    return model.get_encoder() if is_seq2seq(model) else model


def _quiet_load(load, key: str, path: str):
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the decoder's fresh cross-attention, unused heads
    try:
        return load()
    except (OSError, ValueError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise CrossalignError(f"{key} {path}: cannot load as an encoder-decoder: {first}") from None
    finally:
        hf_logging.set_verbosity(verbosity)


def _finish(
    model: EncoderDecoderModel, languages: list[str], bos_id: int, eos_id: int, pad_id: int
) -> EncoderDecoderModel:
    """Set the generation ids and the language list on the top-level config."""
    for config in (model.config, model.generation_config):
        config.decoder_start_token_id = bos_id
        config.bos_token_id = bos_id
        config.eos_token_id = eos_id
        config.pad_token_id = pad_id
    model.config.crossalign_languages = list(languages)
    return model


def build_seq2seq(
    cfg: ModelConfig,
    vocab_size: int,
    ids: tuple[int, int, int],
    languages: list[str],
    max_length: int,
) -> EncoderDecoderModel:
    """An encoder-decoder for ``cfg`` (see the module docstring); ``ids`` are the tokenizer's
    (``<s>``, ``</s>``, pad) ids. With ``cfg.language_embeddings`` both sides get one language
    row per entry of ``languages`` (a loaded model keeps its rows and appends the missing
    languages, copies of row 0)."""
    bos_id, eos_id, pad_id = ids
    if not cfg.path:
        enc_config = scratch_config(cfg, vocab_size, pad_id, languages, max_length)
        dec_config = AutoConfig.for_model(**enc_config.to_dict())
        dec_config.is_decoder = True
        dec_config.add_cross_attention = True
        dec_config.crossalign_languages = enc_config.crossalign_languages
        try:
            decoder = AutoModelForCausalLM.from_config(dec_config)
        except ValueError as e:
            raise CrossalignError(
                f"model.arch '{cfg.arch}' has no decoder form: {str(e).splitlines()[0]}"
            ) from None
        model = EncoderDecoderModel(encoder=AutoModel.from_config(enc_config), decoder=decoder)
        return _finish(model, enc_config.crossalign_languages, bos_id, eos_id, pad_id)
    source = model_source(cfg.path, "model.path")
    config = AutoConfig.from_pretrained(source)
    if is_seq2seq(config):
        model = _quiet_load(
            lambda: EncoderDecoderModel.from_pretrained(source), "model.path", cfg.path
        )
    else:
        model = _quiet_load(
            lambda: EncoderDecoderModel.from_encoder_decoder_pretrained(source, source),
            "model.path",
            cfg.path,
        )
    encoder = model.get_encoder()
    check_fits(encoder, cfg.path, vocab_size, max_length)
    known = model_languages(model) or model_languages(encoder)
    if cfg.language_embeddings:
        languages = known + [x for x in languages if x not in known]
        for side in (encoder, model.get_decoder()):
            extend_language_rows(side, model_languages(side), languages)
    else:
        languages = known
    return _finish(model, languages, bos_id, eos_id, pad_id)


def generate_ids(
    model: EncoderDecoderModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    source: int,
    target: int,
    *,
    max_new_tokens: int,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    synced: bool = False,
) -> torch.Tensor:
    """Translations of encoder inputs ``input_ids`` [B, S] (``<s> x </s>``, padded; mask
    [B, S]) from the language with embedding row ``source`` into row ``target``: [B, T] long,
    each row ``<s> y </s>`` then padding (``T <= max_new_tokens + 1``). Greedy with
    ``num_beams`` 1, else beam search with ``length_penalty`` (scores divided by
    length**penalty). The decoder's language rows are ``target``'s at every step; no grad.
    ``synced``: every process decodes until all are done (transformers' ``synced_gpus``),
    which sharded parameters need (``is_sharded``)."""
    kwargs = {}
    if model_languages(model):
        kwargs["token_type_ids"] = torch.full_like(input_ids, source)
        kwargs["decoder_token_type_ids"] = torch.full(
            (input_ids.shape[0], 1), target, device=input_ids.device
        )
    with torch.no_grad():
        return model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            num_beams=num_beams,
            length_penalty=length_penalty,
            do_sample=False,
            early_stopping=num_beams > 1,
            synced_gpus=synced,
            **kwargs,
        )


def is_sharded(model: torch.nn.Module) -> bool:
    """True when ``model``'s parameters are sharded across processes (FSDP units inside it, or
    DeepSpeed ZeRO-3), so that every forward pass gathers them from all processes."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    from transformers.integrations import is_deepspeed_zero3_enabled

    fsdp = any(isinstance(m, FullyShardedDataParallel) for m in model.modules())
    return fsdp or is_deepspeed_zero3_enabled()


def encoder_inputs(
    sequences: Sequence[Sequence[int]], bos_id: int, eos_id: int, pad_id: int, max_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``<s> ids </s>`` rows padded to the longest: (input_ids, attention_mask) [B, S]; each
    sequence is cut to ``max_length - 2`` tokens."""
    rows = [[bos_id, *list(s)[: max_length - 2], eos_id] for s in sequences]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
    return ids, (ids != pad_id).long()


def output_tokens(
    generated: torch.Tensor, bos_id: int, eos_id: int, pad_id: int
) -> list[list[int]]:
    """The tokens of generated rows [B, T] without ``<s>``, ``</s>`` and padding (what follows
    the first ``</s>`` is dropped)."""
    out = []
    for row in generated.tolist():
        tokens = row[1:] if row and row[0] == bos_id else row
        if eos_id in tokens:
            tokens = tokens[: tokens.index(eos_id)]
        out.append([t for t in tokens if t != pad_id])
    return out


def translate(
    model: EncoderDecoderModel,
    tokenizer: PreTrainedTokenizerBase,
    sentences: Sequence[str],
    source: str,
    target: str,
    *,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    max_len_a: float = 1.3,
    max_len_b: int = 5,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: bool = False,
) -> list[str]:
    """Detokenized translations of ``sentences`` from ``source`` into ``target`` (see
    ``generate_ids``), in the order given. Sentences are translated in batches of similar
    length (longest first), each at most ``max_len_a · n + max_len_b`` tokens for the batch's
    longest source of n tokens (XLM's 1.3 n + 5). Inputs longer than the model's positions (or
    ``max_length``) are cut. ``progress``: a progress bar over the sentences."""
    from tqdm.auto import tqdm

    encoder = model.get_encoder()
    limit = input_limit(encoder, max_length)
    bos, eos, pad = (model.config.decoder_start_token_id, model.config.eos_token_id,
                     model.config.pad_token_id)  # fmt: skip
    languages = model_languages(model)
    src_row, tgt_row = language_index(languages, source), language_index(languages, target)
    device = next(model.parameters()).device
    tokens = tokenizer(list(sentences), add_special_tokens=False)["input_ids"] if sentences else []
    order = sorted(range(len(tokens)), key=lambda i: -len(tokens[i]))
    out = [""] * len(tokens)
    was_training = model.training
    model.eval()
    bar = tqdm(total=len(tokens), desc=f"translate {source}-{target}", disable=not progress)
    try:
        for start in range(0, len(order), batch_size):
            part = order[start : start + batch_size]
            ids, mask = encoder_inputs([tokens[i] for i in part], bos, eos, pad, limit)
            longest = int(mask.sum(1).max())
            new = min(int(max_len_a * longest + max_len_b), limit - 1)
            generated = generate_ids(
                model, ids.to(device), mask.to(device), src_row, tgt_row,
                max_new_tokens=max(1, new), num_beams=num_beams, length_penalty=length_penalty,
            )  # fmt: skip
            for i, row in zip(part, output_tokens(generated.cpu(), bos, eos, pad)):
                out[i] = tokenizer.decode(row, skip_special_tokens=True).strip()
            bar.update(len(part))
    finally:
        bar.close()
        model.train(was_training)
    return out


def load_seq2seq(
    path: str, *, device: str | None = None, key: str = "--model"
) -> EncoderDecoderModel:
    """The ``EncoderDecoderModel`` saved in ``path`` (a run's ``model/`` or checkpoint, or a
    hub id) in eval mode on ``device`` (``default_device()`` when None); a directory holding
    another kind of model is a CrossalignError naming ``key``."""
    source = model_source(path, key)
    config = AutoConfig.from_pretrained(source)
    if not is_seq2seq(config):
        raise CrossalignError(
            f"{key} {path} is a {config.model_type} model, not an encoder-decoder; train one "
            f"with a seq2seq objective (mass, dae, bt, mt: see configs/unmt.yaml)"
        )
    model = _quiet_load(lambda: EncoderDecoderModel.from_pretrained(source), key, path)
    return model.to(device or default_device()).eval()
