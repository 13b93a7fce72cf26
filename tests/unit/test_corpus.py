import json

import pytest

import crossalign.data.corpora.card as card_module
from crossalign.data.corpora.card import (
    CorpusBuild,
    PairSet,
    assign_splits,
    one_line,
    write_dictionaries,
    write_parallel,
)
from crossalign.data.corpora.files import resolve_corpus
from crossalign.data.readers import read_dictionary, read_mono, read_parallel
from crossalign.errors import CrossalignError

SOURCES = [{"package": "pkg", "version": "1.0", "licence": "public-domain"}]


def pairs(n: int, lang: str) -> list[tuple[str, str]]:
    return [(f"sentence {i}", f"{lang} sentence {i}") for i in range(n)]


def build(out, sets, seed=0, n_valid=5, n_test=5):
    return write_parallel(
        out,
        sets,
        CorpusBuild(
            builder="test",
            sources=SOURCES,
            filters=["hand-made"],
            seed=seed,
            n_valid=n_valid,
            n_test=n_test,
            command="crossalign data test",
        ),
    )


@pytest.fixture
def corpus(tmp_path):
    """A built corpus with pairs en-de (60) and en-zh-CN (40)."""
    out = tmp_path / "corpus"
    tiny_corpus(out)
    return out


def tiny_corpus(out):
    return build(
        out, [PairSet("en", "de", pairs(60, "de")), PairSet("en", "zh-CN", pairs(40, "zh"))]
    )


def test_split_is_deterministic_disjoint_and_capped():
    keys = [f"k{i}" for i in range(100)]
    first = assign_splits({"en-de": keys}, n_valid=5, n_test=7, seed=3)
    assert first == assign_splits({"en-de": list(reversed(keys))}, n_valid=5, n_test=7, seed=3)
    assert first != assign_splits({"en-de": keys}, n_valid=5, n_test=7, seed=4)
    assert set(first) == set(keys)
    counts = {name: list(first.values()).count(name) for name in ("train", "valid", "test")}
    assert counts == {"train": 88, "valid": 5, "test": 7}
    capped = assign_splits({"en-de": keys}, n_valid=50, n_test=50, seed=0)
    assert list(capped.values()).count("test") == 10
    assert list(capped.values()).count("valid") == 10


def test_split_shared_keys_fill_every_pair():
    big = [f"k{i}" for i in range(1000)]
    small = big[::10]  # every key of the small pair is also in the big one
    split = assign_splits({"en-de": big, "en-hi": small}, n_valid=5, n_test=8, seed=0)
    for keys in (big, small):
        values = [split[k] for k in keys]
        assert values.count("test") >= 8 and values.count("valid") >= 5
    assert split == assign_splits({"en-hi": small, "en-de": big}, n_valid=5, n_test=8, seed=0)


def test_shared_source_segments_have_one_split(tmp_path):
    out = tmp_path / "corpus"
    build(out, [PairSet("en", "de", pairs(300, "de")), PairSet("en", "fr", pairs(200, "fr"))])
    english = {
        (name, split): set(read_mono([out / name / f"{split}.en"]))
        for name in ("en-de", "en-fr")
        for split in ("train", "valid", "test")
    }
    for split in ("valid", "test"):
        assert not english[("en-de", split)] & english[("en-fr", "train")]
        assert not english[("en-fr", split)] & english[("en-de", "train")]


def test_one_line():
    assert one_line(" a\tb\n c \u2028d ") == "a b c d"


def test_write_parallel_layout_and_card(tmp_path):
    out = tmp_path / "corpus"
    noisy = [
        *pairs(60, "de"),
        ("sentence 1", "de sentence 1"),
        ("with\ttab", "mit\nzeile"),
        ("", "x"),
    ]
    card = build(out, [PairSet("en", "de", noisy, ["pkg"])])
    assert card == json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert card["builder"] == "test" and card["format"] == "parallel"
    assert card["sources"] == SOURCES and card["seed"] == 0
    assert card["languages"] == ["de", "en"]
    assert card["command"] == "crossalign data test"
    assert card["filters"] == ["hand-made", "exact duplicate pairs dropped"]
    counts = card["pairs"]["en-de"]
    assert counts["src"] == "en" and counts["tgt"] == "de" and counts["sources"] == ["pkg"]
    assert (counts["train"], counts["valid"], counts["test"]) == (51, 5, 5)
    seen = []
    for split in ("train", "valid", "test"):
        got = read_parallel([out / "en-de" / f"{split}.en", out / "en-de" / f"{split}.de"])
        assert len(got) == counts[split]
        seen += got
    assert ("with tab", "mit zeile") in seen
    assert len(seen) == len(set(seen)) == 61


