"""AER by hand, the Pharaoh and gold readers, and the real gold test sets (when present)."""

from pathlib import Path

import pytest

from crossalign.errors import CrossalignError
from crossalign.evals.aer import aer_scores, read_pharaoh
from crossalign.evals.gold import GoldAlignments, read_gold_links, read_testset

GOLD = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "word-alignment-gold"
needs_gold = pytest.mark.skipif(
    not GOLD.is_dir(), reason=f"gold word-alignment test sets not found at {GOLD}"
)


def gold_of(sure: list[set], extra_possible: list[set]) -> GoldAlignments:
    return GoldAlignments(sure, [s | p for s, p in zip(sure, extra_possible)])


def test_aer_by_hand():
    gold = gold_of([{(0, 0), (1, 1)}, {(0, 0)}], [{(2, 2)}, {(1, 0)}])
    pred = [{(0, 0), (1, 1), (2, 2), (0, 1)}, {(1, 0), (1, 1)}]
    # |A| = 6, |S| = 3, |A∩S| = 2, |A∩P| = 4 (0-0, 1-1, 2-2; 1-0)
    scores = aer_scores(pred, gold)
    assert scores["aer"] == pytest.approx(1 - (2 + 4) / (6 + 3))
    assert scores["precision"] == pytest.approx(4 / 6)
    assert scores["recall"] == pytest.approx(2 / 3)


