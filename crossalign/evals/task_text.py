"""A token task's English training text, unlabelled, for in-domain pre-training.

A tagger fine-tuned from a model pre-trained on text of another domain (the Bible) meets words
its tokenizer and language model have rarely seen. The task's own training sentences, without
their labels, are in-domain text that no evaluation scores on, provided every sentence that some
run could be scored on is left out. ``transfer`` splits its data by the fine-tuning seed (the
task's test split) and, with ``split: valid``, holds ``n_valid`` training sentences out by seed
too (``split_off_valid``). So the text here is every English sentence of the task that, for
each seed listed, is in neither that seed's test split nor its valid split; a sentence whose
words equal a held-out one is left out as well. Runs scored with a seed not listed may score on
sentences that were pre-trained on; the card lists the seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.evals.transfer import TASKS, split_off_valid


def unseen_sentences(
    task: str, seeds: Sequence[int], n_valid: int = 1000, download: bool = False
) -> tuple[list[str], dict[str, int]]:
    """(the sentences, space-joined words, in no listed seed's test or valid split, each once
    and in the order first seen; counts). ``n_valid`` is ``transfer``'s ``valid_sentences``."""
    if not seeds:
        raise CrossalignError("task text: give at least one seed whose splits to leave out")
    spec = TASKS.get(task)
    seen: dict[str, None] = {}
    held: set[str] = set()
    for seed in seeds:
        splits = spec.load(download, seed)
        _, valid = split_off_valid(splits["train"], n_valid, seed)
        for words, _ in [*splits["train"], *splits["test"]]:
            seen.setdefault(" ".join(words))
        held.update(" ".join(words) for words, _ in [*splits["test"], *valid])
    kept = [line for line in seen if line not in held]
    counts = {"sentences": len(seen), "held_out": len(held), "kept": len(kept)}
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
        "filters": [
            "labels dropped; words joined by single spaces, one sentence per line",
            "for every listed seed: its test sentences and its valid sentences left out, and "
            "any sentence with the same words as one of them",
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
