"""DICT-MLM masking and ALIGN-MLM's loss on hand-made tensors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from crossalign.config import TokenizerConfig
from crossalign.data.derive.twins import build_twin_tokenizer
from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.tokenizer import train_tokenizer
from crossalign.errors import CrossalignError
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.align_mlm import alignment_loss, dictionary_cosines
from crossalign.objectives.dict_mlm import dict_mask, random_other, translation_table

MASK = 4


def test_translation_table_matches_a_dict_of_lists():
    src = torch.tensor([5, 5, 6, 7, 9])
    tgt = torch.tensor([10, 11, 12, 7, 5])
    offsets, targets = translation_table(src, tgt, 16)
    expected: dict[int, set[int]] = {}
    for a, b in zip(src.tolist(), tgt.tolist()):
        if a != b:
            expected.setdefault(a, set()).add(b)
            expected.setdefault(b, set()).add(a)
    for t in range(16):
        got = targets[offsets[t] : offsets[t + 1]].tolist()
        assert sorted(got) == sorted(expected.get(t, set())), t
    assert offsets[-1] == targets.numel()


def test_random_other_never_draws_the_label_and_covers_the_rest():
    ids = torch.tensor([10, 11, 12, 13])
    labels = torch.tensor([[10, 11, 12, 13, 99]]).expand(4000, -1)
    draws = random_other(labels, ids, torch.Generator().manual_seed(0))
    for col, label in enumerate([10, 11, 12, 13]):
        seen = set(draws[:, col].tolist())
        assert seen == set(ids.tolist()) - {label}
    assert set(draws[:, 4].tolist()) == set(ids.tolist())  # a label outside the language
    # uniform over the three others (each ≈ 1/3 of 4000)
    counts = torch.bincount(draws[:, 0], minlength=14)[11:14].float()
    assert (counts / 4000 - 1 / 3).abs().max() < 0.04


def _blocks(n=400, length=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (n, length), generator=g)
    ids[:, 0], ids[:, -1] = 0, 2  # specials
    return ids


def test_dict_mask_never_shows_the_label_when_nothing_is_kept():
    # exclude_label (random_replacement: language): a random replacement is never the label
    ids = _blocks()
    offsets, targets = translation_table(torch.arange(5, 20), torch.arange(20, 35), 50)
    maskable = ids > 4
    for no_translation in ("keep", "bert"):
        inputs, labels = dict_mask(
            ids, maskable, MASK, offsets, targets, torch.arange(5, 40),
            torch.Generator().manual_seed(1), mask_prob=0.3, replace_probs=(0.8, 0.2),
            no_translation=no_translation, exclude_label=True,
        )  # fmt: skip
        selected = labels != IGNORE_INDEX
        assert selected.any()
        assert (labels[selected] == ids[selected]).all()  # labels stay the original tokens
        assert (inputs[~selected] == ids[~selected]).all()
        assert not selected[:, 0].any() and not selected[:, -1].any()
        shown = selected & (inputs == labels)
        if no_translation == "bert":
            assert not shown.any()  # the label never shows
        else:  # only tokens without an entry that drew the dictionary branch show
            assert shown.any() and (ids[shown] >= 35).all()


@pytest.mark.parametrize("no_translation", ["keep", "bert"])
def test_dict_mask_translates_half_of_the_selected_entries(no_translation):
    ids = _blocks(n=2000)
    src, tgt = torch.arange(5, 20), torch.arange(20, 35)
    offsets, targets = translation_table(src, tgt, 50)
    inputs, labels = dict_mask(
        ids, ids > 4, MASK, offsets, targets, torch.arange(5, 40),
        torch.Generator().manual_seed(2), mask_prob=0.15, translate_prob=0.5,
        no_translation=no_translation,
    )  # fmt: skip
    selected = labels != IGNORE_INDEX
    with_entry = selected & (ids < 35)  # 5..34 have exactly one translation
    translation = torch.where(ids < 20, ids + 15, ids - 15)
    translated = with_entry & (inputs == translation)
    share = translated.sum().item() / with_entry.sum().item()
    assert abs(share - 0.5) < 0.03
    assert abs(selected.float().mean().item() - 0.15 * 30 / 32) < 0.01
    # untranslated tokens with an entry follow 80/10/10 (a random draw is the label 1 in 35)
    rest = with_entry & ~translated
    masked = (inputs[rest] == MASK).float().mean().item()
    kept = (inputs[rest] == ids[rest]).float().mean().item()
    assert abs(masked - 0.8) < 0.03 and abs(kept - 0.1 - 0.1 / 35) < 0.03
    # tokens without an entry are never translated; "keep" leaves the dictionary branch's half
    # unchanged (0.5 + 0.5 · 0.1 kept, 0.5 · 0.8 masked), "bert" gives them all 80/10/10
    no_entry = selected & (ids >= 35)
    masked = (inputs[no_entry] == MASK).float().mean().item()
    kept = (inputs[no_entry] == ids[no_entry]).float().mean().item()
    expected = (0.4, 0.55) if no_translation == "keep" else (0.8, 0.1)
    assert abs(masked - expected[0]) < 0.04 and abs(kept - expected[1]) < 0.04
    assert ((inputs[no_entry] == MASK) | (inputs[no_entry] == ids[no_entry]) |
            ((inputs[no_entry] >= 5) & (inputs[no_entry] < 40))).all()  # fmt: skip


def _paper_dict_mlm(tokens, translations, random_ids, rng, mask_prob, translate_prob):
    """ALIGN-MLM App. G.4, token by token: select 15% of the tokens; with 50% probability a
    selected token gets the standard 80/10/10 (a random token: any of ``random_ids``, the
    vocabulary, as ``torch.randint(len(tokenizer))``), otherwise it is switched to its
    translation if it has one, else left unchanged. Returns (inputs, labels)."""
    inputs, labels = [], []
    for t in tokens:
        if rng.random() >= mask_prob:
            inputs.append(t)
            labels.append(IGNORE_INDEX)
            continue
        labels.append(t)
        if rng.random() < translate_prob:
            inputs.append(rng.choice(translations[t]) if t in translations else t)
        else:
            u = rng.random()
            if u < 0.8:
                inputs.append(MASK)
            elif u < 0.9:
                inputs.append(rng.choice(random_ids))
            else:
                inputs.append(t)
    return inputs, labels


def _outcomes(tokens, inputs, labels, translations):
    """Share of each (token, outcome) over all rows: outcome is skipped (not selected),
    mask, kept, translated or random."""
    counts: dict[tuple[int, str], int] = {}
    for row_t, row_i, row_l in zip(tokens, inputs, labels):
        for t, i, lab in zip(row_t, row_i, row_l):
            if lab == IGNORE_INDEX:
                what = "skipped"
            elif i == MASK:
                what = "mask"
            elif i == t:
                what = "kept"
            elif i in translations.get(t, []):
                what = "translated"
            else:
                what = "random"
            counts[t, what] = counts.get((t, what), 0) + 1
    n = len(tokens)
    return {k: v / n for k, v in counts.items()}


def test_dict_mask_matches_a_literal_transcription_of_the_paper():
    import random

    # 5 and 6 have translations (6 has two), 7 and 8 have none
    translations = {5: [20], 20: [5], 6: [21, 22], 21: [6], 22: [6]}
    src, tgt = torch.tensor([5, 6, 6]), torch.tensor([20, 21, 22])
    offsets, targets = translation_table(src, tgt, 30)
    random_ids = list(range(5, 12))
    rows = 20000
    ids = torch.tensor([[5, 6, 7, 8]]).repeat(rows, 1)
    inputs, labels = dict_mask(
        ids, torch.ones_like(ids, dtype=torch.bool), MASK, offsets, targets,
        torch.tensor(random_ids), torch.Generator().manual_seed(0), mask_prob=0.5,
        translate_prob=0.5,
    )  # fmt: skip
    rng = random.Random(0)
    literal = [_paper_dict_mlm([5, 6, 7, 8], translations, random_ids, rng, 0.5, 0.5)
               for _ in range(rows)]  # fmt: skip
    got = _outcomes(ids.tolist(), inputs.tolist(), labels.tolist(), translations)
    want = _outcomes(ids.tolist(), [x for x, _ in literal], [y for _, y in literal], translations)
    assert set(got) == set(want)
    for key in want:
        assert abs(got[key] - want[key]) < 0.015, key
    # the paper's shares: a token without an entry is kept in 0.5 · (0.5 + 0.5 · 0.1)
    assert want[7, "kept"] == pytest.approx(0.275, abs=0.015)
    assert (8, "translated") not in got and (7, "translated") not in got


def test_dict_mask_corner_cases_are_exact():
    src, tgt = torch.tensor([5]), torch.tensor([20])
    offsets, targets = translation_table(src, tgt, 30)
    ids = torch.tensor([[5, 7, 20, 8]])
    everything = torch.ones_like(ids, dtype=torch.bool)
    args = (ids, everything, MASK, offsets, targets, torch.arange(5, 12))
    # every token selected and sent to the dictionary branch: translated, or left unchanged
    inputs, labels = dict_mask(*args, torch.Generator(), mask_prob=1.0, translate_prob=1.0)
    assert inputs.tolist() == [[20, 7, 5, 8]] and labels.tolist() == ids.tolist()
    # the variant: tokens without an entry get 80/10/10 (here: all <mask>)
    inputs, _ = dict_mask(
        *args, torch.Generator(), mask_prob=1.0, translate_prob=1.0, replace_probs=(1.0, 0.0),
        no_translation="bert",
    )  # fmt: skip
    assert inputs.tolist() == [[20, MASK, 5, MASK]]
    with pytest.raises(CrossalignError, match="no_translation 'mask' is unknown"):
        dict_mask(*args, torch.Generator(), no_translation="mask")


@pytest.fixture(scope="module")
def derived_files(tmp_path_factory):
    """A twin tokenizer on the fixture, its exact dictionary and vocab.json."""
    from pathlib import Path

    from crossalign.data.derive.derivation import _write_dictionary
    from crossalign.data.derive.twins import Transliterator

    lines = (Path(__file__).resolve().parents[1] / "fixtures/tiny/en.txt").read_text().splitlines()
    base = train_tokenizer({"en": lines}, TokenizerConfig(vocab_size=120), seed=0)
    twin = build_twin_tokenizer(base, [])
    out = tmp_path_factory.mktemp("derived")
    _write_dictionary(out, Transliterator(twin, []), 0.5, seed=0)
    return twin, out


def _context(tokenizer, languages=("en", "en-XD")) -> TokenContext:
    return TokenContext(
        pad_id=tokenizer.pad_token_id, mask_id=tokenizer.mask_token_id,
        cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
        special_ids=sorted(set(tokenizer.all_special_ids)), vocab_size=len(tokenizer),
        languages=list(languages), position_offset=0, max_length=32, tokenizer=tokenizer,
    )  # fmt: skip


def test_dict_mlm_collate_uses_the_dictionary_and_the_block_language(derived_files):
    twin, out = derived_files
    v = len(twin) // 2
    obj = OBJECTIVES.get("dict_mlm")(
        _context(twin), dictionary=str(out / "dictionary/train.txt"),
        vocab=str(out / "vocab.json"), mask_prob=0.5, replace_probs=(0.0, 1.0),
        random_replacement="language",
    )  # fmt: skip
    english = [t for t in range(5, v)]
    blocks = np.array([english[:30]] * 50, dtype=np.int32)
    batch = obj.collate(RawBatch("en", blocks=blocks), torch.Generator().manual_seed(0))
    labels, inputs = batch["labels"], batch["input_ids"]
    selected = labels != IGNORE_INDEX
    # with no 10% kept, only tokens without a dictionary entry keep their label (App. G.4)
    shown = selected & (inputs == labels)
    known = labels.clamp(min=0)
    no_entry = obj.offsets[known + 1] == obj.offsets[known]
    assert shown.any() and no_entry[shown].all()
    changed = inputs[selected & ~shown]
    # translations are twins (t + V); every other replacement is an English id
    twins = changed >= v
    assert twins.any() and (changed[twins] - v == labels[selected & ~shown][twins]).all()
    assert ((changed[~twins] >= 5) & (changed[~twins] < v)).all()
    # the derived language's random replacements come from the derived vocabulary
    derived_blocks = blocks + v
    batch = obj.collate(RawBatch("en-XD", blocks=derived_blocks), torch.Generator())
    sel = batch["labels"] != IGNORE_INDEX
    replaced = batch["input_ids"][sel]
    translated = replaced == batch["labels"][sel] - v
    assert (replaced[~translated] >= v).all()


def _random_draws(obj, blocks, language, rows=400):
    """(labels, inputs) at the selected positions of ``rows`` collations of ``blocks``."""
    g = torch.Generator().manual_seed(0)
    labels, inputs = [], []
    for _ in range(rows):
        batch = obj.collate(RawBatch(language, blocks=blocks), g)
        selected = batch["labels"] != IGNORE_INDEX
        labels.append(batch["labels"][selected])
        inputs.append(batch["input_ids"][selected])
    return torch.cat(labels), torch.cat(inputs)


def test_dict_mlm_random_replacements_cover_the_whole_vocabulary(derived_files):
    # every selected token goes to 80/10/10 and is replaced at random: the paper's mBERT
    # masking draws any id of the vocabulary, specials, the other language and the label too
    twin, out = derived_files
    size, v = len(twin), len(twin) // 2
    obj = OBJECTIVES.get("dict_mlm")(
        _context(twin), dictionary=str(out / "dictionary/train.txt"), mask_prob=1.0,
        translate_prob=0.0, replace_probs=(0.0, 1.0),
    )  # fmt: skip
    assert obj.random_replacement == "vocabulary"
    blocks = np.array([list(range(5, 35))] * 8, dtype=np.int32)  # English ids only
    labels, draws = _random_draws(obj, blocks, "en")
    counts = torch.bincount(draws, minlength=size)
    assert draws.numel() == 400 * 8 * 30 and counts.numel() == size
    assert (counts > 0).all()  # every id, specials (0-4) and twins (>= v) included
    assert counts[: len(twin.all_special_ids)].sum() > 0 and counts[v:].sum() > 0
    assert (draws == labels).any()
    # uniform: each of the V ids about N / V times (N / V = 96000 / V, a few hundred here)
    expected = draws.numel() / size
    assert ((counts - expected).abs() < 5 * expected**0.5).all()


def test_dict_mlm_random_replacement_language_keeps_the_earlier_rule(derived_files):
    from crossalign.data.derive.derivation import read_vocab

    twin, out = derived_files
    v = len(twin) // 2
    vocab = read_vocab(out / "vocab.json", twin)
    obj = OBJECTIVES.get("dict_mlm")(
        _context(twin), dictionary=str(out / "dictionary/train.txt"), mask_prob=1.0,
        translate_prob=0.0, replace_probs=(0.0, 1.0), vocab=str(out / "vocab.json"),
        random_replacement="language",
    )  # fmt: skip
    for language, shift in (("en", 0), ("en-XD", v)):
        blocks = np.array([list(range(5 + shift, 35 + shift))] * 8, dtype=np.int32)
        labels, draws = _random_draws(obj, blocks, language, rows=100)
        assert not (draws == labels).any()  # never the label
        assert set(draws.tolist()) == set(vocab[language])  # exactly the block's language
    # without vocab: every non-special id, never the label
    obj = OBJECTIVES.get("dict_mlm")(
        _context(twin), dictionary=str(out / "dictionary/train.txt"), mask_prob=1.0,
        translate_prob=0.0, replace_probs=(0.0, 1.0), random_replacement="language",
    )  # fmt: skip
    labels, draws = _random_draws(obj, np.array([list(range(5, 35))] * 8, dtype=np.int32), "en")
    assert not (draws == labels).any()
    assert set(draws.tolist()) == set(range(len(twin))) - set(twin.all_special_ids)


def test_dict_mlm_random_replacement_options_are_checked(derived_files):
    twin, out = derived_files
    dictionary = str(out / "dictionary/train.txt")
    with pytest.raises(CrossalignError, match="vocab is read only with random_replacement"):
        OBJECTIVES.get("dict_mlm")(_context(twin), dictionary=dictionary,
                                   vocab=str(out / "vocab.json"))  # fmt: skip
    with pytest.raises(CrossalignError, match="random_replacement 'langauge' is unknown"):
        OBJECTIVES.get("dict_mlm")(
            _context(twin), dictionary=dictionary, random_replacement="langauge"
        )


def test_dict_mlm_needs_a_dictionary(derived_files):
    twin, out = derived_files
    with pytest.raises(CrossalignError, match="needs option 'dictionary'"):
        OBJECTIVES.get("dict_mlm")(_context(twin))
    with pytest.raises(CrossalignError, match="no_translation 'always' is unknown"):
        OBJECTIVES.get("dict_mlm")(
            _context(twin), dictionary=str(out / "dictionary/train.txt"), no_translation="always"
        )


def test_alignment_loss_on_hand_made_embeddings():
    emb = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, 0.0]])
    src, tgt = torch.tensor([0, 0, 1]), torch.tensor([3, 2, 2])
    cos = dictionary_cosines(emb, torch.stack([src, tgt]))
    assert torch.allclose(cos, torch.tensor([1.0, 1 / math.sqrt(2), 1 / math.sqrt(2)]))
    expected = -10.0 * (1.0 + 2 / math.sqrt(2)) / 3
    assert alignment_loss(cos, 10.0).item() == pytest.approx(expected)


def test_alignment_loss_moves_only_its_pairs_rows_and_only_rotates_them():
    """Why ALIGN-MLM alone cannot align held-out pairs: L_align's gradient is exactly zero on
    every embedding row outside its dictionary, and on a row inside it is orthogonal to the
    row (d cos(a, b) / da is perpendicular to a), so it turns rows without changing their norms
    to first order. Any alignment of held-out pairs comes from the masked-LM loss."""
    torch.manual_seed(0)
    emb = torch.randn(8, 5, requires_grad=True)
    pairs = torch.tensor([[0, 1], [4, 5]])  # (0, 4) and (1, 5); rows 2, 3, 6, 7 held out
    alignment_loss(dictionary_cosines(emb, pairs), 10.0).backward()
    grad = emb.grad
    assert torch.equal(grad[[2, 3, 6, 7]], torch.zeros(4, 5))
    assert grad[[0, 1, 4, 5]].abs().sum(1).min() > 0
    radial = (grad * emb.detach()).sum(1)
    assert torch.allclose(radial, torch.zeros(8), atol=1e-6)


def test_align_mlm_loss_adds_the_aux_term_and_reports_lm_loss(derived_files):
    twin, out = derived_files
    ctx = _context(twin)
    obj = OBJECTIVES.get("align_mlm")(ctx, dictionary=str(out / "dictionary/train.txt"), alpha=10)
    mlm = OBJECTIVES.get("mlm")(ctx)
    assert "dict_pairs" in dict(obj.named_buffers()) and "dict_pairs" not in obj.state_dict()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(twin), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
    )  # fmt: skip
    model = BertForMaskedLM(config).eval()  # no dropout: both passes compute the same
    blocks = np.random.default_rng(0).integers(5, len(twin) // 2, (4, 16)).astype(np.int32)
    raw = RawBatch("en", blocks=blocks)
    batch = obj.collate(raw, torch.Generator().manual_seed(3))
    assert torch.equal(
        batch["input_ids"], mlm.collate(raw, torch.Generator().manual_seed(3))["input_ids"]
    )
    loss, n, metrics = obj.loss(batch, obj(model, batch))
    lm, n_mlm, _ = mlm.loss(batch, mlm(model, batch))
    emb = model.get_input_embeddings().weight
    src, tgt = obj.dict_pairs
    cos = torch.nn.functional.cosine_similarity(emb[src], emb[tgt], dim=-1)
    assert metrics["lm_loss"].item() == pytest.approx(lm.item(), rel=1e-6)
    assert metrics["align_loss"].item() == pytest.approx(-10 * cos.mean().item(), rel=1e-5)
    assert loss.item() == pytest.approx(lm.item() - 10 * cos.mean().item(), rel=1e-5)
    assert n == n_mlm
    # a gradient step on the total loss pulls the dictionary pairs together
    loss.backward()
    with torch.no_grad():
        emb -= 0.5 * emb.grad
    after = torch.nn.functional.cosine_similarity(emb[src], emb[tgt], dim=-1)
    assert after.mean() > cos.mean() + 0.05


@pytest.mark.parametrize("name", ["align_mlm", "dict_mlm"])
def test_dictionary_objectives_train_one_sentence_per_row_packed_as_padded(derived_files, name):
    """``line_by_line`` (and ``packing``) as ``mlm`` has them: one sentence per row, the same
    loss, metrics and gradients packed as padded (the alignment term included)."""
    from .test_packing import assert_packs_as_padded

    twin, out = derived_files
    make = OBJECTIVES.get(name)
    ctx = _context(twin)
    dictionary = str(out / "dictionary/train.txt")
    padded = make(ctx, dictionary=dictionary, line_by_line=True)
    packed = make(ctx, dictionary=dictionary, line_by_line=True, packing=True)
    assert padded.data == packed.data == "sentences"
    assert make(ctx, dictionary=dictionary).data == "mono"
    rng = np.random.default_rng(2)
    v = len(twin) // 2
    sentences = [rng.integers(5, v, n) for n in (3, 9, 2, 12, 5, 4, 7)]
    raw = RawBatch(source="en", sentences=sentences)
    batch = padded.collate(raw, torch.Generator().manual_seed(0))
    assert (batch["input_ids"][:, 0] == twin.cls_token_id).all()
    assert_packs_as_padded(padded, packed, raw, vocab=len(twin))
    derived = RawBatch("en-XD", sentences=[s + v for s in sentences])
    assert_packs_as_padded(padded, packed, derived, vocab=len(twin))
    with pytest.raises(CrossalignError, match=f"{name}: packing: true .* needs line_by_line"):
        make(ctx, dictionary=dictionary, packing=True)
