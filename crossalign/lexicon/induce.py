"""Dictionary induction between the language-specific vocabularies of two languages: every
source token's CSLS-nearest target token (Lu et al. 2023, §3.1), from the embedding layer or
from any layer's context-averaged hidden states."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.errors import CrossalignError
from crossalign.lexicon.csls import csls_topk
from crossalign.lexicon.embed import TokenVectors, contextual_token_vectors, embedding_layer
from crossalign.lexicon.options import InductionOptions
from crossalign.lexicon.vocab import language_specific_vocab, token_counts

if TYPE_CHECKING:
    from crossalign.lexicon.options import InduceOptions


@dataclass
class TokenDictionary:
    """Induced token translations ``src_ids[i] -> tgt_ids[i]`` with their CSLS scores, all
    three on the device of the vectors they were induced from."""

    src_ids: torch.Tensor
    """[n] long."""
    tgt_ids: torch.Tensor
    """[n] long."""
    scores: torch.Tensor
    """[n] float32."""

    def table(self, vocab_size: int) -> torch.Tensor:
        """[V] long: the translation of every token id, -1 for ids without one; on the
        dictionary's device."""
        out = torch.full((vocab_size,), -1, dtype=torch.long, device=self.src_ids.device)
        out[self.src_ids] = self.tgt_ids
        return out

    def pairs(self, tokenizer: PreTrainedTokenizerBase) -> list[tuple[str, str, float]]:
        """(source token, target token, CSLS score), token strings as the vocabulary writes
        them, best score first."""
        order = self.scores.argsort(descending=True)
        src = tokenizer.convert_ids_to_tokens(self.src_ids[order].tolist())
        tgt = tokenizer.convert_ids_to_tokens(self.tgt_ids[order].tolist())
        return list(zip(src, tgt, self.scores[order].tolist()))

    def lines(self, tokenizer: PreTrainedTokenizerBase) -> list[str]:
        """MUSE lines ``src tgt score`` of ``pairs``, best score first."""
        return [f"{s} {t} {x:.4f}" for s, t, x in self.pairs(tokenizer)]


def induce(
    src_vectors: TokenVectors,
    tgt_vectors: TokenVectors,
    src_ids: torch.Tensor,
    tgt_ids: torch.Tensor,
    k: int = 10,
    backend: str = "torch",
) -> TokenDictionary:
    """Translate every source id (that has a vector) to its CSLS-nearest target id (that has
    a vector). src_ids [n], tgt_ids [m] long (any device) -> a TokenDictionary of at most n
    entries, on the device of ``src_vectors`` (both vector sets must share it)."""
    device = src_vectors.table.device
    src_ids, tgt_ids = src_ids.to(device), tgt_ids.to(device)
    src_ids = src_ids[src_vectors.has(src_ids)]
    tgt_ids = tgt_ids[tgt_vectors.has(tgt_ids)]
    if len(src_ids) == 0 or len(tgt_ids) == 0:
        raise CrossalignError(
            f"cannot induce a dictionary: {len(src_ids)} source and {len(tgt_ids)} target tokens "
            f"have vectors; lower the frequency threshold or give more text"
        )
    scores, idx = csls_topk(
        src_vectors.get(src_ids), tgt_vectors.get(tgt_ids), k=k, topn=1, backend=backend
    )
    return TokenDictionary(src_ids, tgt_ids[idx[:, 0]], scores[:, 0])


def layer_vectors(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    layer: int,
    texts: Sequence[str],
    token_ids: torch.Tensor,
    lang: str | None,
    max_length: int = 128,
    batch_size: int = 32,
    progress: bool = False,
) -> TokenVectors:
    """Token vectors of ``layer``: the embedding table for 0, else context averages of
    ``token_ids`` over ``texts``."""
    if layer == 0:
        return embedding_layer(model)
    return contextual_token_vectors(
        model, tokenizer, texts, [layer], token_ids, lang, max_length, batch_size, progress
    )[layer]


@dataclass
class Induction:
    """Both directions of an induced dictionary and what they were induced from."""

    forward: TokenDictionary
    backward: TokenDictionary
    src_vocab: torch.Tensor
    tgt_vocab: torch.Tensor
    seconds: float