def test_aer_extremes():
    gold = gold_of([{(0, 0), (1, 1)}], [{(0, 1)}])
    perfect = {"aer": 0.0, "precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert aer_scores([{(0, 0), (1, 1)}], gold) == perfect
    # possible links cost nothing in AER: only sure recall counts in the denominator
    assert aer_scores([{(0, 0), (1, 1), (0, 1)}], gold)["aer"] == 0.0
    assert aer_scores([set()], gold) == {"aer": 1.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(CrossalignError, match="1 predicted sentence pairs but 2 gold"):
        aer_scores([set()], gold_of([set(), set()], [set(), set()]))


def test_read_pharaoh(tmp_path):
    path = tmp_path / "pred.txt"
    path.write_text("0-0 1-2\n\n2-1\n")
    assert read_pharaoh(path) == [{(0, 0), (1, 2)}, set(), {(2, 1)}]
    assert read_pharaoh(path, [(2, 3), (1, 1), (3, 2)])[0] == {(0, 0), (1, 2)}


@pytest.mark.parametrize(
    ("text", "lengths", "message"),
    [
        ("0-0 1:2\n", None, r"pred.txt:1: '1:2' is not a Pharaoh link"),
        ("0-0\n1--2\n", None, r"pred.txt:2: '1--2' is not a Pharaoh link"),
        ("0-0\n0-3\n", [(1, 1), (1, 3)], r"pred.txt:2: link 0-3 is out of range"),
        ("0-0\n", [(1, 1), (1, 1)], r"pred.txt has 1 lines but the gold test set has 2"),
    ],
)
def test_read_pharaoh_errors(tmp_path, text, lengths, message):
    path = tmp_path / "pred.txt"
    path.write_text(text)
    with pytest.raises(CrossalignError, match=message) as err:
        read_pharaoh(path, lengths)
    assert "\n" not in str(err.value)


def test_read_gold_links_ids_marks_and_null_links(tmp_path):
    zero_based = tmp_path / "a.txt"
    zero_based.write_text("0 1 1 S\r\n0 2 1 P\r\n1 2 -99 S\r\n1 1 2 S\r\n")
    gold = read_gold_links(zero_based, lengths=[(2, 1), (2, 2)])
    assert gold.sure == [{(0, 0)}, {(0, 1)}]
    assert gold.possible == [{(0, 0), (1, 0)}, {(0, 1)}]
    assert gold.ids == "zero"
    one_based = tmp_path / "b.txt"
    one_based.write_text("0001 1 1 S\n0003 2 2 P\n0003 1 1\n")
    # ids 1 and 3 cover 2 of 4 sentences: only an explicit rule reads them as line numbers
    gold = read_gold_links(one_based, [(2, 2)] * 4, ids="one")
    assert gold.sure == [{(0, 0)}, set(), {(0, 0)}, set()]
    assert gold.possible[2] == {(0, 0), (1, 1)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 1 1 S\n0 1\n", r"g.txt:2: 2 fields"),
        ("0 1 x S\n", r"g.txt:1: '0 1 x S' is not"),
        ("0 1 1 Q\n", r"g.txt:1: mark 'Q'"),
        ("0 0 1 S\n", r"g.txt:1: word positions are 1-based"),
        ("0 1 1 S\n1 3 1 S\n", r"g.txt:2: link 3-1 is out of range"),
        ("0 1 1 S\n1 1 1 S\n5 1 1 S\n", r"g.txt: gold links cover 3 distinct sentence ids"),
        ("", r"g.txt: no gold links"),
    ],
)
def test_read_gold_links_errors(tmp_path, text, message):
    path = tmp_path / "g.txt"
    path.write_text(text)
    with pytest.raises(CrossalignError, match=message):
        read_gold_links(path, [(2, 2), (2, 2)])


def test_read_testset_layout_errors(tmp_path):
    with pytest.raises(CrossalignError, match="must be named <source>-<target>"):
        (tmp_path / "gold").mkdir()
        read_testset(tmp_path / "gold")
    folder = tmp_path / "de-en"
    folder.mkdir()
    (folder / "test.de").write_text("a b\nc\n")
    with pytest.raises(CrossalignError, match="lacks test.en, alignv2.txt"):
        read_testset(folder)
    (folder / "test.en").write_text("a b\n")
    (folder / "alignv2.txt").write_text("0 1 1 S\n")
    with pytest.raises(CrossalignError, match=r"\(2 lines\) and .*test.en \(1 lines\) differ"):
        read_testset(folder)


@needs_gold
def test_real_de_en_by_hand():
    ts = read_testset(GOLD / "de-en")
    assert (ts.src_lang, ts.tgt_lang, len(ts.src), len(ts.tgt)) == ("de", "en", 508, 508)
    # ids are 0-based here: id 1 is the second line, "Das stimmt nicht !"
    assert ts.src[1] == ["Das", "stimmt", "nicht", "!"]
    assert ts.tgt[1] == ["But", "this", "is", "not", "what", "happens", "."]
    # Das-this, stimmt-is/what/happens, nicht-not, !-.
    assert ts.gold.sure[1] == {(0, 1), (1, 2), (1, 4), (1, 5), (2, 3), (3, 6)}
    assert ts.gold.possible[1] == ts.gold.sure[1]
    # 9613 S lines, one of them the null link "178 22 -99 S"; 921 P lines
    assert sum(map(len, ts.gold.sure)) == 9612
    assert sum(map(len, ts.gold.possible)) == 9612 + 921


@needs_gold
def test_real_en_fr_by_hand():
    ts = read_testset(GOLD / "en-fr")
    assert (ts.src_lang, ts.tgt_lang, len(ts.src)) == ("en", "fr", 447)
    # ids are 1-based and zero-padded here: 0010 is the tenth line
    src, tgt, sure = ts.src[9], ts.tgt[9], ts.gold.sure[9]
    assert src[:3] == ["both", "have", "many"] and tgt[:3] == ["tous", "deux", "possèdent"]
    assert {(0, 0), (0, 1), (1, 2)} <= sure  # both-tous, both-deux, have-possèdent
    assert (src[11], tgt[17]) == ("forest", "forestiers") and (11, 17) in sure
    assert (1, 3) in ts.gold.possible[9] - sure  # have-de, possible only
    assert sum(map(len, ts.gold.sure)) == 4038
    assert sum(map(len, ts.gold.possible)) == 4038 + 13400
