"""Bilingual lexicon induction (BLI): Hit@k of a model's word vectors against a gold MUSE
dictionary, retrieving by CSLS (or cosine) in a candidate target vocabulary.

The protocol (Vulić et al. 2020), for a subword vocabulary:

- word vectors: ``crossalign.lexicon.embed.word_vectors`` (``whole``: a word counts only when
  its lowercase or capitalised form is one vocabulary token; ``mean``: mean of its subwords);
- words are lowercased and Arabic vowel marks removed (``normalise_word``);
- candidate targets: every target word of the *full* gold dictionary (``full.txt`` beside the
  test split: all splits, so the test translations are among them), plus optional extra
  words, that have a vector;
- evaluation words: source words of the test split that have a vector and at least one gold
  translation among the candidates; a seeded sample of at most ``max_words`` (1500);
- a hit at k: any gold translation among the k best candidates.

``induced_precision`` scores a self-induced token dictionary instead (Lu et al. 2023, Table 1):
the dictionary translates every token of the source language-specific vocabulary to its
CSLS-nearest token of the target language-specific vocabulary
(``crossalign.lexicon.induce.induce_from_model``), and its precision is measured on the
source tokens that spell a gold source word.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from crossalign.data.readers import read_dictionary
from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput
from crossalign.lexicon.csls import retrieve
from crossalign.lexicon.embed import TokenVectors, is_word, word_pieces, word_vectors
from crossalign.lexicon.induce import TokenDictionary

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from crossalign.evals.options import (
        BLIOptions,
        DictionaryOptions,
        InducedDictOptions,
        LayerOptions,
    )

_ARABIC_MARKS = re.compile("[\u064b-\u065f\u0670]")


def normalise_word(word: str) -> str:
    """Lowercase, without Arabic vowel marks (harakat, shadda, sukun, dagger alif), which
    dictionaries write (FreeDict eng-ara: 22% of targets) and running text and XLM-R's
    vocabulary mostly do not."""
    return _ARABIC_MARKS.sub("", word.lower())


@dataclass
class BLISet:
    """Evaluation words with vectors and their gold translations among the candidates."""

    src_words: list[str]
    tgt_words: list[str]
    src: torch.Tensor
    """[n, H] vectors of ``src_words``."""
    tgt: torch.Tensor
    """[m, H] vectors of the candidate ``tgt_words``."""
    gold: list[list[int]]
    """Per source word, indices of its gold translations in ``tgt_words``, dictionary order."""

    def first_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One translation pair per source word (its first listed gold translation):
        (src [n, H], tgt [n, H]), for RSIM and mean cosine."""
        first = torch.tensor([g[0] for g in self.gold], dtype=torch.long, device=self.tgt.device)
        return self.src, self.tgt[first]


