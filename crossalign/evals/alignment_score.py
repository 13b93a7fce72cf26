"""Alignment score of a model's word embeddings (Deshpande et al. 2022, §3.2; ALIGN-MLM, §5).

``alignment`` (the paper's score): the fraction of source-language tokens whose nearest
neighbour among the derived language's tokens, by cosine between rows of the input
word-embedding matrix, is their counterpart under the derivation's one-to-one token mapping
(the transliterated twin). Every twinned token of the vocabulary is a query; tokens shared by
the two languages (``--overlap``) have no distinct counterpart and are candidates only.

Extras on a dictionary (``alignment_nn``, ``alignment_csls``; the held-out part of the derived
dictionary by default): the fraction of dictionary source tokens whose nearest neighbour among
the other language's vocabulary is one of their translations, and the same retrieval with CSLS
(Conneau et al. 2018, eq. 6: ``2 cos(x, y) − r_T(x) − r_S(y)``, neighbourhoods of ``k`` = 10
over the whole source and target vocabularies), which discounts hub tokens near everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from crossalign.data.derive.twins import Transliterator
    from crossalign.evals.options import AlignmentScoreOptions

METHODS = ("nn", "csls")


def alignment_score(
    embeddings: torch.Tensor,
    src: torch.Tensor,
    tgt: torch.Tensor,
    src_vocab: torch.Tensor,
    tgt_vocab: torch.Tensor,
    method: str = "nn",
    k: int = 10,
) -> float:
    """Fraction of the dictionary's distinct source tokens whose top-1 retrieval among
    ``tgt_vocab`` is a translation of theirs.

    embeddings [V, H]; dictionary pairs src/tgt [D] long (a source may have several
    translations); src_vocab [S], tgt_vocab [T] long: the ids of each language (CSLS averages
    over their neighbourhoods; retrieval ranks ``tgt_vocab`` only).
    """
    from crossalign.lexicon.csls import csls_topk, neighbourhood_means, nn_topk

    if method not in METHODS:
        raise CrossalignError(f"unknown alignment method '{method}'; choose nn or csls")
    queries = torch.unique(src)
    emb = embeddings.detach().float()
    q, cand = emb[queries], emb[tgt_vocab]
    if method == "nn":
        _, idx = nn_topk(q, cand, topn=1)
    else:
        r_src = neighbourhood_means(q, cand, k)
        r_tgt = neighbourhood_means(cand, emb[src_vocab], k)
        _, idx = csls_topk(q, cand, k, topn=1, terms=(r_src, r_tgt))
    predicted = tgt_vocab[idx[:, 0]]
    size = int(embeddings.shape[0])
    gold = src * size + tgt
    return torch.isin(queries * size + predicted, gold).float().mean().item()


def dictionary_alignment(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dictionary: str | Path,
    vocab: str | Path,
    src_lang: str,
    tgt_lang: str,
    k: int = 10,
) -> dict[str, float]:
    """``alignment_nn`` and ``alignment_csls`` of a model (its input embeddings) on a MUSE
    dictionary of token pieces, with the language vocabularies of ``vocab.json``; plus
    ``pairs``, the number of dictionary pairs scored."""
    from crossalign.data.derive.derivation import read_vocab, token_dictionary

    vocabs = read_vocab(vocab, tokenizer)
    for lang in (src_lang, tgt_lang):
        if lang not in vocabs:
            raise CrossalignError(f"{vocab} has no language '{lang}'; it has {', '.join(vocabs)}")
    src, tgt, _ = token_dictionary(dictionary, tokenizer)
    emb = model.get_input_embeddings().weight
    args = (
        emb,
        torch.tensor(src),
        torch.tensor(tgt),
        torch.tensor(vocabs[src_lang]),
        torch.tensor(vocabs[tgt_lang]),
    )
    out = {f"alignment_{m}": alignment_score(*args, method=m, k=k) for m in METHODS}
    out["pairs"] = len(src)
    return out


def token_mapping(
    transliterator: Transliterator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The derivation's one-to-one token mapping: (English tokens with a distinct twin [N],
    their twins [N], the derived language's whole vocabulary [T] (twins and shared tokens))."""
    english = [t for t in range(transliterator.english_size) if t not in transliterator.special]
    src = [t for t in english if transliterator.twinned(t)]
    tgt_vocab = sorted({transliterator.twin_id(t) for t in english})
    return (
        torch.tensor(src, dtype=torch.long),
        torch.tensor([transliterator.twin_id(t) for t in src], dtype=torch.long),
        torch.tensor(tgt_vocab, dtype=torch.long),
    )


