"""Co-occurrence counting: hand-computed counts, a naive double loop as oracle, merges."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from crossalign.cooc.build import count_cooccurrences
from crossalign.cooc.counting import CountRuns, count_pairs, merge_counts, upper_csr
from crossalign.errors import CrossalignError


def naive_cooc(lines_by_lang: dict[str, list[list[int]]], window: int, reference: str) -> dict:
    """X by the definition: every ordered position pair (t, k) of a line with
    1 <= |t - k| <= window adds c_lang / (|t - k| + 1) to X[w_t, w_k]; a language's exact
    duplicate lines are read once."""
    lines_by_lang = {
        lang: [list(t) for t in dict.fromkeys(map(tuple, lines))]
        for lang, lines in lines_by_lang.items()
    }
    tokens = {lang: sum(map(len, lines)) for lang, lines in lines_by_lang.items()}
    x: dict = defaultdict(float)
    for lang, lines in lines_by_lang.items():
        c = tokens[reference] / tokens[lang]
        for line in lines:
            for t in range(len(line)):
                for k in range(len(line)):
                    if 1 <= abs(t - k) <= window:
                        x[line[t], line[k]] += c / (abs(t - k) + 1)
    return dict(x)


def dense(result, vocab_size: int) -> np.ndarray:
    """The full symmetric X from the stored upper triangle."""
    x = np.zeros((vocab_size, vocab_size))
    rows = np.repeat(np.arange(vocab_size), np.diff(result.indptr))
    x[rows, result.indices] = result.data
    return x + np.triu(x, 1).T


def as_dense(d: dict, vocab_size: int) -> np.ndarray:
    x = np.zeros((vocab_size, vocab_size))
    for (a, b), v in d.items():
        x[a, b] = v
    return x


def write_ids(path: Path, lines: list[list[int]]) -> str:
    path.write_text("".join(" ".join(map(str, line)) + "\n" for line in lines))
    return str(path)


def test_hand_computed_window_two(tmp_path):
    # one line "1 2 3": (1,2) and (2,3) at distance 1 weigh 1/2, (1,3) at distance 2 weighs 1/3
    f = write_ids(tmp_path / "en.txt", [[1, 2, 3]])
    r = count_cooccurrences([("en", [f])], vocab_size=5, window=2)
    x = dense(r, 5)
    assert x[1, 2] == x[2, 1] == pytest.approx(1 / 2)
    assert x[2, 3] == x[3, 2] == pytest.approx(1 / 2)
    assert x[1, 3] == x[3, 1] == pytest.approx(1 / 3)
    assert x[1, 1] == x[2, 2] == x[3, 3] == 0.0  # a position is never its own neighbour
    assert x.sum() == pytest.approx(2 * (1 / 2 + 1 / 2 + 1 / 3))
    assert r.tokens == {"en": 3} and r.lines == {"en": 1}


def test_window_edges_and_line_breaks(tmp_path):
    f = write_ids(tmp_path / "en.txt", [[1, 2, 3], [4, 1]])
    x1 = dense(count_cooccurrences([("en", [f])], 6, window=1), 6)
    assert x1[1, 3] == 0.0  # distance 2 is outside window 1
    assert x1[1, 2] == pytest.approx(1 / 2)
    assert x1[3, 4] == 0.0  # 3 ends line 1, 4 starts line 2: no pair across a line break
    assert x1[1, 4] == pytest.approx(1 / 2)  # within line 2
    x5 = dense(count_cooccurrences([("en", [f])], 6, window=5), 6)
    assert x5[1, 3] == pytest.approx(1 / 3)
    assert x5[3, 4] == 0.0 and x5[2, 4] == 0.0


def test_repeated_token_counts_from_both_sides(tmp_path):
    # "5 5": position 0 sees 5 at distance 1 and position 1 sees 5 at distance 1
    f = write_ids(tmp_path / "en.txt", [[5, 5], [5]])
    x = dense(count_cooccurrences([("en", [f])], 6, window=2), 6)
    assert x[5, 5] == pytest.approx(2 * (1 / 2))
    assert x.sum() == pytest.approx(1.0)


def test_language_normalisation(tmp_path):
    # en has 6 tokens, de 3: de counts are multiplied by c_de = C_en / C_de = 2
    en = write_ids(tmp_path / "en.txt", [[1, 2, 3], [3, 2, 1]])
    de = write_ids(tmp_path / "de.txt", [[7, 8, 9]])
    r = count_cooccurrences([("de", [de]), ("en", [en])], 10, window=1)
    assert r.reference == "en" and r.scales == {"de": 2.0, "en": 1.0}
    x = dense(r, 10)
    assert x[1, 2] == pytest.approx(2 * 1 / 2)  # in both en lines, scale 1
    assert x[7, 8] == pytest.approx(2.0 * 1 / 2)  # once in de, scale 2
    # another reference language: everything scaled to de's 3 tokens
    r2 = count_cooccurrences([("de", [de]), ("en", [en])], 10, window=1, reference="de")
    assert r2.scales == {"de": 1.0, "en": 0.5}
    assert dense(r2, 10)[1, 2] == pytest.approx(0.5)
    # without English, the language with most tokens is the reference
    r3 = count_cooccurrences([("de", [de]), ("fr", [en])], 10, window=1)
    assert r3.reference == "fr"


def test_shared_token_sums_over_languages(tmp_path):
    en = write_ids(tmp_path / "en.txt", [[1, 2], [3, 4]])
    de = write_ids(tmp_path / "de.txt", [[1, 2]])
    x = dense(count_cooccurrences([("de", [de]), ("en", [en])], 5, window=1), 5)
    assert x[1, 2] == pytest.approx(1 / 2 + 2 * 1 / 2)  # en once (c=1) + de once (c=4/2)


def test_duplicate_lines_of_a_language_are_read_once(tmp_path):
    a = write_ids(tmp_path / "a.txt", [[1, 2], [3, 4]])
    b = write_ids(tmp_path / "b.txt", [[1, 2], [2, 3]])
    r = count_cooccurrences([("en", [a, b])], 5, window=1)
    assert r.lines == {"en": 3} and r.tokens == {"en": 6}
    assert dense(r, 5)[1, 2] == pytest.approx(1 / 2)


@pytest.mark.parametrize("window", [1, 2, 3, 7])
def test_random_corpus_equals_naive_loop(tmp_path, window):
    rng = np.random.default_rng(window)
    corpus = {
        lang: [rng.integers(0, 30, rng.integers(1, 12)).tolist() for _ in range(80)]
        for lang in ("de", "en", "fr")
    }
    files = [(lang, [write_ids(tmp_path / f"{lang}.txt", lines)]) for lang, lines in corpus.items()]
    # small chunks: many runs to merge
    r = count_cooccurrences(files, 30, window=window, chunk_bytes=64)
    expected = as_dense(naive_cooc(corpus, window, "en"), 30)
    np.testing.assert_allclose(dense(r, 30), expected, rtol=1e-6, atol=1e-7)
    assert np.all(np.diff(r.indptr) >= 0)
    for row in range(30):  # columns sorted, upper triangle only
        cols = r.indices[r.indptr[row] : r.indptr[row + 1]]
        assert np.all(np.diff(cols) > 0) and np.all(cols >= row)


def test_parallel_shards_equal_one_process(tmp_path):
    rng = np.random.default_rng(0)
    corpus = {lang: [rng.integers(0, 50, 9).tolist() for _ in range(300)] for lang in ("en", "es")}
    files = [(lang, [write_ids(tmp_path / f"{lang}.txt", lines)]) for lang, lines in corpus.items()]
    one = count_cooccurrences(files, 50, window=3, chunk_bytes=200)
    two = count_cooccurrences(files, 50, window=3, chunk_bytes=200, num_proc=2)
    np.testing.assert_array_equal(one.indptr, two.indptr)
    np.testing.assert_array_equal(one.indices, two.indices)
    np.testing.assert_allclose(one.data, two.data, rtol=1e-6)
    assert one.tokens == two.tokens


def test_tokenized_text_equals_pretokenized_ids(tmp_path):
    from crossalign.config import TokenizerConfig
    from crossalign.data.tokenizer import train_tokenizer

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
    texts = {lang: (fixtures / f"{lang}.txt").read_text().splitlines() for lang in ("en", "es")}
    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=120))
    ids = {lang: tok(lines, add_special_tokens=False)["input_ids"] for lang, lines in texts.items()}
    raw = [(lang, [str(fixtures / f"{lang}.txt")]) for lang in texts]
    pre = [(lang, [write_ids(tmp_path / f"{lang}.ids", ids[lang])]) for lang in texts]
    a = count_cooccurrences(raw, len(tok), 2, tokenizer_json=tok.backend_tokenizer.to_str())
    b = count_cooccurrences(pre, len(tok), 2)
    assert a.tokens == b.tokens == {lang: sum(map(len, s)) for lang, s in ids.items()}
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data)
    np.testing.assert_allclose(dense(a, len(tok)), as_dense(naive_cooc(ids, 2, "en"), len(tok)))


def test_count_pairs_chunk_matches_loop():
    ids = np.array([3, 1, 3, 2, 0, 4, 4])
    lengths = np.array([4, 3])
    keys, values = count_pairs(ids, lengths, window=2, vocab_size=5, lang=1, n_lang=2)
    assert np.all(np.diff(keys) > 0) and np.all(keys % 2 == 1)
    expected: dict = defaultdict(float)
    start = 0
    for n in lengths:
        line = ids[start : start + n]
        for p in range(n):
            for d in (1, 2):
                if p + d < n:
                    a, b = sorted((line[p], line[p + d]))
                    expected[a * 5 + b] += 1 / (d + 1)
        start += n
    got = dict(zip((keys // 2).tolist(), values.tolist()))
    assert got == pytest.approx(dict(expected))


def test_merge_counts_and_runs_equal_a_dict():
    rng = np.random.default_rng(1)
    total: dict = defaultdict(float)
    runs = CountRuns()
    merged = (np.zeros(0, np.int64), np.zeros(0))
    for _ in range(40):
        keys = np.unique(rng.integers(0, 200, rng.integers(0, 60)))
        values = rng.random(len(keys))
        for k, v in zip(keys, values):
            total[int(k)] += v
        runs.add(keys, values)
        merged = merge_counts(merged, (keys, values))
    for keys, values in (runs.result(), merged):
        assert np.all(np.diff(keys) > 0)
        assert dict(zip(keys.tolist(), values.tolist())) == pytest.approx(dict(total))


def test_upper_csr_scales_languages_and_doubles_the_diagonal():
    # keys (min * V + max) * n_lang + lang, V = 3, two languages
    keys = np.array([(0 * 3 + 1) * 2 + 0, (0 * 3 + 1) * 2 + 1, (2 * 3 + 2) * 2 + 1])
    indptr, indices, data = upper_csr(keys, np.array([1.0, 1.0, 0.5]), np.array([1.0, 3.0]), 3)
    assert indptr.tolist() == [0, 1, 1, 2]
    assert indices.tolist() == [1, 2]
    assert data.tolist() == [1.0 + 3.0, 2 * 0.5 * 3.0]


def test_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 3\n4 x 5\n")
    with pytest.raises(CrossalignError, match=r"bad.txt:2: expected whitespace-separated"):
        count_cooccurrences([("en", [str(bad)])], 10, 2)
    big = tmp_path / "big.txt"
    big.write_text("1 2\n\n3 99\n")
    with pytest.raises(CrossalignError, match=r"big.txt:3: .*\[0, 10\)"):
        count_cooccurrences([("en", [str(big)])], 10, 2)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(CrossalignError, match=r"latin.txt:2: not UTF-8"):
        count_cooccurrences([("en", [str(latin)])], 10, 2, tokenizer_json=_word_tokenizer())
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(CrossalignError, match="no tokens for language"):
        count_cooccurrences([("en", [str(empty)])], 10, 2)
    with pytest.raises(CrossalignError, match="reference language 'fr'"):
        count_cooccurrences([("en", [str(big)])], 10, 2, reference="fr")
    with pytest.raises(CrossalignError, match="not found"):
        count_cooccurrences([("en", [str(tmp_path / "missing.txt")])], 10, 2)


def _word_tokenizer() -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"ok": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok.to_str()
