"""How gold sentence ids map to sentences (``--gold-ids``), the refusals where that mapping would
be a guess, gold links past the end of their sentence (kept, warned, refused above 5% or with
``--strict``), and AER checked against a scorer written here from the formula alone."""

import json
import random
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.errors import CrossalignError
from crossalign.evals.aer import aer_scores, read_pharaoh
from crossalign.evals.gold import read_gold_links, read_testset

GOLD = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "word-alignment-gold"
needs_gold = pytest.mark.skipif(
    not GOLD.is_dir(), reason=f"gold word-alignment test sets not found at {GOLD}"
)


def reference_scores(
    pred_lines: list[str], gold_lines: list[str], line_of_id: dict[int, int]
) -> dict[str, float]:
    """AER, precision, recall, F1 from the raw lines, by the formula alone (S ⊆ P), keeping
    every gold link, even one past the end of its sentence (SimAlign's and awesome-align's
    scorers compare sets of pairs and never read the text):
    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|), P = |A∩P| / |A|, R = |A∩S| / |S|,
    F1 = 2PR / (P + R).
    ``line_of_id`` says which prediction line (0-based) each gold sentence id is."""
    a = {
        (line, *map(int, tok.split("-")))
        for line, text in enumerate(pred_lines)
        for tok in text.split()
    }
    s, p = set(), set()
    for text in gold_lines:
        sid, i, j, *mark = text.split()
        if int(i) < 0 or int(j) < 0:
            continue
        link = (line_of_id[int(sid)], int(i) - 1, int(j) - 1)
        p.add(link)
        if mark != ["P"]:
            s.add(link)
    precision, recall = len(a & p) / len(a), len(a & s) / len(s)
    return {
        "aer": 1 - (len(a & s) + len(a & p)) / (len(a) + len(s)),
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
    }


def write_testset(folder: Path, n_src: list[int], n_tgt: list[int], gold: str) -> Path:
    """A test-set folder de-en/ with sentences of the given lengths and the gold links text."""
    folder.mkdir(parents=True)
    (folder / "test.de").write_text("".join(" ".join(["w"] * n) + "\n" for n in n_src))
    (folder / "test.en").write_text("".join(" ".join(["v"] * n) + "\n" for n in n_tgt))
    (folder / "alignv2.txt").write_text(gold)
    return folder


