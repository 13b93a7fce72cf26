"""The corpus builders on the real files of the installed Debian packages, through the CLI.

Each test is skipped, naming the ``apt-get install`` to run, when its package is absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.data.corpora.bible import SWORD_ROOT, build_bible
from crossalign.data.corpora.commentary import build_commentary
from crossalign.data.corpora.freedict import DICTD_ROOT, build_freedict
from crossalign.data.corpora.libreoffice import HELP_ROOT, build_libreoffice
from crossalign.data.readers import read_dictionary, read_parallel
from crossalign.errors import CrossalignError

SPLITS = ("train", "valid", "test")


def require(path: Path, package: str) -> None:
    """Skip the test unless ``path`` (installed by ``package``) exists."""
    if not path.exists():
        pytest.skip(f"{package} not installed: apt-get install {package}")


def run_cli(*argv: str) -> None:
    assert main(["data", *argv]) == 0


def all_pairs(out: Path, name: str, src: str, tgt: str) -> dict[str, list[tuple[str, str]]]:
    pair_dir = out / name
    return {s: read_parallel([pair_dir / f"{s}.{src}", pair_dir / f"{s}.{tgt}"]) for s in SPLITS}


def raw_lines(out: Path) -> list[str]:
    return [
        line
        for path in out.rglob("*")
        if path.is_file() and path.name != "card.json"
        for line in path.read_text(encoding="utf-8").split("\n")
    ]


@pytest.fixture(scope="module")
def bible(tmp_path_factory) -> Path:
    require(SWORD_ROOT / "mods.d" / "engKJV2006eb.conf", "sword-text-kjv")
    require(SWORD_ROOT / "mods.d" / "spaRV1909eb.conf", "sword-text-sparv")
    out = tmp_path_factory.mktemp("bible") / "out"
    run_cli("bible", "--out", str(out))
    return out


def test_bible_counts_and_card(bible):
    card = json.loads((bible / "card.json").read_text(encoding="utf-8"))
    counts = card["pairs"]["en-es"]
    assert 29_000 <= sum(counts[s] for s in SPLITS) <= 31_102
    assert (counts["valid"], counts["test"]) >= (1000, 1000)
    assert [s["package"] for s in card["sources"]] == ["sword-text-kjv", "sword-text-sparv"]
    assert all(s["licence"] == "public-domain" and s["version"] for s in card["sources"])
    assert card["command"].startswith("crossalign data bible --out ")
    assert card["seed"] == 0 and card["filters"]


def test_bible_known_verses_and_clean_text(bible):
    splits = all_pairs(bible, "en-es", "en", "es")
    verses = dict(pair for pairs in splits.values() for pair in pairs)
    english = {name: {en for en, _ in pairs} for name, pairs in splits.items()}
    assert not english["train"] & english["test"] and not english["valid"] & english["test"]
    assert verses["In the beginning God created the heaven and the earth."].startswith(
        "En el principio crió Dios"
    )
    john = next(es for en, es in verses.items() if en.startswith("For God so loved the world"))
    assert john.startswith("Porque de tal manera amó Dios al mundo")
    for line in raw_lines(bible):
        assert not any(mark in line for mark in ("<", ">", "¶", "\\", "\t", "  "))


@pytest.fixture(scope="module")
def libreoffice(tmp_path_factory) -> Path:
    for lang in ("en-US", "de", "zh-CN"):
        require(HELP_ROOT / lang / "text", f"libreoffice-help-{lang.lower()}")
    out = tmp_path_factory.mktemp("libreoffice") / "out"
    run_cli("libreoffice", "--langs", "de,zh-CN", "--out", str(out))
    return out


def test_libreoffice_pairs_on_a_sample_of_pages(tmp_path):
    """The full build below on the text/shared/01 pages only (seconds instead of a minute)."""
    for lang in ("en-US", "de", "zh-CN"):
        require(HELP_ROOT / lang / "text", f"libreoffice-help-{lang.lower()}")
        pages = Path("text") / "shared" / "01"
        shutil.copytree(HELP_ROOT / lang / pages, tmp_path / "help" / lang / pages)
    out = tmp_path / "out"
    build_libreoffice(out, ["de", "zh-CN"], n_valid=50, n_test=50, root=tmp_path / "help")
    english = {}
    for lang in ("de", "zh-CN"):
        splits = all_pairs(out, f"en-{lang}", "en", lang)
        assert len(splits["train"]) >= 1000 and len(splits["valid"]) >= 50
        assert all(en != tgt for split in splits.values() for en, tgt in split)
        english.update({(lang, s): {en for en, _ in splits[s]} for s in SPLITS})
    train = english[("de", "train")] | english[("zh-CN", "train")]
    for lang in ("de", "zh-CN"):
        assert not train & (english[(lang, "valid")] | english[(lang, "test")])
    german = dict(pair for split in all_pairs(out, "en-de", "en", "de").values() for pair in split)
    assert german["Opens a local or remote file, or imports one."].startswith("Öffnet eine")
    assert not any("\t" in line or "CommandCtrl" in line for line in raw_lines(out))


@pytest.mark.slow
def test_libreoffice_pairs(libreoffice):
    card = json.loads((libreoffice / "card.json").read_text(encoding="utf-8"))
    assert list(card["pairs"]) == ["en-de", "en-zh-CN"]
    assert [s["package"] for s in card["sources"]] == [
        "libreoffice-help-en-us",
        "libreoffice-help-de",
        "libreoffice-help-zh-cn",
    ]
    assert card["sources"][0]["licence"] == "MPL-2.0"
    english = {}
    for lang, minimum in (("de", 20_000), ("zh-CN", 10_000)):
        splits = all_pairs(libreoffice, f"en-{lang}", "en", lang)
        pairs = [pair for split in splits.values() for pair in split]
        assert len(pairs) >= minimum
        assert len(splits["valid"]) >= 500 and len(splits["test"]) >= 500
        assert all(en != tgt for en, tgt in pairs)
        english.update({(lang, s): {en for en, _ in splits[s]} for s in SPLITS})
    # an English segment has one split in every pair: no held-out English is trained on
    train = english[("de", "train")] | english[("zh-CN", "train")]
    for lang in ("de", "zh-CN"):
        assert not train & (english[(lang, "valid")] | english[(lang, "test")])
    german = dict(
        pair for split in all_pairs(libreoffice, "en-de", "en", "de").values() for pair in split
    )
    assert german["Opens a local or remote file, or imports one."].startswith("Öffnet eine")
    assert not any("\t" in line or "CommandCtrl" in line for line in raw_lines(libreoffice))


@pytest.fixture(scope="module")
def freedict(tmp_path_factory) -> Path:
    for name in ("eng-fra", "eng-spa"):
        require(DICTD_ROOT / f"freedict-{name}.index", f"dict-freedict-{name}")
    out = tmp_path_factory.mktemp("freedict") / "out"
    run_cli("freedict", "eng-fra", "eng-spa", "--out", str(out))
    return out


def test_freedict_dictionaries(freedict):
    card = json.loads((freedict / "card.json").read_text(encoding="utf-8"))
    assert list(card["pairs"]) == ["en-fr", "en-es"]
    assert {s["licence"] for s in card["sources"]} == {"GPL-2+"}
    for name, known in (("en-fr", ("house", "maison")), ("en-es", ("dog", "perro"))):
        full = read_dictionary(freedict / name / "full.txt")
        assert known in full and len(full) > 5000
        words = {s: {w for w, _ in read_dictionary(freedict / name / f"{s}.txt")} for s in SPLITS}
        assert not words["train"] & words["test"] and not words["valid"] & words["test"]
        assert card["pairs"][name]["test_source_words"] == len(words["test"]) > 400
        assert all(w.isalpha() and w == w.lower() for pair in full for w in pair)
    assert ("go", "extraviarse") not in read_dictionary(freedict / "en-es" / "full.txt")


@pytest.mark.slow
def test_freedict_eng_deu(tmp_path):
    require(DICTD_ROOT / "freedict-eng-deu.index", "dict-freedict-eng-deu")
    run_cli("freedict", "eng-deu", "--out", str(tmp_path / "out"))
    full = read_dictionary(tmp_path / "out" / "en-de" / "full.txt")
    assert ("house", "haus") in full and ("dog", "hund") in full and len(full) > 200_000


def test_missing_package_is_one_line_apt_get_error(tmp_path):
    cases = [
        (lambda: build_bible(tmp_path / "o", root=tmp_path), "sword-text-kjv"),
        (
            lambda: build_libreoffice(tmp_path / "o", ["de"], root=tmp_path),
            "libreoffice-help-en-us",
        ),
        (
            lambda: build_freedict(tmp_path / "o", ["eng-deu"], root=tmp_path),
            "dict-freedict-eng-deu",
        ),
        (lambda: build_commentary(tmp_path / "o", root=tmp_path), "sword-comm-tdavid"),
    ]
    for build, package in cases:
        with pytest.raises(CrossalignError, match=f"run: sudo apt-get install {package}$") as err:
            build()
        assert "\n" not in str(err.value)
    assert not (tmp_path / "o").exists()


def test_cli_reports_missing_help_language(tmp_path, capsys):
    if (HELP_ROOT / "ja").exists():
        pytest.skip("libreoffice-help-ja is installed, so it is not missing")
    require(HELP_ROOT / "en-US" / "text", "libreoffice-help-en-us")
    assert main(["data", "libreoffice", "--langs", "ja", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("crossalign: error: ") and "apt-get install libreoffice-help-ja" in err


def test_cli_rejects_bad_dictionary_names(tmp_path, capsys):
    assert main(["data", "freedict", "eng-xyz", "--out", str(tmp_path / "o")]) == 2
    assert "unknown ISO 639-3 language code 'xyz'" in capsys.readouterr().err
    assert main(["data", "freedict", "english-german", "--out", str(tmp_path / "o")]) == 2
    assert "expected an ISO 639-3 pair such as eng-deu" in capsys.readouterr().err


def test_commentary_paragraphs_and_card(tmp_path):
    require(SWORD_ROOT / "mods.d" / "tdavid.conf", "sword-comm-tdavid")
    out = tmp_path / "out"
    run_cli("commentary", "--out", str(out))
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    lines = (out / "en.txt").read_text(encoding="utf-8").splitlines()
    assert card["lines"] == len(lines) == len(set(lines)) > 20_000
    assert card["words"] == sum(len(x.split()) for x in lines) > 2_000_000
    assert [s["package"] for s in card["sources"]] == ["sword-comm-tdavid"]
    assert card["command"].startswith("crossalign data commentary --modules tdavid")
    # Psalm 1's exposition opens the text; each line one clean paragraph of >= 5 words
    assert lines[0].startswith("This Psalm may be regarded as THE PREFACE PSALM")
    assert any(x.startswith("There is no title to this Psalm, neither") for x in lines)
    assert all(len(x.split()) >= 5 and x == " ".join(x.split()) for x in lines)
    assert not any("<" in x or "\\" in x for x in lines[:2000])
    with pytest.raises(
        CrossalignError, match="unknown commentary 'nope'; choose from tdavid, mhcc"
    ):
        build_commentary(tmp_path / "o2", ["nope"])


def test_commentary_reads_mhcc_whose_conf_names_the_wrong_driver(tmp_path):
    # mhcc.conf says zCom4, its index has zCom's 10-byte records: read as zCom4, Genesis 1's
    # entries came back as other chapters' text
    require(SWORD_ROOT / "mods.d" / "mhcc.conf", "sword-comm-mhcc")
    card = build_commentary(tmp_path / "out", ["mhcc"])
    lines = (tmp_path / "out" / "en.txt").read_text(encoding="utf-8").splitlines()
    assert 600_000 < card["words"] < 800_000 and card["modules"]["MHCC"]["paragraphs"] == len(lines)
    genesis = [x for x in lines if x.startswith("God said, Let there be light; he willed it")]
    assert len(genesis) == 1 and "plague" not in genesis[0] and len(genesis[0].split()) < 200
    assert not any(x.endswith("(1-4)") or "<" in x for x in lines)  # no outline, no markup
