"""``crossalign data task-text``: a task's unlabelled training text leaves out every sentence
that a transfer evaluation with the listed seeds could score on, read off transfer's own
splitting (``TokenTask.load`` and ``chosen_splits``), and keeps every other sentence."""

from __future__ import annotations

import json
import random

import pytest

from crossalign.cli import main
from crossalign.data.corpora.pos import seeded_split
from crossalign.errors import CrossalignError
from crossalign.evals.finetune_config import FinetuneConfig
from crossalign.evals.task_text import unseen_sentences
from crossalign.evals.transfer import TASKS, TokenTask, chosen_splits

# 60 sentences, two of them with the same words (the task's data repeats sentences too)
SENTENCES = [([f"s{i}", "w", "."], ["NOUN", "NOUN", "PUNCT"]) for i in range(59)]
SENTENCES.append((["s7", "w", "."], ["VERB", "NOUN", "PUNCT"]))


def _load(download: bool, seed: int):
    return seeded_split(SENTENCES, seed, n_test=6)


TASKS.register("test-task-text")(TokenTask("test-task-text", ("NOUN", "VERB", "PUNCT"), _load))


def _scored(seed: int, split: str, n_valid: int) -> set[str]:
    """The sentences transfer scores on for ``seed`` and ``split``, through its own code."""
    splits = _load(False, seed)
    cfg = FinetuneConfig(seed=seed)
    _, scored = chosen_splits(splits["train"], splits["test"], cfg, split, n_valid)
    return {" ".join(words) for words, _ in scored}


def test_no_kept_sentence_is_scored_by_a_listed_seed_and_every_other_is_kept():
    seeds = [0, 3]
    kept, counts = unseen_sentences("test-task-text", seeds, n_valid=5)
    scored = set().union(*(_scored(s, split, 5) for s in seeds for split in ("test", "valid")))
    everything = {" ".join(words) for words, _ in SENTENCES}
    assert not set(kept) & scored
    assert set(kept) == everything - scored
    assert len(kept) == len(set(kept))
    assert counts == {
        "sentences": 59, "held_out": len(scored), "left_out_near": 0, "kept": len(kept)
    }  # fmt: skip
    # a seed not listed scores on some kept text: the card's seed list matters
    assert set(kept) & _scored(1, "test", 5)


def test_a_sentence_held_out_once_is_left_out_whatever_its_labels():
    # find a seed whose test split holds one copy of the repeated sentence
    seed = next(s for s in range(50) if ["s7", "w", "."] in [w for w, _ in _load(False, s)["test"]])
    kept, _ = unseen_sentences("test-task-text", [seed], n_valid=1)
    assert "s7 w ." not in kept


LOOSE_TEST = [["The", "cat", "sat", "on", "the", "mat", "."]]
LOOSE_TRAIN = [
    "the cat sat on the mat",  # the same words up to case and punctuation
    "Yesterday , the cat sat on the mat again .",  # holds the scored sentence
    "cat sat on the",  # held by it, four words
    "sat on",  # held by it, but an everyday phrase
    "The dog ran .",
    "On the mat , a hat .",
]


def _loose(download: bool, seed: int):
    tags = lambda words: ["X"] * len(words)  # noqa: E731
    train = [(line.split(), tags(line.split())) for line in LOOSE_TRAIN]
    return {"train": train, "test": [(w, tags(w)) for w in LOOSE_TEST]}


TASKS.register("test-task-text-loose")(TokenTask("test-task-text-loose", ("X",), _loose))


def test_sentences_matching_a_scored_one_loosely_are_left_out():
    kept, counts = unseen_sentences("test-task-text-loose", [0], n_valid=0)
    assert kept == ["sat on", "The dog ran .", "On the mat , a hat ."]
    assert counts == {"sentences": 7, "held_out": 1, "left_out_near": 2, "kept": 3}


def test_the_builder_writes_text_and_a_card(tmp_path, capsys):
    out = tmp_path / "text"
    args = ["data", "task-text", "--task", "test-task-text", "--seeds", "0, 2"]
    assert main([*args, "--valid-sentences", "4", "--out", str(out)]) == 0
    lines = (out / "en.txt").read_text(encoding="utf-8").splitlines()
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert lines == unseen_sentences("test-task-text", [0, 2], n_valid=4)[0]
    assert card["left_out"] == {"seeds": [0, 2], "splits": ["test", "valid"], "valid_sentences": 4}
    assert card["kept"] == len(lines) and card["words"] == 3 * len(lines)
    assert "--seeds 0,2" in card["command"] and "licence" not in card
    assert "--valid-sentences at most 4" in card["holds_for"]
    assert f"{len(lines)} of 59 sentences" in capsys.readouterr().out


def test_pos_cards_carry_the_data_licence():
    assert "personal use only" in TASKS.get("pos").licence


def test_bad_requests_are_one_line_errors(tmp_path):
    with pytest.raises(CrossalignError, match="unknown task 'test-task-txt'"):
        unseen_sentences("test-task-txt", [0])
    with pytest.raises(CrossalignError, match="at least one seed"):
        unseen_sentences("test-task-text", [])
    # held out by every seed: nothing left to write, and nothing written
    seeds = ",".join(str(s) for s in range(40))
    out = tmp_path / "none"
    args = ["data", "task-text", "--task", "test-task-text", "--out", str(out), "--seeds"]
    with pytest.raises(SystemExit):
        main([*args, "x"])
    code = main([*args, seeds])
    assert code != 0 and not out.exists()


def test_seed_choice_is_reproducible():
    first = unseen_sentences("test-task-text", [4], n_valid=3)
    assert unseen_sentences("test-task-text", [4], n_valid=3) == first
    random.seed(123)  # the global generator plays no part
    assert unseen_sentences("test-task-text", [4], n_valid=3) == first