def run_aer(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", "aer", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ids 3, 7, 8: the three sentences, by rank; sure and possible links
GAPS = "3 1 1 S\n3 2 2 S\n7 1 1 S\n7 2 1 P\n8 1 2 P\n8 2 2 S\n"


def test_auto_reads_ids_with_gaps_by_rank_and_scores_them_by_hand(tmp_path, capsys):
    gold = read_gold_links(_write(tmp_path / "g.txt", GAPS), [(2, 2)] * 3)
    assert gold.ids == "rank"
    assert gold.sure == [{(0, 0), (1, 1)}, {(0, 0)}, {(1, 1)}]
    assert gold.possible == [{(0, 0), (1, 1)}, {(0, 0), (1, 0)}, {(0, 1), (1, 1)}]
    # A = {0:0-0,1-0; 1:0-0,1-0; 2:0-1}: |A|=5, |S|=4, |A∩S|=2 (0:0-0, 1:0-0), |A∩P|=4
    pred = _write(tmp_path / "pred.txt", "0-0 1-0\n0-0 1-0\n0-1\n")
    by_hand = {"aer": 1 - (2 + 4) / (5 + 4), "precision": 4 / 5, "recall": 2 / 4, "f1": 8 / 13}
    assert aer_scores(read_pharaoh(pred), gold) == pytest.approx(by_hand)
    write_testset(tmp_path / "de-en", [2] * 3, [2] * 3, GAPS)
    code, out, _ = run_aer(capsys, "--pred", str(pred), "--gold", str(tmp_path / "de-en"))
    assert code == 0
    assert "gold de-en: 3 sentences, ids read by rank (--gold-ids auto)" in out
    assert out.splitlines()[-1].split()[1:] == ["33.33", "80.00", "50.00", "61.54"]


@pytest.mark.parametrize(
    ("text", "rule", "n"),
    [
        ("0 1 1\n1 1 1\n2 1 1\n", "zero", 3),
        ("0001 1 1\n0002 1 1\n0003 1 1\n", "one", 3),
        ("5 1 1\n6 1 1\n7 1 1\n", "rank", 3),  # contiguous, but starting above 1
        ("2 1 1\n4 1 1\n9 1 1\n", "rank", 3),
        ("0 1 1\n2 1 1\n3 1 1\n", "rank", 3),  # 0-based start with a gap
    ],
)
def test_auto_rule(tmp_path, text, rule, n):
    path = _write(tmp_path / "g.txt", text)
    for lengths in ([(1, 1)] * n, None):
        gold = read_gold_links(path, lengths)
        assert (gold.ids, gold.sure) == (rule, [{(0, 0)}] * n)


@pytest.mark.parametrize(
    ("text", "n", "message"),
    [
        # fewer sentences than the text files (the old reader scored a perfect prediction 20%)
        ("0 1 1\n1 1 1\n", 3, r"g.txt: gold links cover 2 distinct sentence ids \(0..1\) but "),
        ("2 1 1\n3 1 1\n4 1 1\n", 4, r"cover 3 distinct sentence ids \(2..4\) but the text"),
        # 0-based with sentence 0 unlinked, or 1-based with the last one unlinked
        ("1 1 1\n2 1 1\n", 3, r"g.txt: sentence ids 1..2 cover 2 of the 3 sentences .* zero or "),
        ("0 1 1\n1 1 1\n2 1 1\n3 1 1\n", 3, r"cover 4 distinct sentence ids \(0..3\) but the text"),
    ],
)
def test_auto_refuses_ids_that_do_not_match_the_sentences(tmp_path, text, n, message):
    with pytest.raises(CrossalignError, match=message) as err:
        read_gold_links(_write(tmp_path / "g.txt", text), [(1, 1)] * n)
    assert "\n" not in str(err.value)


def test_explicit_rules(tmp_path):
    path = _write(tmp_path / "g.txt", "1 1 1\n2 1 1\n")
    lengths = [(1, 1)] * 3
    zero = read_gold_links(path, lengths, ids="zero")
    assert (zero.ids, zero.sure) == ("zero", [set(), {(0, 0)}, {(0, 0)}])
    one = read_gold_links(path, lengths, ids="one")
    assert (one.ids, one.sure) == ("one", [{(0, 0)}, {(0, 0)}, set()])
    # without text, zero and one size the gold to the largest id, rank to the distinct ids
    assert len(read_gold_links(path, ids="zero").sure) == 3
    assert len(read_gold_links(path, ids="one").sure) == 2
    assert len(read_gold_links(_write(tmp_path / "r.txt", "4 1 1\n9 1 1\n"), ids="rank").sure) == 2
    with pytest.raises(CrossalignError, match=r"2 distinct sentence ids but the text files have 3"):
        read_gold_links(path, lengths, ids="rank")
    with pytest.raises(CrossalignError, match=r"g.txt:2: sentence id 2 is outside the 2 sentences"):
        read_gold_links(path, [(1, 1)] * 2, ids="zero")
    with pytest.raises(CrossalignError, match=r"z.txt:1: sentence id 0 is outside .* 1-based"):
        read_gold_links(_write(tmp_path / "z.txt", "0 1 1\n"), ids="one")
    with pytest.raises(CrossalignError, match=r"g.txt:2: link 1-1 is out of range: sentence 2 "):
        read_gold_links(path, [(1, 1), (0, 0), (1, 1)], ids="one")
    with pytest.raises(CrossalignError, match=r"rule 'two' must be one of auto, zero, one, rank"):
        read_gold_links(path, ids="two")


def test_cli_refuses_gold_that_covers_fewer_sentences(tmp_path, capsys):
    folder = write_testset(tmp_path / "de-en", [2] * 3, [2] * 3, "1 1 1\n1 2 2\n2 1 1\n2 2 2\n")
    pred = _write(tmp_path / "pred.txt", "0-0 1-1\n0-0 1-1\n0-0 1-1\n")
    code, out, err = run_aer(capsys, "--pred", str(pred), "--gold", str(folder))
    assert (code, out) == (2, "")
    assert "sentence ids 1..2 cover 2 of the 3 sentences" in err and len(err.splitlines()) == 1
    # 0-based with an unlinked first sentence, once said so: a perfect prediction scores 0
    _write(pred, "\n0-0 1-1\n0-0 1-1\n")
    code, out, _ = run_aer(capsys, "--pred", str(pred), "--gold", str(folder), "--gold-ids", "zero")
    assert code == 0
    assert "3 sentences, ids read 0-based (--gold-ids zero); 1 without gold links" in out
    assert out.splitlines()[-1].split()[1:] == ["0.00", "100.00", "100.00", "100.00"]


def test_cli_checks_a_links_file_against_the_text(tmp_path, capsys):
    folder = write_testset(tmp_path / "de-en", [2, 2], [2, 2], "0 1 1 S\n0 3 3 S\n1 1 1 S\n")
    pred = _write(tmp_path / "pred.txt", "0-0\n0-0\n")
    beyond = r"alignv2.txt:2: link 3-3 is out of range: sentence 0 (line 1 of the text files"
    # the links file alone is checked against the test.de, test.en beside it
    code, _, err = run_aer(capsys, "--pred", str(pred), "--gold", str(folder / "alignv2.txt"))
    assert code == 2 and beyond in err
    # or against --text
    links = _write(tmp_path / "links.txt", (folder / "alignv2.txt").read_text())
    text = [str(folder / "test.de"), str(folder / "test.en")]
    code, _, err = run_aer(capsys, "--pred", str(pred), "--gold", str(links), "--text", *text)
    assert code == 2 and beyond.replace("alignv2", "links") in err
    code, _, err = run_aer(capsys, "--pred", str(pred), "--gold", str(folder), "--text", *text)
    assert code == 2 and "--text goes with a links file" in err
    _write(links, "0 1 1 S\n1 2 2 P\n")
    code, out, _ = run_aer(capsys, "--pred", str(pred), "--gold", str(links), "--text", *text)
    assert code == 0 and "gold links.txt on test.de, test.en: 2 sentences, ids read 0-based" in out


def test_cli_refuses_a_prediction_longer_than_the_gold(tmp_path, capsys):
    links = _write(tmp_path / "links.txt", "0 1 1\n0 2 2\n1 1 1\n1 2 2\n")
    pred = _write(tmp_path / "pred.txt", "0-0 1-1\n0-0 1-1\n0-0\n")
    code, out, err = run_aer(capsys, "--pred", str(pred), "--gold", str(links))
    assert (code, out) == (2, "")
    assert "pred.txt has 3 lines but the gold" in err and "has 2 sentences when its ids" in err
    # the right length scores, with a note that word positions went unchecked
    _write(pred, "0-0 1-1\n0-0 1-1\n")
    code, out, err = run_aer(capsys, "--pred", str(pred), "--gold", str(links))
    assert code == 0 and "word positions of gold and predicted links are not checked" in err
    assert "gold links.txt: 2 sentences, ids read 0-based (--gold-ids auto)" in out


IDS = {
    "zero": lambda n, rng: list(range(n)),
    "one": lambda n, rng: list(range(1, n + 1)),
    "gaps": lambda n, rng: sorted(rng.sample(range(2, 4 * n), n)),
}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scheme", list(IDS))
def test_matches_the_reference_scorer(tmp_path, capsys, scheme, seed):
    """Random sentences, sure/possible gold with null links, ids 0-based, 1-based zero-padded or
    with gaps, and predictions that partly hit them: the CLI's JSON equals the formula."""
    rng = random.Random(f"{scheme}-{seed}")
    n = rng.randint(3, 12)
    n_src = [rng.randint(1, 7) for _ in range(n)]
    n_tgt = [rng.randint(1, 7) for _ in range(n)]
    ids = IDS[scheme](n, rng)
    gold_lines, pred_lines = [], []
    for sid, m, k in zip(ids, n_src, n_tgt):
        pairs = [(i, j) for i in range(1, m + 1) for j in range(1, k + 1)]
        chosen = rng.sample(pairs, rng.randint(1, len(pairs)))
        gold_lines += [f"{sid:04d} {i} {j} {rng.choice('SSP')}" for i, j in chosen]
        if rng.random() < 0.3:
            gold_lines.append(f"{sid:04d} {rng.randint(1, m)} -99 S")
        guess = rng.sample(pairs, rng.randint(0, len(pairs)))
        pred_lines.append(" ".join(f"{i - 1}-{j - 1}" for i, j in guess))
    if not any(pred_lines):
        pred_lines[0] = "0-0"
    rng.shuffle(gold_lines)
    folder = write_testset(tmp_path / "de-en", n_src, n_tgt, "\n".join(gold_lines) + "\n")
    pred = _write(tmp_path / "pred.txt", "\n".join(pred_lines) + "\n")
    out = tmp_path / "scores.json"
    code, printed, _ = run_aer(
        capsys, "--pred", str(pred), "--gold", str(folder), "--json", str(out)
    )
    assert code == 0
    rule = {"zero": "0-based", "one": "1-based", "gaps": "by rank"}[scheme]
    assert f"ids read {rule} (--gold-ids auto)" in printed
    expected = reference_scores(pred_lines, gold_lines, {sid: k for k, sid in enumerate(ids)})
    assert json.loads(out.read_text())["pred.txt"] == pytest.approx(expected)


@needs_gold
@pytest.mark.parametrize(("name", "first_id"), [("de-en", 0), ("en-fr", 1)])
def test_real_sets_match_the_reference_scorer(tmp_path, name, first_id):
    """A prediction of every third gold link plus wrong ones, scored by the reader + aer_scores
    and by the formula on the raw lines (ids checked by hand in test_aer: de-en 0-based, en-fr
    1-based)."""
    gold_lines = (GOLD / name / "alignv2.txt").read_text().splitlines()
    ts = read_testset(GOLD / name)
    pred: list[set[tuple[int, int]]] = [set() for _ in ts.src]
    for k, text in enumerate(gold_lines):
        sid, i, j = (int(x) for x in text.split()[:3])
        if k % 3 == 0 and i > 0 and j > 0:
            pred[sid - first_id].add((i - 1, j - 1))
    for line, src in enumerate(ts.src):
        pred[line].add((len(src) - 1, 0))  # mostly wrong
    pred_lines = [" ".join(f"{i}-{j}" for i, j in sorted(a)) for a in pred]
    line_of_id = {k + first_id: k for k in range(len(ts.src))}
    expected = reference_scores(pred_lines, gold_lines, line_of_id)
    assert aer_scores(pred, ts.gold) == pytest.approx(expected)
    assert 0.2 < expected["aer"] < 0.9
    assert ts.gold.out_of_range == 0  # these two sets have no link past a sentence's end


# five sentences of 2 + 2 words, ids 0-based: 1-1 and 2-2 sure, 1-2 and 2-1 possible (20 links)
IN_RANGE = [
    f"{sid} {i} {j} {'S' if i == j else 'P'}" for sid in range(5) for i in (1, 2) for j in (1, 2)
]


def test_out_of_range_gold_link_counts_against_recall_by_hand(tmp_path, capsys):
    """As WPT-2005 en-hi sentence 68 (link 33-34, 33 target words): the link stays in S."""
    gold_lines = IN_RANGE[:10] + ["2 2 3 S"] + IN_RANGE[10:]  # line 11: target word 3 of 2
    folder = write_testset(tmp_path / "de-en", [2] * 5, [2] * 5, "\n".join(gold_lines) + "\n")
    gold = read_testset(folder).gold
    assert (gold.out_of_range, sum(map(len, gold.sure))) == (1, 11)
    assert (1, 2) in gold.sure[2] and (1, 2) in gold.possible[2]
    pred = _write(tmp_path / "pred.txt", "0-0 1-1\n" * 5)
    # |A| = 10, |S| = 11, |A∩S| = 10, |A∩P| = 10
    by_hand = {"aer": 1 - 20 / 21, "precision": 1.0, "recall": 10 / 11, "f1": 20 / 21}
    assert aer_scores(read_pharaoh(pred), gold) == pytest.approx(by_hand)
    code, out, err = run_aer(capsys, "--pred", str(pred), "--gold", str(folder))
    assert code == 0
    assert out.splitlines()[-1].split()[1:] == ["4.76", "100.00", "90.91", "95.24"]
    [warning] = [line for line in err.splitlines() if "past the end" in line]
    assert warning.startswith("warning: 1 gold link(s) point past the end of their sentence, ")
    assert f"first {folder / 'alignv2.txt'}:11: link 2-3 is out of range: sentence 2" in warning
    assert "pass --strict to refuse such links" in warning
    # --strict refuses it, in one line naming file:line
    code, out, err = run_aer(capsys, "--pred", str(pred), "--gold", str(folder), "--strict")
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert f"{folder / 'alignv2.txt'}:11: link 2-3 is out of range" in err
    assert "--strict refuses every gold link past the end of its sentence" in err


@pytest.mark.parametrize(("n_in", "n_out", "refused"), [(19, 1, False), (18, 2, True)])
def test_more_than_five_percent_out_of_range_is_refused(tmp_path, n_in, n_out, refused):
    """1 of 20 (5%) is scored; 2 of 20 (10%): the text files are not the gold's."""
    lines = IN_RANGE[:n_in] + [f"4 3 {k} S" for k in range(1, n_out + 1)]  # source word 3 of 2
    path = _write(tmp_path / "g.txt", "\n".join(lines) + "\n")
    if not refused:
        gold = read_gold_links(path, [(2, 2)] * 5)
        assert gold.out_of_range == 1
        assert gold.first_out_of_range.startswith(f"{path}:20: link 3-1 is out of range")
        with pytest.raises(CrossalignError, match=r"g.txt:20: link 3-1 .*--strict refuses"):
            read_gold_links(path, [(2, 2)] * 5, strict=True)
        return
    with pytest.raises(CrossalignError, match=r"g.txt:19: link 3-1 is out of range") as err:
        read_gold_links(path, [(2, 2)] * 5)
    assert "2 of 20 gold links are out of range, more than 5%: the text files" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("seed", range(4))
def test_out_of_range_links_match_the_reference_scorer(tmp_path, capsys, seed):
    """Random gold with a few links (at most 5%) past the end of their sentence: the CLI's JSON
    equals the formula on the raw lines with every gold link kept, and the warning counts them."""
    rng = random.Random(f"out-of-range-{seed}")
    n = rng.randint(6, 12)
    n_src = [rng.randint(3, 7) for _ in range(n)]
    n_tgt = [rng.randint(3, 7) for _ in range(n)]
    gold_lines, pred_lines = [], []
    for sid, (m, k) in enumerate(zip(n_src, n_tgt)):
        pairs = [(i, j) for i in range(1, m + 1) for j in range(1, k + 1)]
        chosen = rng.sample(pairs, rng.randint(len(pairs) // 2, len(pairs)))
        gold_lines += [f"{sid} {i} {j} {rng.choice('SSP')}" for i, j in chosen]
        guess = rng.sample(pairs, rng.randint(1, len(pairs)))
        pred_lines.append(" ".join(f"{i - 1}-{j - 1}" for i, j in guess))
    n_out = rng.randint(1, len(gold_lines) // 20)
    for sid in rng.sample(range(n), n_out):
        past = (n_src[sid] + 1, rng.randint(1, n_tgt[sid]))
        if rng.random() < 0.5:
            past = (rng.randint(1, n_src[sid]), n_tgt[sid] + rng.randint(1, 3))
        gold_lines.append(f"{sid} {past[0]} {past[1]} {rng.choice('SP')}")
    rng.shuffle(gold_lines)
    folder = write_testset(tmp_path / "de-en", n_src, n_tgt, "\n".join(gold_lines) + "\n")
    pred = _write(tmp_path / "pred.txt", "\n".join(pred_lines) + "\n")
    out = tmp_path / "scores.json"
    code, _, err = run_aer(capsys, "--pred", str(pred), "--gold", str(folder), "--json", str(out))
    assert code == 0
    assert f"warning: {n_out} gold link(s) point past the end" in err
    expected = reference_scores(pred_lines, gold_lines, {k: k for k in range(n)})
    assert json.loads(out.read_text())["pred.txt"] == pytest.approx(expected)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
