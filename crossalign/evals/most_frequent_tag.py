"""The per-word most-frequent-tag baseline of a token task: each test word gets the tag it had
most often in the training data, an unseen word the most frequent tag overall. It needs no
model; a tagger below it has not learned to tag (a competence gate of the transfer studies).
The data are ``eval transfer``'s: the same splits, seed and samples, and the same sentences
left out for length (measured with the derived corpus's tokenizer, the one every run on it
uses, or for a real language with the given model's tokenizer)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput

if TYPE_CHECKING:
    from crossalign.evals.options import MostFrequentTagOptions
    from crossalign.evals.transfer import Tagged


def most_frequent_tag_accuracy(train: Tagged, test: Tagged) -> float:
    """Word accuracy (%) on ``test`` of tagging each word with its most frequent tag in
    ``train`` (ties: the tag seen first), an unseen word with the most frequent tag overall."""
    per_word: dict[str, Counter] = {}
    overall: Counter = Counter()
    for words, tags in train:
        for word, tag in zip(words, tags):
            per_word.setdefault(word, Counter())[tag] += 1
            overall[tag] += 1
    if not overall:
        raise CrossalignError("most-frequent-tag: the training data has no tagged word")
    fallback = overall.most_common(1)[0][0]
    right = total = 0
    for words, tags in test:
        for word, tag in zip(words, tags):
            seen = per_word.get(word)
            right += (seen.most_common(1)[0][0] if seen else fallback) == tag
            total += 1
    if not total:
        raise CrossalignError("most-frequent-tag: the test data has no tagged word")
    return 100.0 * right / total


def evaluate(model_dir: None, opts: MostFrequentTagOptions) -> EvalOutput:
    """``eval most-frequent-tag``: the baseline in the derived language or ``test_lang``
    (``sup``: trained and tested on its sentences, comparable with ``eval transfer``'s SUP)
    and in English (``en``), on the sentences ``eval transfer`` keeps."""
    from crossalign.data.derive.derivation import DERIVED_LANG
    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.evals.finetune_config import FinetuneConfig
    from crossalign.evals.transfer import (
        TASKS,
        encode_both,
        encode_each,
        language_splits,
        tagged_splits,
    )

    spec = TASKS.get(opts.task)
    cfg = FinetuneConfig(
        seed=opts.seed, max_train=opts.max_train, max_test=opts.max_test, max_length=opts.max_length
    )
    if opts.test_lang is None:
        data = tagged_splits(
            opts.derived, spec, cfg, opts.download, opts.split, opts.valid_sentences
        )
        tokenizer = load_tokenizer(Path(opts.derived) / "tokenizer")
        _, kept = encode_both(tokenizer, data, spec, opts.max_length)
        lang = DERIVED_LANG
    else:
        lang = opts.test_lang
        data = language_splits(
            spec, ("en", lang), cfg, opts.download, opts.split, opts.valid_sentences
        )
        if (lang, "train") not in data:
            raise CrossalignError(
                f"most-frequent-tag: {opts.task} has no {lang} training data, so there is no "
                f"{lang} baseline (nor a SUP for eval transfer to compare with it)"
            )
        tokenizer = load_tokenizer(opts.tokenizer, "--tokenizer")
        _, kept = encode_each(tokenizer, data, spec, length_limit(opts))
    scores = {
        "sup": most_frequent_tag_accuracy(kept[lang, "train"], kept[lang, "test"]),
        "en": most_frequent_tag_accuracy(kept["en", "train"], kept["en", "test"]),
        # named as eval transfer names them: English's counts, then the other language's
        "train_sentences": float(len(kept["en", "train"])),
        "test_sentences": float(len(kept["en", "test"])),
        "target_train_sentences": float(len(kept[lang, "train"])),
        "target_test_sentences": float(len(kept[lang, "test"])),
    }
    note = (
        f"{opts.task}: {len(kept['en', 'train'])} training, {len(kept['en', 'test'])} "
        f"{opts.split} sentences; per-word most frequent tag (accuracy, %)"
    )
    return EvalOutput(metrics=scores, notes=[note])


def length_limit(opts: MostFrequentTagOptions) -> int:
    """``eval transfer``'s subword limit for ``opts.tokenizer``'s model: ``max_length``, or the
    model's input when shorter (a tokenizer without a model config: ``max_length``)."""
    from transformers import AutoConfig

    from crossalign.hub import pretrained_source
    from crossalign.models.load import input_limit

    try:
        config = AutoConfig.from_pretrained(pretrained_source(opts.tokenizer, "--tokenizer"))
    except (OSError, ValueError):
        return opts.max_length
    return input_limit(config, opts.max_length)