def test_same_seed_same_files(tmp_path):
    sets = [PairSet("en", "de", pairs(200, "de"))]
    build(tmp_path / "a", sets, seed=7)
    build(tmp_path / "b", sets, seed=7)
    build(tmp_path / "c", sets, seed=8)
    for name in ("train.en", "valid.de", "test.en"):
        a = (tmp_path / "a" / "en-de" / name).read_bytes()
        assert a == (tmp_path / "b" / "en-de" / name).read_bytes()
        assert a != (tmp_path / "c" / "en-de" / name).read_bytes()
    assert (tmp_path / "a/card.json").read_bytes() == (tmp_path / "b/card.json").read_bytes()


def test_dictionary_split_by_source_word(tmp_path):
    words = [(f"w{i}", f"t{i}{j}") for i in range(100) for j in range(3)]
    card = write_dictionaries(
        tmp_path / "dict",
        [PairSet("en", "de", words)],
        CorpusBuild(
            builder="test",
            sources=SOURCES,
            filters=[],
            seed=0,
            n_valid=5,
            n_test=15,
            command="",
        ),
    )
    pair_dir = tmp_path / "dict" / "en-de"
    by_split = {s: read_dictionary(pair_dir / f"{s}.txt") for s in ("train", "valid", "test")}
    sources = {s: {w for w, _ in p} for s, p in by_split.items()}
    assert (len(sources["test"]), len(sources["valid"])) == (10, 5)  # test capped at 10%
    assert not sources["train"] & sources["test"] and not sources["valid"] & sources["test"]
    assert len(by_split["test"]) == 30
    assert sorted(read_dictionary(pair_dir / "full.txt")) == sorted(words)
    assert card["format"] == "dictionary" and card["pairs"]["en-de"]["full"] == 300
    assert card["pairs"]["en-de"]["test_source_words"] == 10


def test_failed_build_keeps_previous_output(tmp_path, monkeypatch):
    out = tmp_path / "corpus"
    tiny_corpus(out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(card_module, "write_json_atomic", fail)
    with pytest.raises(OSError, match="disk full"):
        build(out, [PairSet("en", "fr", pairs(50, "fr"))])
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]  # no temp dir left


def test_resolve_corpus(corpus):
    got = resolve_corpus(corpus)
    assert set(got) == {"mono", "parallel", "valid_mono", "valid_parallel"}
    assert got["mono"]["en"] == [str(corpus / "en-de/train.en"), str(corpus / "en-zh-CN/train.en")]
    assert got["mono"]["zh-CN"] == [str(corpus / "en-zh-CN/train.zh-CN")]
    assert got["parallel"]["en-zh-CN"] == [
        str(corpus / "en-zh-CN/train.en"),
        str(corpus / "en-zh-CN/train.zh-CN"),
    ]
    assert set(got["valid_parallel"]) == {"en-de", "en-zh-CN"}
    assert got["valid_mono"]["de"] == [str(corpus / "en-de/valid.de")]
    # the English side is shared: read_mono drops the repeated lines
    english = read_mono(got["mono"]["en"])
    assert len(english) == len(set(english)) < 51 + 32


def test_resolve_corpus_languages(corpus):
    got = resolve_corpus(corpus, ["en", "de"])
    assert set(got["parallel"]) == {"en-de"} and set(got["mono"]) == {"en", "de"}
    assert len(got["mono"]["en"]) == 2  # English of every pair, even en-zh-CN
    only_de = resolve_corpus(corpus, ["de"])
    assert only_de["parallel"] == {} and set(only_de["mono"]) == {"de"}


def test_resolve_corpus_errors(tmp_path, corpus):
    with pytest.raises(CrossalignError, match="is not a built corpus \\(no card.json\\)"):
        resolve_corpus(tmp_path)
    with pytest.raises(CrossalignError, match="has no language 'fr'; it has: de, en, zh-CN"):
        resolve_corpus(corpus, ["en", "fr"])
    with pytest.raises(CrossalignError, match="unknown language code 'xx'"):
        resolve_corpus(corpus, ["xx"])
    (corpus / "en-de" / "valid.de").unlink()
    with pytest.raises(CrossalignError, match="valid.de is missing"):
        resolve_corpus(corpus)


def test_resolve_corpus_rejects_dictionary(tmp_path):
    write_dictionaries(
        tmp_path / "dict",
        [PairSet("en", "de", [("house", "haus")] * 2)],
        CorpusBuild(
            builder="t",
            sources=[],
            filters=[],
            seed=0,
            n_valid=1,
            n_test=1,
            command="",
        ),
    )
    with pytest.raises(CrossalignError, match="is a dictionary corpus, not parallel text"):
        resolve_corpus(tmp_path / "dict")


def test_a_text_directory_is_pointed_at_its_files(tmp_path):
    text = tmp_path / "commentary"
    text.mkdir()
    (text / "card.json").write_text(json.dumps({"format": "text", "files": {"en": "en.txt"}}))
    with pytest.raises(CrossalignError, match=f"not a corpus of pairs .*; pass {text}/en.txt$"):
        resolve_corpus(text)
