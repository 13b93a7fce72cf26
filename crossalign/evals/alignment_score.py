"""Alignment score of a model's word embeddings (Deshpande et al. 2022, §3.2; ALIGN-MLM, §5).

The score is the fraction of evaluation-dictionary source tokens whose nearest neighbour
among the other language's vocabulary, by cosine between rows of the input word-embedding
matrix, is one of their translations. The same retrieval with CSLS (Conneau et al. 2018,
eq. 6: ``2 cos(x, y) − r_T(x) − r_S(y)``, neighbourhoods of ``k`` = 10 over the whole source
and target vocabularies) discounts hub tokens that are near everything.
"""

from __future__ import annotations

from pathlib import Path

import torch

from crossalign.errors import CrossalignError

HIGHER_IS_BETTER = {"alignment_nn": True, "alignment_csls": True}
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


def evaluate_alignment(
    model_dir: str | Path,
    dictionary: str | Path,
    vocab: str | Path,
    src_lang: str,
    tgt_lang: str,
    k: int = 10,
) -> dict[str, float]:
    """``alignment_nn`` and ``alignment_csls`` of a saved model (its input embeddings) on a
    MUSE dictionary of token pieces, with the language vocabularies of ``vocab.json``; plus
    ``pairs``, the number of dictionary pairs scored."""
    from transformers import AutoModelForMaskedLM

    from crossalign.data.derive import read_vocab, token_dictionary
    from crossalign.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(str(model_dir))
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