def group_dictionary(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Translations of each source word, in dictionary order, normalised (``normalise_word``),
    deduplicated."""
    out: dict[str, list[str]] = {}
    for s, t in pairs:
        group = out.setdefault(normalise_word(s), [])
        if normalise_word(t) not in group:
            group.append(normalise_word(t))
    return out


def build_bli_set(
    tokenizer,
    src_vectors: TokenVectors,
    tgt_vectors: TokenVectors,
    test_pairs: Sequence[tuple[str, str]],
    candidate_words: Sequence[str],
    mode: str = "whole",
    max_words: int = 1500,
    seed: int = 0,
) -> BLISet:
    """The evaluation words, candidates and gold indices (see the module docstring)."""
    candidates = list(dict.fromkeys(normalise_word(w) for w in candidate_words))
    candidates = [w for w in candidates if is_word(w)]
    kept, tgt = word_vectors(tokenizer, candidates, tgt_vectors, mode)
    tgt_words = [candidates[i] for i in kept]
    index = {w: i for i, w in enumerate(tgt_words)}
    grouped = group_dictionary(test_pairs)
    sources = [w for w, ts in grouped.items() if is_word(w) and any(t in index for t in ts)]
    kept, src = word_vectors(tokenizer, sources, src_vectors, mode)
    order = list(range(len(kept)))
    if len(order) > max_words:
        order = sorted(random.Random(seed).sample(order, max_words))
    src_words = [sources[kept[i]] for i in order]
    if not src_words:
        raise CrossalignError(
            "no test source word has a vector and a gold translation among the candidates; "
            "check the dictionary languages, or use --words mean"
        )
    gold = [[index[t] for t in grouped[w] if t in index] for w in src_words]
    rows = torch.tensor(order, dtype=torch.long, device=src.device)
    return BLISet(src_words, tgt_words, src[rows], tgt, gold)


def hits_at(pred: torch.Tensor, gold: list[list[int]], ks: Sequence[int] = (1, 5)) -> dict:
    """Fraction of rows with a gold index among their first k predictions, per k.

    pred [n, K] long (best first, K >= max(ks)); gold: n lists of indices. Returns
    ``{"hit@k": float}``, vectorised with one ``isin`` over (row, index) keys.
    """
    n = pred.shape[0]
    width = int(max(pred.max().item() if pred.numel() else 0, max(max(g) for g in gold))) + 1
    keys = torch.tensor([r * width + c for r, g in enumerate(gold) for c in g], dtype=torch.long)
    found = torch.isin(torch.arange(n)[:, None] * width + pred.cpu(), keys)
    return {f"hit@{k}": float(found[:, :k].any(dim=1).float().mean()) for k in ks}


def bli_scores(
    bli: BLISet,
    method: str = "csls",
    k: int = 10,
    ks: Sequence[int] = (1, 5),
    backend: str = "torch",
) -> dict[str, float]:
    """Hit@k of ``bli`` retrieving by ``method`` (csls with neighbourhood ``k``, or nn).

    Returns ``hit@1``, ``hit@5`` (fractions), ``words`` and ``candidates``.
    """
    _, pred = retrieve(bli.src, bli.tgt, method, max(ks), k, backend=backend)
    out = hits_at(pred, bli.gold, ks)
    out.update(words=len(bli.src_words), candidates=len(bli.tgt_words))
    return out


def single_token_forms(tokenizer, words: Sequence[str]) -> list[set[int]]:
    """Per word, the ids of its surface forms (lowercase, capitalised) that are one vocabulary
    token (``word_pieces``; the unknown token never counts)."""
    return [
        {p[0] for p in forms if len(p) == 1 and p[0] != tokenizer.unk_token_id}
        for forms in word_pieces(tokenizer, words)
    ]


def induced_precision(
    tokenizer, dictionary: TokenDictionary, gold_pairs: Sequence[tuple[str, str]]
) -> dict[str, float]:
    """Precision of an induced token dictionary against a gold word dictionary (Lu et al.
    2023, Table 1).

    A pair ``src_ids[i] -> tgt_ids[i]`` is scored when its source token is a single-token form
    of a gold source word (``single_token_forms``; words normalised by ``normalise_word``), and
    is correct when its target token is a single-token form of one of that word's gold
    translations. Returns ``precision`` (correct / scored), ``correct``, ``scored`` and
    ``pairs`` (all induced pairs); no scored pair is a CrossalignError.
    """
    grouped = group_dictionary(gold_pairs)
    sources = [w for w in grouped if is_word(w)]
    targets = sorted({t for w in sources for t in grouped[w]})
    target_forms = dict(zip(targets, single_token_forms(tokenizer, targets)))
    accepted: dict[int, set[int]] = {}  # source token -> the tokens of its gold translations
    for word, forms in zip(sources, single_token_forms(tokenizer, sources)):
        good = set().union(*(target_forms[t] for t in grouped[word]))
        for token in forms:
            accepted.setdefault(token, set()).update(good)
    pairs = list(zip(dictionary.src_ids.tolist(), dictionary.tgt_ids.tolist()))
    scored = [(s, t) for s, t in pairs if s in accepted]
    if not scored:
        raise CrossalignError(
            f"none of the {len(pairs)} induced source tokens is a gold source word; check the "
            f"dictionary's direction (--reverse reads it the other way round) and languages"
        )
    correct = sum(t in accepted[s] for s, t in scored)
    return {
        "precision": correct / len(scored),
        "correct": correct,
        "scored": len(scored),
        "pairs": len(pairs),
    }


def candidate_words(
    dict_path: str | Path, extra: Sequence[str | Path] = (), column: int = 1
) -> list[str]:
    """Candidate target words: column ``column`` of ``full.txt`` beside ``dict_path`` (or of
    ``dict_path`` itself when there is none; 1 = targets, 0 = sources for a dictionary read
    the other way round), then the words of each ``extra`` file (a MUSE dictionary's target
    column, or one word per line)."""
    full = Path(dict_path).with_name("full.txt")
    words = [pair[column] for pair in read_dictionary(full if full.is_file() else dict_path)]
    for path in extra:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if fields:
                words.append(fields[1] if len(fields) > 1 else fields[0])
    return words


def dictionary_pair(opts: DictionaryOptions) -> tuple[str, str]:
    """(source, target) languages: ``opts.src``/``opts.tgt``, else the dictionary's directory
    name ``<src>-<tgt>`` (swapped with ``opts.reverse``)."""
    from crossalign.data.corpus import pair_from_dictionary_dir

    if opts.src and opts.tgt:
        return opts.src, opts.tgt
    pair = pair_from_dictionary_dir(opts.dict)
    if pair is None:
        raise CrossalignError(
            f"cannot tell the languages from {opts.dict}; give --src and --tgt (e.g. en de)"
        )
    if opts.reverse:
        pair = pair[::-1]
    return opts.src or pair[0], opts.tgt or pair[1]


def gold_pairs(opts: DictionaryOptions) -> list[tuple[str, str]]:
    """The pairs of the gold dictionary, swapped with ``opts.reverse``."""
    pairs = read_dictionary(opts.dict)
    return [(t, s) for s, t in pairs] if opts.reverse else pairs


def gold_candidates(opts: DictionaryOptions) -> list[str]:
    """Candidate target words of the gold dictionary (``candidate_words``; its source column
    with ``opts.reverse``) and of ``opts.candidates``."""
    return candidate_words(opts.dict, opts.candidates or [], 0 if opts.reverse else 1)


def language_texts(opts: DictionaryOptions, src: str, tgt: str) -> tuple[list[str], list[str]]:
    """The source and target text of ``opts`` (``--corpus`` or the text files), at most
    ``opts.context_sentences`` lines each."""
    from crossalign.data.corpus import language_text

    return (
        language_text(opts.corpus, opts.src_text, src, opts.context_sentences),
        language_text(opts.corpus, opts.tgt_text, tgt, opts.context_sentences),
    )


def bli_set_for(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, opts: LayerOptions
) -> BLISet:
    """The BLI evaluation set of ``opts``'s dictionary at ``opts.layer`` (the embedding table
    for 0, else hidden states averaged over the text)."""
    from crossalign.lexicon.embed import contextual_token_vectors, embedding_layer, piece_ids

    src, tgt = dictionary_pair(opts)
    pairs = gold_pairs(opts)
    candidates = gold_candidates(opts)
    if opts.layer == 0:
        src_vec = tgt_vec = embedding_layer(model)
    else:
        src_texts, tgt_texts = language_texts(opts, src, tgt)
        sides = ((src, src_texts, [s for s, _ in pairs]), (tgt, tgt_texts, candidates))
        vectors = []
        for lang, text, words in sides:
            ids = piece_ids(tokenizer, [normalise_word(w) for w in words])
            vectors.append(
                contextual_token_vectors(
                    model, tokenizer, text, [opts.layer], ids, lang, progress=True
                )[opts.layer]
            )
        src_vec, tgt_vec = vectors
    return build_bli_set(
        tokenizer, src_vec, tgt_vec, pairs, candidates, opts.words, opts.max_words, opts.seed
    )


def load_for(model_dir: str, opts: DictionaryOptions):
    """The masked-LM and tokenizer of ``model_dir`` on ``opts.device``."""
    from crossalign.lexicon.embed import load_masked_lm

    return load_masked_lm(model_dir, opts.device)


def evaluate_bli(model_dir: str, opts: BLIOptions) -> EvalOutput:
    """``eval bli``: Hit@1 and Hit@5 of the model's word vectors at ``opts.layer``."""
    model, tokenizer = load_for(model_dir, opts)
    scores = bli_scores(bli_set_for(model, tokenizer, opts), opts.method, opts.k)
    src, tgt = dictionary_pair(opts)
    note = f"BLI {src}->{tgt}, layer {opts.layer}, {opts.method}, words '{opts.words}'"
    return EvalOutput(
        metrics=scores,
        notes=[note],
        legacy={"pair": f"{src}-{tgt}", "layer": opts.layer, **scores},
    )


