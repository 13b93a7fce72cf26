"""BLI as MUSE reports it: precision at 1, 5, 10 by nn and csls_knn_10 against a literal
transcription of MUSE's ``get_word_translation_accuracy`` and a constructed case with a known
answer; MUSE's dictionary file names; the candidate set without a full dictionary."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from crossalign.errors import CrossalignError
from crossalign.evals.bli import (
    BLISet,
    bli_scores,
    build_bli_set,
    candidate_words,
    require_vocabulary,
    vocabulary_missing,
)
from crossalign.evals.options import BLIOptions
from crossalign.lexicon.dictionaries import dictionary_files
from crossalign.lexicon.embed import TokenVectors

from .test_bli_rsim import make_tokenizer

KEYS = [f"precision_at_{k}-{m}" for m in ("nn", "csls_knn_10") for k in (1, 5, 10)]


def muse_word_translation_accuracy(
    word2id1: dict[str, int],
    emb1: torch.Tensor,
    word2id2: dict[str, int],
    emb2: torch.Tensor,
    method: str,
    pairs: list[tuple[str, str]],
) -> dict[str, float]:
    """MUSE's ``load_dictionary`` + ``get_word_translation_accuracy`` (src/evaluation/
    word_translation.py) with ``get_nn_avg_dist``'s torch branch, transcribed line for line:
    one row per dictionary pair, matches merged per source id, precision in percent."""
    kept = [(w1, w2) for w1, w2 in pairs if w1 in word2id1 and w2 in word2id2]
    kept = sorted(kept, key=lambda x: word2id1[x[0]])
    dico = torch.LongTensor(len(kept), 2)
    for i, (w1, w2) in enumerate(kept):
        dico[i, 0] = word2id1[w1]
        dico[i, 1] = word2id2[w2]
    emb1 = emb1 / emb1.norm(2, 1, keepdim=True).expand_as(emb1)
    emb2 = emb2 / emb2.norm(2, 1, keepdim=True).expand_as(emb2)

    def get_nn_avg_dist(emb, query, knn):
        distances = query.mm(emb.transpose(0, 1).contiguous())
        best_distances, _ = distances.topk(knn, dim=1, largest=True, sorted=True)
        return best_distances.mean(1).numpy()

    if method == "nn":
        query = emb1[dico[:, 0]]
        scores = query.mm(emb2.transpose(0, 1))
    else:
        knn = int(method[len("csls_knn_") :])
        average_dist1 = torch.from_numpy(get_nn_avg_dist(emb2, emb1, knn)).type_as(emb1)
        average_dist2 = torch.from_numpy(get_nn_avg_dist(emb1, emb2, knn)).type_as(emb2)
        query = emb1[dico[:, 0]]
        scores = query.mm(emb2.transpose(0, 1))
        scores.mul_(2)
        scores.sub_(average_dist1[dico[:, 0]][:, None])
        scores.sub_(average_dist2[None, :])
    results = {}
    top_matches = scores.topk(10, 1, True)[1]
    for k in [1, 5, 10]:
        top_k_matches = top_matches[:, :k]
        _matching = (top_k_matches == dico[:, 1][:, None].expand_as(top_k_matches)).sum(1).numpy()
        matching: dict[int, int] = {}
        for i, src_id in enumerate(dico[:, 0].numpy()):
            matching[src_id] = min(matching.get(src_id, 0) + _matching[i], 1)
        results[f"precision_at_{k}-{method}"] = 100 * np.mean(list(matching.values()))
    return results


def muse_both(emb1, emb2, pairs) -> dict[str, float]:
    """MUSE's two methods on vocabularies ``s<i>`` (rows of emb1) and ``t<j>`` (rows of emb2)."""
    word2id1 = {f"s{i}": i for i in range(len(emb1))}
    word2id2 = {f"t{j}": j for j in range(len(emb2))}
    out = {}
    for method in ("nn", "csls_knn_10"):
        out.update(muse_word_translation_accuracy(word2id1, emb1, word2id2, emb2, method, pairs))
    return out


