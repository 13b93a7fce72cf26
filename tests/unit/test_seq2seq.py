"""MASS span masking, denoising noise, back-translation and translation batches, the
encoder-decoder's generation and logits, against hand-made inputs and naive oracles."""

from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from crossalign.config import ModelConfig
from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.noise import add_noise, blank_tokens, drop_tokens, local_shuffle
from crossalign.errors import CrossalignError
from crossalign.models.seq2seq import build_seq2seq, encoder_inputs, generate_ids, output_tokens
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.seq2seq import decoder_logits, mass_span


def context(offset=0, languages=("en", "es"), max_length=16):
    return TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=list(languages), position_offset=offset, max_length=max_length,
    )  # fmt: skip


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    model = build_seq2seq(ModelConfig(arch="bert", preset="tiny"), 50, (0, 2, 1), ["en", "es"], 16)
    return model.eval()


# --- MASS -------------------------------------------------------------------------------


def test_mass_span_length_and_start_distribution():
    g = gen()
    n, k_expected = 10, 6  # round(0.5 * 12)
    starts = Counter()
    for _ in range(20000):
        start, k = mass_span(n, 0.5, g)
        assert k == k_expected
        starts[start] += 1
    assert set(starts) == set(range(1, 7))  # the span stays within positions 1 ... n + 1
    share = {s: c / 20000 for s, c in starts.items()}
    # 0.2 at the start, 0.2 at the end, 0.6 spread over the 6 possible starts
    assert share[1] == pytest.approx(0.3, abs=0.015)
    assert share[6] == pytest.approx(0.3, abs=0.015)
    for s in range(2, 6):
        assert share[s] == pytest.approx(0.1, abs=0.01)


def test_mass_span_of_short_sentences_keeps_one_unmasked_token():
    for n in (0, 1, 2):
        start, k = mass_span(n, 1.0, gen())
        assert k == n + 1 and start == 1


def test_mass_collate_layout():
    mass = OBJECTIVES.get("mass")(context(offset=2))
    sentence = [10, 11, 12, 13, 14, 15]
    raw = RawBatch("es", sentences=[np.array(sentence), np.array([20, 21])])
    b = mass.collate(raw, gen(3))
    row = [0, *sentence, 2]
    labels = b["labels"][0][b["labels"][0] != IGNORE_INDEX].tolist()
    k = round(0.5 * 8)
    assert len(labels) == k
    start = next(s for s in range(1, 8) if row[s : s + k] == labels)
    # the decoder reads the span shifted right, at the sentence positions of its inputs
    assert b["decoder_input_ids"][0, :k].tolist() == row[start - 1 : start + k - 1]
    assert b["decoder_position_ids"][0, :k].tolist() == [
        2 + p for p in range(start - 1, start + k - 1)
    ]
    assert b["decoder_attention_mask"][0].tolist() == [1] * k
    # outside the span the encoder input is the sentence; inside, <mask>, random or kept
    enc = b["input_ids"][0, : len(row)].tolist()
    for p, (x, y) in enumerate(zip(enc, row)):
        if not start <= p < start + k:
            assert x == y
    assert b["cross_attention_mask"][0, : len(row)].tolist() == [int(x != 4) for x in enc]
    assert b["position_ids"][0, :3].tolist() == [2, 3, 4]
    assert (b["token_type_ids"] == 1).all() and (b["decoder_token_type_ids"] == 1).all()
    # the second sentence: <s> 20 21 </s>, k = 2, padding after
    assert (b["labels"][1] != IGNORE_INDEX).sum() == 2
    assert b["attention_mask"][1].tolist() == [1] * 4 + [0] * 4
    flat = b["labels"].flatten()
    assert b["masked_labels"].tolist() == flat[flat != IGNORE_INDEX].tolist()


def test_mass_replaces_span_tokens_80_10_10():
    mass = OBJECTIVES.get("mass")(context(max_length=64), span_ratio=1.0)
    sentence = np.arange(10, 40)
    counts = Counter()
    for seed in range(200):
        b = mass.collate(RawBatch("en", sentences=[sentence]), gen(seed))
        span = b["labels"][0] != IGNORE_INDEX
        span_pos = torch.nonzero(b["labels"][0] != IGNORE_INDEX).squeeze(1)
        assert span.sum() == 31  # every token and the final </s>
        inputs = b["input_ids"][0, span_pos + 1]  # span labels sit one position earlier
        truth = torch.tensor([*sentence.tolist(), 2])
        counts["mask"] += int((inputs == 4).sum())
        counts["kept"] += int((inputs == truth).sum())
        counts["n"] += len(truth)
    assert counts["mask"] / counts["n"] == pytest.approx(0.8, abs=0.02)
    assert counts["kept"] / counts["n"] == pytest.approx(0.1, abs=0.02)


