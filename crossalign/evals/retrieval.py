"""Sentence retrieval (Tatoeba-style, as in XTREME): find each held-out sentence's translation
among all target sentences of the test set by the cosine of mean-pooled hidden states of one
layer, in both directions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput
from crossalign.lexicon.csls import nn_topk
from crossalign.lexicon.embed import encode_batches, hidden_states
from crossalign.models.load import input_limit, language_type_id

if TYPE_CHECKING:
    from crossalign.evals.options import RetrievalOptions


@torch.no_grad()
def layer_sentence_embeddings(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    layers: Sequence[int],
    lang: str | None = None,
    max_length: int = 128,
    batch_size: int = 32,
) -> torch.Tensor:
    """``sentence_embeddings`` of each of ``layers`` from one encoding pass. -> [len(layers),
    n, H] (float32: about 1 GB for 25 layers of 1,024 over 10,000 sentences)."""
    model.eval()
    n_layers = model.config.num_hidden_layers
    layers = [n_layers if layer < 0 else layer for layer in layers]
    for layer in layers:
        if layer > n_layers:
            raise ValueError(f"layer {layer} does not exist: the model has 0..{n_layers}")
    out = torch.zeros(len(layers), len(texts), model.config.hidden_size)
    type_id = language_type_id(model, lang)
    max_length = input_limit(model, max_length)
    for idx, enc in encode_batches(tokenizer, texts, max_length, batch_size):
        states = hidden_states(model, enc, type_id)
        if len(states) != n_layers + 1:
            raise ValueError(
                f"the model returns {len(states)} hidden states, not num_hidden_layers + 1 = "
                f"{n_layers + 1}: its layers cannot be told apart"
            )
        mask = enc["attention_mask"][..., None].float()
        for k, layer in enumerate(layers):
            out[k, idx] = (states[layer].float().cpu() * mask).sum(dim=1) / mask.sum(dim=1)
    return out


def sentence_embeddings(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    layer: int = -1,
    lang: str | None = None,
    max_length: int = 128,
    batch_size: int = 32,
) -> torch.Tensor:
    """Mean of the hidden states of ``layer`` (0 embedding output, 1..L layers, -1 the last)
    over every non-padding position, ``<s>`` and ``</s>`` included (as e5 pools). -> [n, H]."""
    return layer_sentence_embeddings(
        model, tokenizer, texts, [layer], lang, max_length, batch_size
    )[0]


def retrieval_accuracy(
    src: torch.Tensor,
    tgt: torch.Tensor,
    src_keys: Sequence[str] | None = None,
    tgt_keys: Sequence[str] | None = None,
) -> dict[str, float]:
    """Accuracy of cosine retrieval between aligned rows src [n, d] and tgt [n, d], both ways.

    Row i's translation is row i; with ``src_keys``/``tgt_keys`` (e.g. the sentences' texts) a
    retrieved row whose key equals row i's key also counts, so duplicate sentences in the test
    set are not errors. Returns ``acc_src_tgt``, ``acc_tgt_src`` and ``n``.
    """
    n = src.shape[0]

    def codes(keys: Sequence[str] | None) -> torch.Tensor:
        if keys is None:
            return torch.arange(n)
        ids: dict[str, int] = {}
        return torch.tensor([ids.setdefault(k, len(ids)) for k in keys])

    sk, tk = codes(src_keys), codes(tgt_keys)
    _, fwd = nn_topk(src, tgt, 1)
    _, bwd = nn_topk(tgt, src, 1)
    return {
        "acc_src_tgt": float((tk[fwd[:, 0].cpu()] == tk).float().mean()),
        "acc_tgt_src": float((sk[bwd[:, 0].cpu()] == sk).float().mean()),
        "n": n,
    }


def retrieval_pairs(opts: RetrievalOptions) -> list[tuple[str, str]]:
    """The sentence pairs of ``opts``: the two line-aligned files, else the ``split`` files of
    ``pair`` in ``corpus``; at most ``max_sentences``."""
    from crossalign.data.readers import read_parallel

    if opts.src_file and opts.tgt_file:
        pairs = read_parallel([opts.src_file, opts.tgt_file])
    elif opts.corpus and opts.pair:
        src, tgt = opts.pair.split("-", 1)
        d = f"{opts.corpus}/{opts.pair}"
        pairs = read_parallel([f"{d}/{opts.split}.{src}", f"{d}/{opts.split}.{tgt}"])
    else:
        raise CrossalignError(
            "give --src-file and --tgt-file (line-aligned), or --corpus DIR with --pair SRC-TGT"
        )
    return pairs[: opts.max_sentences]


def evaluate_retrieval(model_dir: str, opts: RetrievalOptions) -> EvalOutput:
    """``eval retrieval``: ``retrieval_accuracy`` of mean-pooled layer ``opts.layer`` between
    the pairs of ``opts`` (language embeddings from ``opts.pair`` when given); with
    ``opts.all_layers``, of every layer 0..L from one encoding pass, as ``L<layer>/...``
    metrics."""
    from crossalign.lexicon.embed import load_masked_lm

    pairs = retrieval_pairs(opts)
    src_lang, tgt_lang = opts.pair.split("-", 1) if opts.pair else (None, None)
    model, tokenizer = load_masked_lm(model_dir, opts.device)
    src_texts, tgt_texts = [s for s, _ in pairs], [t for _, t in pairs]
    layers = range(model.config.num_hidden_layers + 1) if opts.all_layers else [opts.layer]
    x = layer_sentence_embeddings(model, tokenizer, src_texts, layers, src_lang)
    y = layer_sentence_embeddings(model, tokenizer, tgt_texts, layers, tgt_lang)
    if not opts.all_layers:
        scores = retrieval_accuracy(x[0], y[0], src_texts, tgt_texts)
        return EvalOutput(
            metrics=scores,
            notes=[f"retrieval, layer {opts.layer}, {scores['n']} pairs"],
            legacy={"layer": opts.layer, **scores},
        )
    metrics: dict[str, float] = {"n": len(pairs)}
    for layer in layers:
        scores = retrieval_accuracy(x[layer], y[layer], src_texts, tgt_texts)
        metrics.update({f"L{layer}/{k}": v for k, v in scores.items() if k != "n"})
    return EvalOutput(
        metrics=metrics,
        notes=[f"retrieval, layers 0-{layers[-1]}, {len(pairs)} pairs"],
        legacy=metrics,
    )