def bli_set(emb1, emb2, pairs, evaluated) -> BLISet:
    """The evaluation set of ``pairs`` over source vocabulary ``emb1``, candidates ``emb2``."""
    gold = [[int(t[1:]) for s, t in pairs if s == f"s{i}"] for i in evaluated]
    return BLISet(
        [f"s{i}" for i in evaluated],
        [f"t{j}" for j in range(len(emb2))],
        emb1[evaluated],
        emb2,
        gold,
        emb1,
    )


def hub_case() -> tuple[torch.Tensor, torch.Tensor, list[tuple[str, str]]]:
    """12 one-hot sources; targets whose cosines with the sources are set by hand: t0..t5 meet
    their source at 0.25, t6..t10 at 0.9, and the hub t11 meets every source at 1/√12 ≈ 0.289.
    s0 has two gold translations, t0 and the hub; s11 translates to the hub."""
    d = 24
    src = torch.eye(12, d)
    tgt = torch.zeros(12, d)
    for j in range(11):
        c = 0.25 if j < 6 else 0.9
        tgt[j, j], tgt[j, 12 + j] = c, (1 - c * c) ** 0.5
    tgt[11, :12] = 12**-0.5
    pairs = [(f"s{i}", f"t{i}") for i in range(12)] + [("s0", "t11")]
    return src, tgt, pairs


def test_hub_case_known_answer_and_muse_transcription():
    src, tgt, pairs = hub_case()
    # nn: s1..s5 prefer the hub (0.289 > 0.25) but rank their gold second; s0 accepts the hub.
    # CSLS: r_S(hub) = 0.289 and r_S(t_j) = cos/10, so every gold wins: 2·0.25 - 0.025 > 0.289.
    want = {
        "precision_at_1-nn": 100 * 7 / 12,
        "precision_at_5-nn": 100.0,
        "precision_at_10-nn": 100.0,
        "precision_at_1-csls_knn_10": 100.0,
        "precision_at_5-csls_knn_10": 100.0,
        "precision_at_10-csls_knn_10": 100.0,
    }
    muse = muse_both(src, tgt, pairs)
    ours = bli_scores(bli_set(src, tgt, pairs, list(range(12))))
    for key in KEYS:
        assert muse[key] == pytest.approx(want[key])
        assert ours[key] == pytest.approx(want[key])
    assert ours["words"] == 12 and ours["candidates"] == 12 and ours["source_vocabulary"] == 12


def test_random_case_equals_muse_with_a_larger_source_vocabulary():
    """CSLS's r_S(y) is taken over the whole source vocabulary, not the evaluated words; an
    evaluated word with several gold translations counts once."""
    g = torch.Generator().manual_seed(5)
    emb1 = torch.randn(70, 8, generator=g)
    noisy = emb1[:60] + 0.8 * torch.randn(60, 8, generator=g)
    emb2 = torch.cat([noisy, torch.randn(25, 8, generator=g)])
    evaluated = list(range(0, 60, 2))
    pairs = [(f"s{i}", f"t{i}") for i in evaluated]
    pairs += [(f"s{i}", f"t{(i * 7) % 85}") for i in evaluated[::3]]  # second translations
    muse = muse_both(emb1, emb2, pairs)
    ours = bli_scores(bli_set(emb1, emb2, pairs, evaluated))
    for key in KEYS:
        assert ours[key] == pytest.approx(muse[key], abs=1e-9), key
    assert 0 < muse["precision_at_1-nn"] < 100 and 0 < muse["precision_at_1-csls_knn_10"] < 100
    narrow = bli_scores(replace(bli_set(emb1, emb2, pairs, evaluated), src_vocab=None))
    assert narrow["source_vocabulary"] == len(evaluated)
    assert any(narrow[k] != muse[k] for k in KEYS[3:])  # r_S over the evaluated words differs


def test_build_bli_set_takes_the_source_vocabulary():
    words = ["cat", "dog", "sun", "moon", "tree", "katze", "hund", "sonne"]
    tok = make_tokenizer(words)
    table = torch.randn(len(tok), 6, generator=torch.Generator().manual_seed(1))
    vec = TokenVectors(table, torch.arange(len(tok)))
    test = [("cat", "katze"), ("dog", "hund")]
    bli = build_bli_set(
        tok, vec, vec, test, ["katze", "hund", "sonne"], source_words=["sun", "moon", "Cat"]
    )
    assert bli.src_words == ["cat", "dog"]
    ids = [tok.convert_tokens_to_ids(f"▁{w}") for w in ("cat", "dog", "sun", "moon")]
    assert torch.equal(bli.src_vocab, table[ids])  # deduplicated after normalising
    assert torch.equal(bli.src, table[ids[:2]])


