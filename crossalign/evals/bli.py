"""Bilingual lexicon induction (BLI) as MUSE reports it (Conneau et al. 2018, "Word
Translation Without Parallel Data"; ``get_word_translation_accuracy``): precision at 1, 5 and
10 of a model's word vectors against a gold dictionary, retrieving by cosine (``nn``) and by
CSLS with K = 10 (``csls_knn_10``).

For a subword vocabulary (Vulić et al. 2020):

- word vectors: ``crossalign.lexicon.embed.word_vectors`` (``whole``: a word counts only when
  its lowercase or capitalised form is one vocabulary token; ``mean``: mean of its subwords);
- words are lowercased and Arabic vowel marks removed (``normalise_word``);
- the dictionary's files (``crossalign.lexicon.dictionaries``): its *test* file gives the
  evaluated pairs; its *full* file (``full.txt``, or MUSE's ``<src>-<tgt>.txt``) the
  vocabularies: MUSE retrieves among the whole target vocabulary and takes CSLS's source
  neighbourhood over the whole source vocabulary, and here the target and source words of the
  full dictionary that have a vector play those parts (plus the words of ``--candidates``);
- evaluation words: source words of the test file that have a vector and at least one gold
  translation among the candidates (MUSE keeps a pair when both words are in its vocabulary);
  a seeded sample of at most ``max_words`` (1500, the size of MUSE's test files);
- precision at k: the percentage of evaluation words with *any* gold translation among their k
  best candidates.

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
from crossalign.lexicon.csls import csls_topk, neighbourhood_means, nn_topk
from crossalign.lexicon.dictionaries import DictionaryFiles, dictionary_files
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
    """[m, H] vectors of the candidate ``tgt_words`` (the target vocabulary)."""
    gold: list[list[int]]
    """Per source word, indices of its gold translations in ``tgt_words``, dictionary order."""
    src_vocab: torch.Tensor | None = None
    """[N, H] vectors of the source vocabulary (the evaluation words among them), over which
    CSLS's term r_S(y) is taken; None: the evaluation words alone."""
    partial_candidates: str | None = None
    """Why the candidates are only the test file's own targets (``vocabulary_missing``), for
    which ``bli_scores`` refuses to report precision; None for a target vocabulary. RSIM and
    mean cosine, which do not retrieve, use such a set."""

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
    source_words: Sequence[str] = (),
) -> BLISet:
    """The evaluation words, candidates, source vocabulary and gold indices (see the module
    docstring). ``source_words``: the source vocabulary beyond the test file's source words."""
    candidates = list(dict.fromkeys(normalise_word(w) for w in candidate_words))
    candidates = [w for w in candidates if is_word(w)]
    kept, tgt = word_vectors(tokenizer, candidates, tgt_vectors, mode)
    tgt_words = [candidates[i] for i in kept]
    index = {w: i for i, w in enumerate(tgt_words)}
    grouped = group_dictionary(test_pairs)
    vocab_words = list(dict.fromkeys([*grouped, *(normalise_word(w) for w in source_words)]))
    vocab_words = [w for w in vocab_words if is_word(w)]
    kept, src_vocab = word_vectors(tokenizer, vocab_words, src_vectors, mode)
    row_of = {vocab_words[i]: r for r, i in enumerate(kept)}
    sources = [w for w, ts in grouped.items() if w in row_of and any(t in index for t in ts)]
    order = list(range(len(sources)))
    if len(order) > max_words:
        order = sorted(random.Random(seed).sample(order, max_words))
    src_words = [sources[i] for i in order]
    if not src_words:
        raise CrossalignError(
            "no test source word has a vector and a gold translation among the candidates; "
            "check the dictionary languages, or use --words mean"
        )
    gold = [[index[t] for t in grouped[w] if t in index] for w in src_words]
    rows = torch.tensor([row_of[w] for w in src_words], dtype=torch.long, device=src_vocab.device)
    return BLISet(src_words, tgt_words, src_vocab[rows], tgt, gold, src_vocab)


PRECISION_KS = (1, 5, 10)
"""The k of MUSE's precision at k."""
CSLS_K = 10
"""MUSE's CSLS neighbourhood size (method ``csls_knn_10``)."""


def precision_at(
    pred: torch.Tensor, gold: list[list[int]], ks: Sequence[int] = PRECISION_KS
) -> dict[int, float]:
    """MUSE's precision at k, in percent: 100 × the fraction of rows with a gold index among
    their first k predictions, per k.

    pred [n, K] long (best first; K < k counts all K); gold: n lists of indices. Vectorised
    with one ``isin`` over (row, index) keys.
    """
    n = pred.shape[0]
    width = int(max(pred.max().item() if pred.numel() else 0, max(max(g) for g in gold))) + 1
    keys = torch.tensor([r * width + c for r, g in enumerate(gold) for c in g], dtype=torch.long)
    found = torch.isin(torch.arange(n)[:, None] * width + pred.cpu(), keys)
    return {k: 100 * float(found[:, :k].any(dim=1).double().mean()) for k in ks}


