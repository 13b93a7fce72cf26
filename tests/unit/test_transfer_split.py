"""The transfer evaluation's valid split: held out of the training sentences, seeded,
disjoint from what fine-tuning sees, never the test set."""

from __future__ import annotations

from crossalign.evals.transfer import split_off_valid


def _sentences(n: int) -> list[tuple[list[str], list[str]]]:
    return [([f"w{i}"], ["NOUN"]) for i in range(n)]


def test_valid_is_a_seeded_disjoint_part_of_train():
    train = _sentences(50)
    rest, valid = split_off_valid(train, 10, seed=0)
    assert len(valid) == 10 and len(rest) == 40
    words = lambda part: {w[0] for w, _ in part}  # noqa: E731
    assert words(rest) | words(valid) == words(train) and not words(rest) & words(valid)
    assert split_off_valid(train, 10, seed=0) == (rest, valid)
    assert split_off_valid(train, 10, seed=1)[1] != valid
    assert [w for w, _ in valid] == sorted((w for w, _ in valid), key=lambda w: int(w[0][1:]))


def test_at_most_half_is_held_out():
    rest, valid = split_off_valid(_sentences(9), 1000, seed=0)
    assert (len(rest), len(valid)) == (5, 4)