def counterpart_alignment(
    embeddings: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, tgt_vocab: torch.Tensor
) -> float:
    """The paper's alignment score: the fraction of source tokens ``src[i]`` whose nearest
    neighbour by cosine among ``tgt_vocab`` is ``tgt[i]``, their counterpart.

    embeddings [V, H]; src, tgt [N] long (a one-to-one mapping); tgt_vocab [T] long.
    """
    from crossalign.lexicon.csls import nn_topk

    if src.numel() == 0:
        raise CrossalignError("alignment: no source token has a counterpart to score")
    emb = embeddings.detach().float()
    _, idx = nn_topk(emb[src], emb[tgt_vocab], topn=1)
    return (tgt_vocab[idx[:, 0]] == tgt).float().mean().item()


def derived_alignment(model: PreTrainedModel, derived_dir: str | Path) -> dict[str, float]:
    """``alignment`` (the paper's score, ``counterpart_alignment``) of a model on the token
    mapping of the derived corpus ``derived_dir``; plus ``alignment_tokens``, the number of
    source tokens scored."""
    from crossalign.data.derive.derivation import Derivation

    transliterator = Derivation.load(derived_dir).transliterator
    if transliterator is None:
        raise CrossalignError(
            f"{derived_dir} was derived without trans: no token mapping to score; the "
            f"alignment score needs a transliterated language"
        )
    emb = model.get_input_embeddings().weight
    if emb.shape[0] < len(transliterator.tokenizer):
        raise CrossalignError(
            f"model {model.config._name_or_path} has {emb.shape[0]} token embeddings, fewer "
            f"than the {len(transliterator.tokenizer)} of {derived_dir}/tokenizer; score a "
            f"model trained on this derived corpus"
        )
    src, tgt, tgt_vocab = token_mapping(transliterator)
    return {
        "alignment": counterpart_alignment(emb, src, tgt, tgt_vocab),
        "alignment_tokens": int(src.numel()),
    }


def derived_file(opts: AlignmentScoreOptions, explicit: str | None, name: str, flag: str) -> str:
    """An explicit path, else ``name`` inside ``opts.derived``."""
    if explicit:
        return explicit
    if not opts.derived:
        raise CrossalignError(f"give --derived DIR (from crossalign data derive) or {flag}")
    path = Path(opts.derived) / name
    if not path.exists():
        raise CrossalignError(
            f"{path} is missing: {opts.derived} was derived without trans (no dictionary); "
            f"the alignment score needs a transliterated language"
        )
    return str(path)


def evaluate(model_dir: str, opts: AlignmentScoreOptions) -> EvalOutput:
    """``eval alignment-score``: the paper's counterpart score (with ``opts.derived``) and the
    nearest-neighbour and CSLS scores on a dictionary, from one load of the model."""
    from crossalign.models.load import load_model_and_tokenizer

    dictionary = derived_file(opts, opts.dictionary, "dictionary/test.txt", "--dictionary")
    vocab = derived_file(opts, opts.vocab, "vocab.json", "--vocab")
    model, tokenizer = load_model_and_tokenizer(
        model_dir, masked_lm=True, device="cpu", key="--model"
    )
    scores: dict[str, float] = {}
    notes = []
    if opts.derived:
        scores.update(derived_alignment(model, opts.derived))
        notes.append(
            f"alignment (the paper's: {scores['alignment_tokens']} source tokens, nearest "
            f"neighbour by cosine is their counterpart)"
        )
    scores.update(
        dictionary_alignment(model, tokenizer, dictionary, vocab, opts.src, opts.tgt, opts.k)
    )
    notes.append(
        f"{opts.src} -> {opts.tgt}, {scores['pairs']} dictionary pairs ({dictionary}): nearest "
        f"neighbour by cosine, and CSLS (k={opts.k})"
    )
    return EvalOutput(metrics=scores, notes=notes, legacy=dict(scores))