def bli_scores(bli: BLISet, backend: str = "torch") -> dict[str, float]:
    """MUSE's word translation precision of ``bli``: ``precision_at_<k>-<method>`` (percent)
    for k in 1, 5, 10 and method ``nn`` (cosine) and ``csls_knn_10``, with
    ``CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)``, r_T over the candidates and r_S over the
    source vocabulary ``bli.src_vocab`` (``crossalign.lexicon.csls``); also ``words``,
    ``candidates`` and ``source_vocabulary`` (counts). Raises CrossalignError for a set whose
    candidates are not a target vocabulary (``BLISet.partial_candidates``).
    """
    if bli.partial_candidates:
        raise CrossalignError(bli.partial_candidates)
    vocab = bli.src if bli.src_vocab is None else bli.src_vocab
    terms = (
        neighbourhood_means(bli.src, bli.tgt, CSLS_K, backend=backend),
        neighbourhood_means(bli.tgt, vocab, CSLS_K, backend=backend),
    )
    top = max(PRECISION_KS)
    predictions = {
        "nn": nn_topk(bli.src, bli.tgt, top)[1],
        f"csls_knn_{CSLS_K}": csls_topk(bli.src, bli.tgt, CSLS_K, top, terms, backend=backend)[1],
    }
    out: dict[str, float] = {
        f"precision_at_{k}-{method}": value
        for method, pred in predictions.items()
        for k, value in precision_at(pred, bli.gold).items()
    }
    out.update(
        words=len(bli.src_words), candidates=len(bli.tgt_words), source_vocabulary=len(vocab)
    )
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
    files: DictionaryFiles | str | Path, extra: Sequence[str | Path] = (), column: int = 1
) -> list[str]:
    """Candidate target words, the target vocabulary: column ``column`` of the full dictionary
    (1 = targets, 0 = sources for a dictionary read the other way round), then the words of
    each ``extra`` file (a MUSE dictionary's target column, or one word per line). Without a
    full dictionary the test file's own column stands in (``vocabulary_missing`` says when
    that is all there is).
    """
    if not isinstance(files, DictionaryFiles):
        files = dictionary_files(files)
    words = [pair[column] for pair in read_dictionary(files.full or files.test)]
    for path in extra:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if fields:
                words.append(fields[1] if len(fields) > 1 else fields[0])
    return words


def source_vocabulary(files: DictionaryFiles, column: int = 0) -> list[str]:
    """Source vocabulary words: column ``column`` of the full dictionary (0 = sources, 1 for a
    dictionary read the other way round); none without one (the test file's source words
    are then the vocabulary)."""
    if files.full is None:
        return []
    return [pair[column] for pair in read_dictionary(files.full)]


def vocabulary_missing(files: DictionaryFiles, extra: Sequence[str | Path] = ()) -> str | None:
    """The error when the candidates would be only the test file's own targets (no full
    dictionary beside it and no ``extra`` words): many times fewer than MUSE's whole target
    vocabulary, which makes precision far too high. None when there is a vocabulary."""
    if files.full is not None or extra:
        return None
    return (
        f"no full dictionary beside {files.test} (full.txt, or <src>-<tgt>.txt beside a MUSE "
        f"split): its own targets alone are too few candidates for BLI; put the full "
        f"dictionary there, or give the target vocabulary with --candidates FILE"
    )


def require_vocabulary(opts: DictionaryOptions) -> None:
    """Raise ``vocabulary_missing``'s error for ``opts``'s dictionary, before any work."""
    if why := vocabulary_missing(dictionary_of(opts), opts.candidates or []):
        raise CrossalignError(why)


def dictionary_of(opts: DictionaryOptions) -> DictionaryFiles:
    """The files of ``opts.dict`` (``crossalign.lexicon.dictionaries``); with ``opts.src`` and
    ``opts.tgt`` a MUSE folder's pair is theirs (swapped with ``opts.reverse``)."""
    languages = None
    if opts.src and opts.tgt:
        languages = (opts.tgt, opts.src) if opts.reverse else (opts.src, opts.tgt)
    return dictionary_files(opts.dict, languages)


def dictionary_pair(opts: DictionaryOptions) -> tuple[str, str]:
    """(source, target) languages: ``opts.src``/``opts.tgt``, else the dictionary's file name
    ``<src>-<tgt>.*`` (MUSE) or directory name ``<src>-<tgt>`` (swapped with
    ``opts.reverse``)."""
    if opts.src and opts.tgt:
        return opts.src, opts.tgt
    pair = dictionary_of(opts).pair
    if pair is None:
        raise CrossalignError(
            f"cannot tell the languages from {opts.dict}; give --src and --tgt (e.g. en de)"
        )
    if opts.reverse:
        pair = pair[::-1]
    return opts.src or pair[0], opts.tgt or pair[1]


def gold_pairs(opts: DictionaryOptions) -> list[tuple[str, str]]:
    """The pairs of the dictionary's test file, swapped with ``opts.reverse``."""
    pairs = read_dictionary(dictionary_of(opts).test)
    return [(t, s) for s, t in pairs] if opts.reverse else pairs