def test_mass_options_are_checked():
    with pytest.raises(CrossalignError, match="span_ratio"):
        OBJECTIVES.get("mass")(context(), span_ratio=0)
    with pytest.raises(CrossalignError, match="replace_probs"):
        OBJECTIVES.get("mass")(context(), replace_probs=(0.9, 0.2))


# --- denoising noise ----------------------------------------------------------------------


def test_local_shuffle_moves_tokens_less_than_alpha():
    tokens = torch.arange(40)
    moved = 0
    for seed in range(200):
        out = local_shuffle(tokens, 3.0, gen(seed))
        assert sorted(out.tolist()) == tokens.tolist()
        where = torch.argsort(out)  # new position of each token
        assert (where - tokens).abs().max() < 3
        moved += int((out != tokens).sum())
    assert moved > 0
    assert torch.equal(local_shuffle(tokens, 0, gen()), tokens)


def test_local_shuffle_equals_sorting_noisy_ranks():
    tokens = torch.tensor([7, 8, 9, 10, 11])
    noise = torch.rand(5, generator=gen(5)) * 3
    expected = tokens[torch.argsort(torch.arange(5) + noise)]
    assert torch.equal(local_shuffle(tokens, 3.0, gen(5)), expected)


def test_drop_tokens_rate_and_never_empty():
    tokens = torch.arange(1000)
    kept = drop_tokens(tokens, 0.1, gen())
    assert len(kept) / 1000 == pytest.approx(0.9, abs=0.03)
    assert kept.tolist() == sorted(kept.tolist())  # order kept
    for seed in range(50):
        assert len(drop_tokens(torch.tensor([5, 6]), 0.99, gen(seed))) >= 1


def test_blank_tokens_rate():
    out = blank_tokens(torch.arange(10, 2010), 0.1, 4, gen())
    assert (out == 4).float().mean().item() == pytest.approx(0.1, abs=0.02)
    same = out != 4
    assert torch.equal(out[same], torch.arange(10, 2010)[same])


def test_add_noise_is_shuffle_then_drop_then_blank():
    tokens = torch.arange(10, 30)
    g = gen(9)
    expected = blank_tokens(drop_tokens(local_shuffle(tokens, 3, g), 0.1, g), 0.1, 4, g)
    out = add_noise(tokens, gen(9), shuffle=3, drop=0.1, blank=0.1, blank_id=4)
    assert torch.equal(out, expected)