def write(path: Path, pairs: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{s} {t}\n" for s, t in pairs), encoding="utf-8")
    return path


@pytest.fixture
def muse_folder(tmp_path) -> Path:
    folder = tmp_path / "dictionaries"
    write(folder / "en-de.0-5000.txt", [("house", "haus")])
    write(folder / "en-de.5000-6500.txt", [("cat", "katze")])
    write(folder / "en-de.txt", [("house", "haus"), ("cat", "katze"), ("dog", "hund")])
    write(folder / "de-en.5000-6500.txt", [("katze", "cat")])
    return folder


def test_muse_file_names(muse_folder):
    split = dictionary_files(muse_folder / "en-de.5000-6500.txt")
    assert (split.test.name, split.full.name, split.pair) == (
        "en-de.5000-6500.txt",
        "en-de.txt",
        ("en", "de"),
    )
    folder = dictionary_files(muse_folder, ("de", "en"))
    assert folder.test.name == "de-en.5000-6500.txt" and folder.full is None
    full = dictionary_files(muse_folder / "en-de.txt")
    assert full.test == full.full == muse_folder / "en-de.txt"
    with pytest.raises(CrossalignError, match="--src and --tgt"):
        dictionary_files(muse_folder)  # two pairs: which one?
    with pytest.raises(CrossalignError, match="no fr-de.5000-6500.txt"):
        dictionary_files(muse_folder, ("fr", "de"))


def test_crossalign_folder_and_file(tmp_path):
    folder = tmp_path / "en-de"
    write(folder / "test.txt", [("cat", "katze")])
    write(folder / "full.txt", [("cat", "katze"), ("dog", "hund")])
    files = dictionary_files(folder)
    assert (files.test.name, files.full.name, files.pair) == ("test.txt", "full.txt", ("en", "de"))
    assert dictionary_files(folder / "test.txt") == files
    with pytest.raises(CrossalignError, match="neither test.txt"):
        dictionary_files(tmp_path)


def test_muse_split_gets_the_whole_target_vocabulary(muse_folder):
    """A MUSE test split's candidates are the targets of en-de.txt, not its own few."""
    assert candidate_words(muse_folder / "en-de.5000-6500.txt") == ["haus", "katze", "hund"]


def test_no_full_dictionary_refuses_bli_unless_candidates_are_given(muse_folder, tmp_path):
    """Without en-de.txt the candidates would be the test file's own targets: precision on
    them is refused (RSIM, which does not retrieve, may use the set)."""
    lonely = dictionary_files(muse_folder / "de-en.5000-6500.txt")
    assert candidate_words(lonely) == ["cat"]
    assert "--candidates FILE" in vocabulary_missing(lonely)
    extra = write(tmp_path / "words.txt", [("hund", "dog")])
    assert vocabulary_missing(lonely, [extra]) is None
    assert candidate_words(lonely, [extra]) == ["cat", "dog"]
    src, tgt, pairs = hub_case()
    bli = replace(bli_set(src, tgt, pairs, [0, 1]), partial_candidates=vocabulary_missing(lonely))
    with pytest.raises(CrossalignError, match="too few candidates for BLI"):
        bli_scores(bli)
    with pytest.raises(CrossalignError, match="no full dictionary beside"):
        require_vocabulary(BLIOptions(dict=str(lonely.test)))


def test_languages_and_gold_from_a_muse_folder(muse_folder):
    from crossalign.evals.bli import dictionary_pair, gold_pairs, gold_source_words

    opts = BLIOptions(dict=str(muse_folder), src="en", tgt="de")
    assert dictionary_pair(opts) == ("en", "de")
    assert gold_pairs(opts) == [("cat", "katze")]
    assert gold_source_words(opts) == ["house", "cat", "dog"]
    reverse = BLIOptions(dict=str(muse_folder / "en-de.5000-6500.txt"), reverse=True)
    assert dictionary_pair(reverse) == ("de", "en") and gold_pairs(reverse) == [("katze", "cat")]