def induce_from_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    src_lang: str,
    tgt_lang: str,
    opts: InductionOptions | None = None,
    *,
    max_length: int = 128,
    progress: bool = False,
) -> Induction:
    """Language-specific vocabularies of the two texts (``opts.threshold``,
    ``opts.other_max``), then CSLS translations (``opts.k``, ``opts.backend``) in both
    directions from ``opts.layer``. Contextual layers average over the first
    ``opts.context_sentences`` lines of each text (default options: ``InductionOptions()``)."""
    opts = opts or InductionOptions()
    layer, threshold, other_max = opts.layer, opts.threshold, opts.other_max
    k, context_sentences, backend = opts.k, opts.context_sentences, opts.backend
    start = time.perf_counter()
    vocab = model.get_input_embeddings().weight.shape[0]
    specials = sorted(set(tokenizer.all_special_ids))
    src_vocab, tgt_vocab = language_specific_vocab(
        token_counts(tokenizer, src_texts, vocab),
        token_counts(tokenizer, tgt_texts, vocab),
        threshold,
        other_max,
        specials,
    )
    if len(src_vocab) == 0 or len(tgt_vocab) == 0:
        raise CrossalignError(
            f"language-specific vocabularies are empty ({src_lang} {len(src_vocab)}, {tgt_lang} "
            f"{len(tgt_vocab)} tokens with frequency > {threshold}); lower the threshold or give "
            f"more text"
        )
    was_training = model.training
    src_vec = layer_vectors(
        model,
        tokenizer,
        layer,
        src_texts[:context_sentences],
        src_vocab,
        src_lang,
        max_length,
        progress=progress,
    )
    tgt_vec = layer_vectors(
        model,
        tokenizer,
        layer,
        tgt_texts[:context_sentences],
        tgt_vocab,
        tgt_lang,
        max_length,
        progress=progress,
    )
    model.train(was_training)
    forward = induce(src_vec, tgt_vec, src_vocab, tgt_vocab, k, backend)
    backward = induce(tgt_vec, src_vec, tgt_vocab, src_vocab, k, backend)
    return Induction(forward, backward, src_vocab, tgt_vocab, time.perf_counter() - start)


def check_pair(src: str, tgt: str) -> None:
    """Refuse a dictionary from a language to itself (one line naming both options)."""
    if src.lower() == tgt.lower():
        raise CrossalignError(
            f"--src and --tgt are the same language ({src}); a dictionary translates between "
            f"two languages, e.g. --src en --tgt de"
        )


def induce_with_options(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    opts: InductionOptions,
    src: str,
    tgt: str,
) -> Induction:
    """``induce_from_model`` on the text of ``opts`` (``corpus`` or ``src_text``/``tgt_text``,
    at most ``max_sentences`` lines per language) with its layer, vocabulary thresholds, CSLS
    ``k`` and backend. The two languages must differ: each one's vocabulary is the tokens the
    other does not use."""
    from crossalign.data.corpora.files import language_text

    check_pair(src, tgt)
    return induce_from_model(
        model,
        tokenizer,
        language_text(opts.corpus, opts.src_text, src, opts.max_sentences),
        language_text(opts.corpus, opts.tgt_text, tgt, opts.max_sentences),
        src,
        tgt,
        opts,
        progress=True,
    )


@dataclass
class InducedFiles:
    """What ``induce_dictionary`` wrote."""

    induction: Induction
    forward_lines: int
    """Lines written to the forward dictionary."""
    backward_lines: int | None
    """Lines written to the backward dictionary (None when none was asked for)."""


def induce_dictionary(opts: InduceOptions) -> InducedFiles:
    """``crossalign induce-dict``: induce both directions from ``opts.model`` and write the
    forward dictionary to ``opts.out`` (and the backward one to ``opts.backward``) as MUSE
    lines, best score first."""
    from crossalign.fileio import write_lines_atomic
    from crossalign.lexicon.embed import load_masked_lm

    for flag, out in (("--out", opts.out), ("--backward", opts.backward)):
        if out and Path(out).is_dir():
            raise CrossalignError(
                f"{flag} {out} is a directory; give a file path, e.g. "
                f"{Path(out) / f'{opts.src}-{opts.tgt}.txt'}"
            )
    model, tokenizer = load_masked_lm(str(opts.model), opts.device)
    result = induce_with_options(model, tokenizer, opts, opts.src, opts.tgt)
    n = write_lines_atomic(opts.out, result.forward.lines(tokenizer))
    m = None
    if opts.backward:
        m = write_lines_atomic(opts.backward, result.backward.lines(tokenizer))
    return InducedFiles(result, n, m)