def gold_candidates(opts: DictionaryOptions) -> list[str]:
    """Candidate target words of the dictionary (``candidate_words``; its source column with
    ``opts.reverse``) and of ``opts.candidates``."""
    return candidate_words(dictionary_of(opts), opts.candidates or [], 0 if opts.reverse else 1)


def gold_source_words(opts: DictionaryOptions) -> list[str]:
    """The source vocabulary of the dictionary (``source_vocabulary``; its target column with
    ``opts.reverse``)."""
    return source_vocabulary(dictionary_of(opts), 1 if opts.reverse else 0)


def language_texts(opts: DictionaryOptions, src: str, tgt: str) -> tuple[list[str], list[str]]:
    """The source and target text of ``opts`` (``--corpus`` or the text files), at most
    ``opts.context_sentences`` lines each."""
    from crossalign.data.corpora.files import language_text

    return (
        language_text(opts.corpus, opts.src_text, src, opts.context_sentences),
        language_text(opts.corpus, opts.tgt_text, tgt, opts.context_sentences),
    )


def bli_set_for(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, opts: LayerOptions
) -> BLISet:
    """The BLI evaluation set of ``opts``'s dictionary at ``opts.layer`` (the embedding table
    for 0, else hidden states averaged over the text); without a target vocabulary it is
    marked ``partial_candidates`` (RSIM can use it, ``bli_scores`` refuses it)."""
    from crossalign.lexicon.embed import contextual_token_vectors, embedding_layer, piece_ids

    src, tgt = dictionary_pair(opts)
    pairs = gold_pairs(opts)
    candidates = gold_candidates(opts)
    source_words = gold_source_words(opts)
    if opts.layer == 0:
        src_vec = tgt_vec = embedding_layer(model)
    else:
        src_texts, tgt_texts = language_texts(opts, src, tgt)
        sides = (
            (src, src_texts, [s for s, _ in pairs] + source_words),
            (tgt, tgt_texts, candidates),
        )
        vectors = []
        for lang, text, words in sides:
            ids = piece_ids(tokenizer, [normalise_word(w) for w in words])
            vectors.append(
                contextual_token_vectors(
                    model, tokenizer, text, [opts.layer], ids, lang, progress=True
                )[opts.layer]
            )
        src_vec, tgt_vec = vectors
    bli = build_bli_set(
        tokenizer,
        src_vec,
        tgt_vec,
        pairs,
        candidates,
        opts.words,
        opts.max_words,
        opts.seed,
        source_words,
    )
    bli.partial_candidates = vocabulary_missing(dictionary_of(opts), opts.candidates or [])
    return bli


def load_for(model_dir: str, opts: DictionaryOptions):
    """The masked-LM and tokenizer of ``model_dir`` on ``opts.device``."""
    from crossalign.lexicon.embed import load_masked_lm

    return load_masked_lm(model_dir, opts.device)


def evaluate_bli(model_dir: str, opts: BLIOptions) -> EvalOutput:
    """``eval bli``: MUSE's precision at 1, 5 and 10 (nn and csls_knn_10) of the model's word
    vectors at ``opts.layer`` (``bli_scores``)."""
    require_vocabulary(opts)
    model, tokenizer = load_for(model_dir, opts)
    scores = bli_scores(bli_set_for(model, tokenizer, opts))
    src, tgt = dictionary_pair(opts)
    files = dictionary_of(opts)
    note = (
        f"BLI {src}->{tgt}, layer {opts.layer}, words '{opts.words}': test {files.test}, "
        f"vocabularies {files.full or 'of the test file and --candidates'}"
    )
    return EvalOutput(
        metrics=scores,
        notes=[note],
        legacy={"pair": f"{src}-{tgt}", "layer": opts.layer, **scores},
    )


def evaluate_induced(model_dir: str, opts: InducedDictOptions) -> EvalOutput:
    """``eval induced-dict``: precision of the model's induced dictionary against the gold one
    (``induced_precision``), with MUSE's BLI (``bli_scores``) beside it."""
    from crossalign.lexicon.induce import check_pair, induce_with_options

    src, tgt = dictionary_pair(opts)
    check_pair(src, tgt)
    require_vocabulary(opts)
    model, tokenizer = load_for(model_dir, opts)
    induction = induce_with_options(model, tokenizer, opts, src, tgt)
    induced = induced_precision(tokenizer, induction.forward, gold_pairs(opts))
    bli = bli_scores(bli_set_for(model, tokenizer, opts))
    notes = [
        f"induced dictionary {src}->{tgt}, layer {opts.layer} (vocabularies: {src} "
        f"{len(induction.src_vocab)}, {tgt} {len(induction.tgt_vocab)} tokens): precision on "
        f"the {induced['scored']} induced pairs whose source is a gold word "
        f"({induced['pairs']} pairs induced)",
        f"MUSE BLI {src}->{tgt}, layer {opts.layer}, nn and csls_knn_10, words '{opts.words}'",
    ]
    return EvalOutput(
        metrics={**induced, **bli},
        notes=notes,
        legacy={"pair": f"{src}-{tgt}", "layer": opts.layer, "induced": induced, "bli": bli},
    )