def evaluate_induced(model_dir: str, opts: InducedDictOptions) -> EvalOutput:
    """``eval induced-dict``: precision of the model's induced dictionary against the gold one
    (``induced_precision``), with standard BLI (CSLS) beside it."""
    from crossalign.lexicon.induce import induce_with_options

    src, tgt = dictionary_pair(opts)
    model, tokenizer = load_for(model_dir, opts)
    induction = induce_with_options(model, tokenizer, opts, src, tgt)
    induced = induced_precision(tokenizer, induction.forward, gold_pairs(opts))
    bli = bli_scores(bli_set_for(model, tokenizer, opts), "csls", opts.k)
    notes = [
        f"induced dictionary {src}->{tgt}, layer {opts.layer} (vocabularies: {src} "
        f"{len(induction.src_vocab)}, {tgt} {len(induction.tgt_vocab)} tokens): precision on "
        f"the {induced['scored']} induced pairs whose source is a gold word "
        f"({induced['pairs']} pairs induced)",
        f"standard BLI {src}->{tgt}, layer {opts.layer}, csls, words '{opts.words}'",
    ]
    return EvalOutput(
        metrics={**induced, **bli},
        notes=notes,
        legacy={"pair": f"{src}-{tgt}", "layer": opts.layer, "induced": induced, "bli": bli},
    )
