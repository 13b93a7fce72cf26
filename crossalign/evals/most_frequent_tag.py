"""The per-word most-frequent-tag baseline of a token task: each test word gets the tag it had
most often in the training data, an unseen word the most frequent tag overall. It needs no
model; a tagger below it has not learned to tag (a competence gate of the transfer studies).
The data are ``eval transfer``'s: the same splits, seed and samples, and the same sentences
left out for length (measured with the derived corpus's tokenizer, the one every run on it
uses)."""

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
    """``eval most-frequent-tag``: the baseline in the derived language (``sup``: trained and
    tested on derived sentences, comparable with ``eval transfer``'s SUP) and in English
    (``en``)."""
    from crossalign.data.derive.derivation import DERIVED_LANG
    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.evals.finetune_config import FinetuneConfig
    from crossalign.evals.transfer import TASKS, encode_both, tagged_splits

    spec = TASKS.get(opts.task)
    cfg = FinetuneConfig(
        seed=opts.seed, max_train=opts.max_train, max_test=opts.max_test, max_length=opts.max_length
    )
    data = tagged_splits(opts.derived, spec, cfg, opts.download, opts.split, opts.valid_sentences)
    tokenizer = load_tokenizer(Path(opts.derived) / "tokenizer")
    _, kept = encode_both(tokenizer, data, spec, opts.max_length)
    scores = {
        "sup": most_frequent_tag_accuracy(kept[DERIVED_LANG, "train"], kept[DERIVED_LANG, "test"]),
        "en": most_frequent_tag_accuracy(kept["en", "train"], kept["en", "test"]),
        "train_sentences": float(len(kept["en", "train"])),
        "test_sentences": float(len(kept["en", "test"])),
    }
    note = (
        f"{opts.task}: {len(kept['en', 'train'])} training, {len(kept['en', 'test'])} "
        f"{opts.split} sentences; per-word most frequent tag (accuracy, %)"
    )
    return EvalOutput(metrics=scores, notes=[note])
