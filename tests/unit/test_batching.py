import numpy as np
import pytest

from crossalign.data.sampling import language_probs, sample_by_language
from crossalign.errors import CrossalignError
from crossalign.training.sampler import SourceSampler
from tests.oracles.batching import PairArray, pack_blocks


def naive_pack(sentences, length, cls, sep, pad):
    stream = [t for s in sentences for t in (*s, sep)]
    body = length - 2
    blocks = []
    for i in range(0, len(stream), body):
        chunk = stream[i : i + body]
        if len(chunk) == body:
            blocks.append([cls, *chunk, sep])
        elif any(t != sep for t in chunk):
            blocks.append([cls, *chunk] + [pad] * (length - 1 - len(chunk)))
    return np.array(blocks)


@pytest.mark.parametrize("length", [4, 5, 8, 13])
def test_pack_blocks_matches_naive(length):
    rng = np.random.default_rng(length)
    sentences = [list(rng.integers(5, 99, rng.integers(1, 9))) for _ in range(17)]
    got = pack_blocks(sentences, length, 0, 2, 1)
    assert np.array_equal(got, naive_pack(sentences, length, 0, 2, 1))


def test_language_probs_hand_computed():
    p = language_probs({"en": 100, "sw": 1}, 0.5)
    assert p["en"] == pytest.approx(10 / 11) and p["sw"] == pytest.approx(1 / 11)
    assert language_probs({"a": 3, "b": 1}, 0.0) == {"a": 0.5, "b": 0.5}


def test_sample_by_language_upsamples_small():
    texts = {"en": [f"e{i}" for i in range(1000)], "sw": ["s0", "s1"]}
    out = sample_by_language(texts, 0.0, 100, seed=0)
    assert sum(x.startswith("s") for x in out) == 50  # uniform: the 2 lines repeated
    assert out == sample_by_language(texts, 0.0, 100, seed=0)


def test_sampler_epochs_cover_every_example_once():
    s = SourceSampler({"a": 10}, 0.7, seed=1, salt=0)
    seen = np.concatenate([s.draw(step, 5)[1] for step in range(4)])
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:]) == list(range(10))


def test_sampler_resume_equals_uninterrupted():
    full = SourceSampler({"a": 7, "b": 30}, 0.5, seed=2, salt=1)
    run = [full.draw(step, 4) for step in range(20)]
    first = SourceSampler({"a": 7, "b": 30}, 0.5, seed=2, salt=1)
    for step in range(9):
        first.draw(step, 4)
    resumed = SourceSampler({"a": 7, "b": 30}, 0.5, seed=2, salt=1)
    resumed.load_state_dict(first.state_dict())
    for step in range(9, 20):
        name, idx = resumed.draw(step, 4)
        assert name == run[step][0] and np.array_equal(idx, run[step][1])


def test_sampler_follows_alpha():
    s = SourceSampler({"a": 900, "b": 100}, 1.0, seed=0, salt=0)
    names = [s.draw(step, 1)[0] for step in range(4000)]
    assert abs(names.count("a") / 4000 - 0.9) < 0.02


def test_sampler_rejects_empty_source():
    with pytest.raises(CrossalignError, match="no training examples"):
        SourceSampler({"a": 0}, 0.7, 0, 0)


def test_pair_array_roundtrip():
    pairs = PairArray.from_lists([[1, 2], [3], [4, 5, 6]], [[7], [8, 9], []])
    assert len(pairs) == 3
    assert [(s.tolist(), t.tolist()) for s, t in map(pairs.pair, range(3))] == [
        ([1, 2], [7]),
        ([3], [8, 9]),
        ([4, 5, 6], []),
    ]


def test_step_plan_and_collator_use_each_objectives_batch_size():
    """Objective ``a`` draws 8 examples a step, ``b`` 2; each micro-batch of each process gets
    its slice of both."""
    import torch

    from crossalign.objectives import TokenContext
    from crossalign.objectives.mlm import MaskedLM
    from crossalign.training.loader import StepCollator, StepPlan

    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=[], position_offset=0, max_length=8,
    )  # fmt: skip
    blocks = np.arange(5, 5 + 40 * 8).reshape(40, 8) % 45 + 5
    objectives = {"a": MaskedLM(ctx), "b": MaskedLM(ctx)}
    samplers = {n: SourceSampler({"en": 40}, 1.0, 0, i) for i, n in enumerate(objectives)}
    plan = StepPlan(samplers, 0, 2, {"a": 8, "b": 2})
    draws = list(plan)
    assert [len(d.draws["a"][1]) for d in draws] == [8, 8]
    assert [len(d.draws["b"][1]) for d in draws] == [2, 2]
    examples = {"mono": {"en": blocks}}
    for rank in (0, 1):
        item = StepCollator(objectives, examples, 0, rank, 1, {"a": 4, "b": 1})[draws[0]]
        (micro,) = item.micro
        assert micro["a"]["input_ids"].shape == (4, 8) and micro["b"]["input_ids"].shape == (1, 8)
        rows = draws[0].draws["b"][1][rank : rank + 1]
        assert torch.equal(micro["b"]["attention_mask"], torch.ones(1, 8, dtype=torch.long))
        assert (micro["b"]["input_ids"] == torch.from_numpy(blocks[rows])).float().mean() > 0.5
