"""Pharaoh-style gold alignments (``i-j`` sure, ``ipj`` possible) as SimAlign's and
awesome-align's samples write them, and F1 beside AER: a hand-computed case, awesome-align's
``aer.py`` transcribed as an oracle on random cases, the CLI, and the readers' refusals."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.errors import CrossalignError
from crossalign.evals.aer import aer_scores, read_pharaoh
from crossalign.evals.gold import is_pharaoh_gold, read_gold_file, read_pharaoh_gold

# SimAlign's layout: sentence id, a tab, 0-based links
SIMALIGN = "0\t0-0 1-1 2p2\n1\t0-1 1p0\n"
PRED = "0-0 2-2 1-2\n1-0 0-0\n"
# |A| = 5, |S| = 3 (0-0, 1-1; 0-1), |A∩S| = 1 (0-0), |A∩P| = 3 (0-0, 2-2; 1-0)
HAND = {
    "aer": 1 - (1 + 3) / (5 + 3),
    "precision": 3 / 5,
    "recall": 1 / 3,
    "f1": 2 * (3 / 5) * (1 / 3) / (3 / 5 + 1 / 3),  # = 3/7
}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_hand_computed_case(tmp_path):
    gold = read_pharaoh_gold(write(tmp_path / "g.gold", SIMALIGN))
    assert gold.sure == [{(0, 0), (1, 1)}, {(0, 1)}]
    assert gold.possible == [{(0, 0), (1, 1), (2, 2)}, {(0, 1), (1, 0)}]
    assert gold.ids == "zero"
    scores = aer_scores(read_pharaoh(write(tmp_path / "p.txt", PRED)), gold)
    assert scores == pytest.approx(HAND)
    assert scores["f1"] == pytest.approx(3 / 7)


@pytest.mark.parametrize(
    ("text", "base"),
    [
        (SIMALIGN, 0),
        ("0-0 1-1 2p2\n0-1 1p0\n", 0),  # one line per sentence
        ("1-1 2-2 3p3\n1-2 2p1\n", 1),  # awesome-align's examples are 1-based (aer.py --oneRef)
        ("1\t0-1 1p0\n0\t0-0 1-1 2p2\n", 0),  # ids in any order
    ],
)
def test_layouts_read_the_same(tmp_path, text, base):
    gold = read_gold_file(write(tmp_path / "g.gold", text), [(3, 3), (2, 2)], base=base)
    assert aer_scores(read_pharaoh(write(tmp_path / "p.txt", PRED)), gold) == pytest.approx(HAND)


def test_format_detection(tmp_path):
    assert is_pharaoh_gold(write(tmp_path / "a", "\n0-0 1p1\n"))
    assert is_pharaoh_gold(write(tmp_path / "b", "0\t0-0 1p1\n"))
    assert not is_pharaoh_gold(write(tmp_path / "c", "0 1 1 S\n0 2 2 P\n"))
    assert not is_pharaoh_gold(write(tmp_path / "d", "0 1 1\n"))
    gold = read_gold_file(tmp_path / "c")  # SENTID I J S|P, 1-based
    assert gold.sure == [{(0, 0)}] and gold.possible == [{(0, 0), (1, 1)}]


def awesome_align_metrics(reference: str, hypothesis: str, one_ref: bool) -> dict[str, float]:
    """awesome-align's tools/aer.py (reading and ``calculate_metrics``, f_alpha 0.5),
    transcribed."""

    def parse_single_alignment(string, one_indexed=False):
        a, b = string.replace("p", "-").split("-")
        a, b = int(a), int(b)
        if one_indexed:
            a, b = a - 1, b - 1
        return a, b

    sure, possible, hyp = [], [], []
    for line in reference.splitlines():
        sure.append(set())
        possible.append(set())
        for alignment_string in line.split():
            sure_alignment = "-" in alignment_string
            alignment_tuple = parse_single_alignment(alignment_string, one_ref)
            if sure_alignment:
                sure[-1].add(alignment_tuple)
            possible[-1].add(alignment_tuple)
    for line in hypothesis.splitlines():
        hyp.append({parse_single_alignment(s) for s in line.split()})
    sum_a_p = sum_a_s = sum_s = sum_a = 0.0
    for s, p, a in zip(sure, possible, hyp):
        sum_a += len(a)
        sum_s += len(s)
        sum_a_p += len(a.intersection(p))
        sum_a_s += len(a.intersection(s))
    precision = sum_a_p / sum_a
    recall = sum_a_s / sum_s
    aer = 1.0 - ((sum_a_p + sum_a_s) / (sum_a + sum_s))
    f_alpha = 0.5
    f_measure = 1.0 / (f_alpha / precision + (1.0 - f_alpha) / recall)
    return {"aer": aer, "precision": precision, "recall": recall, "f1": f_measure}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("base", [0, 1])
def test_cli_matches_awesome_align_scorer(tmp_path, capsys, seed, base):
    rng = random.Random(seed)
    n = rng.randint(3, 9)
    lengths = [(rng.randint(1, 6), rng.randint(1, 6)) for _ in range(n)]
    gold_lines, pred_lines = [], []
    for m, k in lengths:
        pairs = [(i, j) for i in range(m) for j in range(k)]
        gold = rng.sample(pairs, rng.randint(1, len(pairs)))
        marks = [rng.choice("--p") for _ in gold]
        gold_lines.append(" ".join(f"{i + base}{c}{j + base}" for (i, j), c in zip(gold, marks)))
        guess = rng.sample(pairs, rng.randint(1, min(4, len(pairs))))
        pred_lines.append(" ".join(f"{i}-{j}" for i, j in guess))
    if all("-" not in line for line in gold_lines):
        gold_lines[0] += f" {base}-{base}"
    folder = tmp_path / "de-en"
    folder.mkdir()
    write(folder / "test.de", "".join(" ".join("w" * m) + "\n" for m, _ in lengths))
    write(folder / "test.en", "".join(" ".join("v" * k) + "\n" for _, k in lengths))
    gold_path = write(folder / "de-en.gold", "\n".join(gold_lines) + "\n")
    pred = write(tmp_path / "pred.txt", "\n".join(pred_lines) + "\n")
    out = tmp_path / "scores.json"
    argv = ["--pred", str(pred), "--gold", str(gold_path), "--gold-base", str(base)]
    assert main(["eval", "aer", *argv, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ids read as line numbers" in printed and "F1" in printed
    want = awesome_align_metrics("\n".join(gold_lines), "\n".join(pred_lines), base == 1)
    assert json.loads(out.read_text())["pred.txt"] == pytest.approx(want)


@pytest.mark.parametrize("base", [0, 1])
def test_out_of_range_link_scored_as_awesome_align_scores_it(tmp_path, capsys, base):
    """Five 3 + 3 word sentences, every pair a gold link (45), and one more link past the end of
    sentence 2 (1 of 46, under 5%): kept as a gold link, as awesome-align's aer.py keeps it."""
    folder = tmp_path / "de-en"
    folder.mkdir()
    write(folder / "test.de", "a b c\n" * 5)
    write(folder / "test.en", "x y z\n" * 5)
    pairs = [(i, j) for i in range(3) for j in range(3)]
    lines = [" ".join(f"{i + base}{'-' if i == j else 'p'}{j + base}" for i, j in pairs)] * 5
    lines[1] += f" {3 + base}-{base}"  # source word 4 of 3
    gold_path = write(folder / "de-en.gold", "\n".join(lines) + "\n")
    pred_text = "0-0 1-1 2-2\n0-0 1-2\n2-2\n0-0\n1-1 2-1\n"
    pred = write(tmp_path / "pred.txt", pred_text)
    out = tmp_path / "scores.json"
    argv = ["--pred", str(pred), "--gold", str(gold_path), "--gold-base", str(base)]
    assert main(["eval", "aer", *argv, "--json", str(out)]) == 0
    err = capsys.readouterr().err
    first = f"first {gold_path}:2: link {3 + base}-{base} is out of range: sentence 2"
    assert "warning: 1 gold link(s) point past the end" in err and first in err
    want = awesome_align_metrics("\n".join(lines), pred_text, base == 1)
    assert json.loads(out.read_text())["pred.txt"] == pytest.approx(want)
    assert want["recall"] == pytest.approx(7 / 16)  # 15 sure links in range and the one past
    assert main(["eval", "aer", *argv, "--strict"]) == 2
    assert "--strict refuses every gold link" in capsys.readouterr().err