def test_dae_collate_layout():
    dae = OBJECTIVES.get("dae")(context(), shuffle=0, drop=0, blank=0)
    raw = RawBatch("en", sentences=[np.array([10, 11, 12]), np.array([13])])
    b = dae.collate(raw, gen())
    assert b["input_ids"].tolist() == [[0, 10, 11, 12, 2], [0, 13, 2, 1, 1]]
    assert b["decoder_input_ids"].tolist() == [[0, 10, 11, 12], [0, 13, 1, 1]]
    assert b["labels"].tolist() == [[10, 11, 12, 2], [13, 2, -100, -100]]
    assert b["decoder_attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert (b["token_type_ids"] == 0).all() and (b["decoder_token_type_ids"] == 0).all()
    with pytest.raises(CrossalignError, match="shuffle"):
        OBJECTIVES.get("dae")(context(), shuffle=0.5)


def test_mt_collate_directions():
    pairs = [(np.array([10, 11]), np.array([20]))]
    forward = OBJECTIVES.get("mt")(context(), direction="forward")
    b = forward.collate(RawBatch("en-es", pairs=pairs), gen())
    assert b["input_ids"].tolist() == [[0, 10, 11, 2]] and b["labels"].tolist() == [[20, 2]]
    assert (b["token_type_ids"] == 0).all() and (b["decoder_token_type_ids"] == 1).all()
    backward = OBJECTIVES.get("mt")(context(), direction="backward")
    b = backward.collate(RawBatch("en-es", pairs=pairs), gen())
    assert b["input_ids"].tolist() == [[0, 20, 2]] and b["labels"].tolist() == [[10, 11, 2]]
    assert (b["token_type_ids"] == 1).all() and (b["decoder_token_type_ids"] == 0).all()
    both = OBJECTIVES.get("mt")(context())
    firsts = {both.collate(RawBatch("en-es", pairs=pairs), gen(s))["input_ids"][0, 1].item()
              for s in range(20)}  # fmt: skip
    assert firsts == {10, 20}


# --- the model ---------------------------------------------------------------------------


def naive_greedy(model, ids, mask, src, tgt, steps):
    """Greedy decoding by re-running the whole decoder at every step (no cache)."""
    with torch.no_grad():
        states = model.encoder(
            input_ids=ids, attention_mask=mask, token_type_ids=torch.full_like(ids, src)
        ).last_hidden_state
        out = torch.zeros((len(ids), 1), dtype=torch.long)
        for _ in range(steps):
            logits = model.decoder(
                input_ids=out, token_type_ids=torch.full_like(out, tgt), use_cache=False,
                encoder_hidden_states=states, encoder_attention_mask=mask,
            ).logits  # fmt: skip
            out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return out


def test_greedy_generation_equals_a_naive_loop_in_each_target_language(tiny_model):
    ids, mask = encoder_inputs([[5, 6, 7, 8], [9, 10]], 0, 2, 1, 16)
    outputs = {}
    for tgt in (0, 1):
        got = generate_ids(tiny_model, ids, mask, 0, tgt, max_new_tokens=6)
        expected = naive_greedy(tiny_model, ids, mask, 0, tgt, 6)
        # identical until a row ends (generate pads a finished row)
        for g_row, e_row in zip(got.tolist(), expected.tolist()):
            end = g_row.index(2) + 1 if 2 in g_row else len(g_row)
            assert g_row[:end] == e_row[:end]
        outputs[tgt] = got
    assert not torch.equal(outputs[0], outputs[1])  # the decoder's language row matters


def test_output_tokens_strip_specials():
    rows = torch.tensor([[0, 7, 8, 2, 1], [0, 9, 2, 5, 5], [0, 3, 3, 3, 3]])
    assert output_tokens(rows, 0, 2, 1) == [[7, 8], [9], [3, 3, 3, 3]]


def test_decoder_logits_equal_the_encoder_decoder_forward(tiny_model):
    dae = OBJECTIVES.get("dae")(context(), shuffle=0, drop=0, blank=0)
    raw = RawBatch("es", sentences=[np.array([10, 11, 12]), np.array([13])])
    b = dae.collate(raw, gen())
    with torch.no_grad():
        ours = decoder_logits(tiny_model, b)
        full = tiny_model(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"],
            token_type_ids=b["token_type_ids"], decoder_input_ids=b["decoder_input_ids"],
            decoder_attention_mask=b["decoder_attention_mask"],
            decoder_token_type_ids=b["decoder_token_type_ids"],
        ).logits  # fmt: skip
    assert torch.allclose(ours, full.flatten(0, 1)[b["masked_index"]], atol=1e-5)


def test_loss_is_label_smoothed_cross_entropy():
    dae = OBJECTIVES.get("dae")(context(), label_smoothing=0.1)
    logits = torch.randn(5, 50, generator=gen())
    labels = torch.tensor([3, 7, 9, 2, 2])
    loss, n, metrics = dae.loss({"masked_labels": labels}, logits)
    assert int(n) == 5
    assert loss.item() == pytest.approx(F.cross_entropy(logits, labels, label_smoothing=0.1).item())
    assert metrics["nll"].item() == pytest.approx(F.cross_entropy(logits, labels).item())


def test_back_translation_feeds_the_models_translation_to_the_encoder(tiny_model):
    bt = OBJECTIVES.get("bt")(context())
    raw = RawBatch("en", sentences=[np.array([10, 11, 12]), np.array([13])])
    b = bt.collate(raw, gen())
    assert int(b["bt_language"]) == 1  # es, the only other language
    tiny_model.train()
    t = bt.translated_inputs(tiny_model, b)
    assert tiny_model.training  # the no-grad translation pass restores train mode
    ids, mask = t["input_ids"], t["attention_mask"]
    assert (ids[:, 0] == 0).all() and (t["token_type_ids"] == 1).all()
    for row, m in zip(ids.tolist(), mask.tolist()):
        length = sum(m)
        assert row[length - 1] == 2 and 2 not in row[1 : length - 1]  # one </s>, at the end
        assert all(x == 1 for x in row[length:])
    assert ids.shape[1] <= 16
    # what it learns: the original sentences, in their own language
    assert torch.equal(t["labels"], b["labels"]) and (t["decoder_token_type_ids"] == 0).all()
    logits = bt(tiny_model, b)
    assert logits.shape == (int((b["labels"] != IGNORE_INDEX).sum()), 50)
    assert logits.requires_grad


def test_back_translation_needs_a_second_language():
    from crossalign.config import RunConfig

    bt = OBJECTIVES.get("bt")(context(languages=("en",)))
    with pytest.raises(CrossalignError, match="two languages"):
        bt.check_config(RunConfig())
