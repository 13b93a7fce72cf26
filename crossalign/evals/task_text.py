"""A token task's English training text, unlabelled, for in-domain pre-training.

A tagger fine-tuned from a model pre-trained on text of another domain (the Bible) meets words
its tokenizer and language model have rarely seen. The task's own training sentences, without
their labels, are in-domain text that no evaluation scores on, provided every sentence that some
run could be scored on is left out. ``transfer`` with ``--derived`` splits the task's English
data by the fine-tuning seed (``TokenTask.load``: the test split) and, with ``split: valid``,
holds ``valid_sentences`` training sentences out by seed too (``split_off_valid``, a prefix of
one seeded shuffle, so a smaller count holds out a subset). So the text here is every English
sentence of the task that, for each seed listed, is in neither that seed's test split nor its
valid split of ``n_valid`` sentences, and that matches none of them loosely either: the same
words up to case and punctuation, or one containing the other (``MIN_CONTAINED`` words or
more). Runs scored with a seed not listed, or with more valid sentences, may score on text that
was pre-trained on; so may a real language's test (``--test-lang``), whose pages are
translations of English ones. The card lists the seeds and the count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.evals.transfer import TASKS, split_off_valid

MIN_CONTAINED = 4
"""Words (after ``_normal``) a held-out sentence needs for a line containing it to be left out,
and a line needs for a held-out sentence containing it to leave it out; shorter ones are
everyday phrases ("Yes .")."""

_NOT_WORD = re.compile(r"\W+")


def _normal(words: Iterable[str]) -> tuple[str, ...]:
    """The words lowercased, punctuation dropped (tokens of punctuation alone vanish)."""
    return tuple(w for w in (_NOT_WORD.sub("", word.lower()) for word in words) if w)


def _runs(
    texts: Iterable[tuple[str, ...]], parts: Iterable[tuple[str, ...]]
) -> tuple[set[tuple[str, ...]], set[tuple[str, ...]]]:
    """(the ``texts`` that hold some part as a run of words, the ``parts`` held by some text),
    for parts of ``MIN_CONTAINED`` words or more, found through their first ``MIN_CONTAINED``
    words."""
    k = MIN_CONTAINED
    index: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for part in parts:
        if len(part) >= k:
            index.setdefault(part[:k], []).append(part)
    holding, held = set(), set()
    for text in texts:
        for i in range(len(text) - k + 1):
            for part in index.get(text[i : i + k], ()):
                if text[i : i + len(part)] == part:
                    holding.add(text)
                    held.add(part)
    return holding, held


def unseen_sentences(
    task: str, seeds: Sequence[int], n_valid: int = 1000, download: bool = False
) -> tuple[list[str], dict[str, int]]:
    """(the sentences, space-joined words, that no listed seed's test or valid split holds,
    loosely matched as the module says, each once and in the order first seen; counts).
    ``n_valid`` is ``transfer``'s ``valid_sentences``."""
    if not seeds:
        raise CrossalignError("task text: give at least one seed whose splits to leave out")
    spec = TASKS.get(task)
    seen: dict[str, tuple[str, ...]] = {}
    held: set[tuple[str, ...]] = set()
    for seed in seeds:
        splits = spec.load(download, seed)
        _, valid = split_off_valid(splits["train"], n_valid, seed)
        for words, _ in [*splits["train"], *splits["test"]]:
            line = " ".join(words)
            if line not in seen:
                seen[line] = _normal(words)
        held.update(seen[" ".join(words)] for words, _ in [*splits["test"], *valid])
    candidates = {key for key in seen.values() if key not in held}
    near = _runs(candidates, held)[0] | _runs(held, candidates)[1]
    kept = [line for line, key in seen.items() if key in candidates and key not in near]
    counts = {
        "sentences": len(seen),
        "held_out": len(held),
        "left_out_near": sum(1 for key in seen.values() if key in near),
        "kept": len(kept),
    }
    return kept, counts


def build_task_text(
    out: str | Path,
    task: str,
    seeds: Sequence[int],
    *,
    n_valid: int = 1000,
    download: bool = False,
    command: str = "",
) -> dict[str, Any]:
    """Write ``out/en.txt`` (``unseen_sentences``, one per line) and ``out/card.json``,
    atomically; returns the card."""
    from crossalign.fileio import atomic_dir, write_json_atomic, write_lines_atomic

    spec = TASKS.get(task)
    lines, counts = unseen_sentences(task, seeds, n_valid, download)
    if not lines:
        raise CrossalignError(
            f"task text: every {task} sentence is in some seed's test or valid split; "
            "list fewer --seeds or lower --valid-sentences"
        )
    card = {
        "builder": "task-text",
        "format": "text",
        "languages": ["en"],
        "command": command,
        "task": task,
        "protocol": spec.protocol,
        "left_out": {"seeds": list(seeds), "splits": ["test", "valid"], "valid_sentences": n_valid},
        "holds_for": (
            f"eval transfer --derived with a listed seed and --valid-sentences at most {n_valid}; "
            "not --test-lang, whose test pages are translations of English ones"
        ),
        "filters": [
            "labels dropped; words joined by single spaces, one sentence per line",
            "for every listed seed: its test sentences and its valid sentences left out",
            "and every sentence equal to one of them up to case and punctuation, or containing "
            f"one of them or contained in one ({MIN_CONTAINED} words or more)",
            "repeated sentences kept once",
        ],
        **counts,
        "words": sum(len(line.split()) for line in lines),
        "files": {"en": "en.txt"},
    }
    if spec.licence:
        card["licence"] = spec.licence
    with atomic_dir(out) as tmp:
        write_lines_atomic(tmp / "en.txt", lines)
        write_json_atomic(tmp / "card.json", card)
    return card