def test_out_of_range_link_in_a_file_that_never_uses_index_0_is_refused(tmp_path):
    """Read 0-based, a file without index 0 and with a link past the end is 1-based: refused
    however few such links there are."""
    text = "1-1 1-2 2-1 2-2\n" * 4 + "1-1 1-2 2-1 2-2 3-1\n"  # 1 of 21 links out of range
    path = write(tmp_path / "g.gold", text)
    with pytest.raises(CrossalignError, match=r"g.gold:5: link 3-1 .*pass --gold-base 1\)$"):
        read_pharaoh_gold(path, [(3, 3)] * 5)
    gold = read_pharaoh_gold(path, [(3, 3)] * 5, base=1)
    assert gold.out_of_range == 0 and gold.sure[4] == {(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)}


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("0-0 1x1\n", {}, r"g.gold:1: '1x1' is not a Pharaoh gold link"),
        ("1-1\n0-1\n", {"base": 1}, r"g.gold:2: link 0-1 has index 0 but the file is read 1-based"),
        (
            "1-1\n2p2\n",
            {"lengths": [(2, 2), (2, 2)]},
            r"g.gold:2: link 2p2 is out of range: sentence 2 .*\(1-based\? pass --gold-base 1\)",
        ),
        ("0\t0-0\n1-1\n", {}, r"g.gold:2: no 'ID<tab>' before the links"),
        ("0-0\n1-1\n", {"ids": "one"}, r"one line per sentence and no sentence ids"),
        ("0-0\n", {"lengths": [(1, 1), (1, 1)]}, r"g.gold has 1 lines but the text files have 2"),
    ],
)
def test_refusals(tmp_path, text, kwargs, message):
    with pytest.raises(CrossalignError, match=message):
        read_pharaoh_gold(write(tmp_path / "g.gold", text), **kwargs)
