"""``crossalign align`` inputs and outputs (``src ||| tgt`` files, stdin, stdout, link scores,
linked words, streaming a chunk at a time) and ``crossalign symmetrize``, in-process."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from crossalign import Aligner
from crossalign.align.aligner import AlignConfig, load_aligner
from crossalign.cli import main
from tests.tiny_models import save_tiny_bert

from .conftest import FIXTURES

N_PAIRS = 10


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights and a unigram tokenizer of the en/es fixture."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-io"))


@pytest.fixture
def texts(tmp_path) -> tuple[Path, Path, Path]:
    """The same pairs as two line-aligned files and as one file of 'src ||| tgt' lines."""
    en = (FIXTURES / "en.txt").read_text().splitlines()[:N_PAIRS]
    es = (FIXTURES / "es.txt").read_text().splitlines()[:N_PAIRS]
    en[3] = ""  # an empty side
    src, tgt, joined = tmp_path / "src.en", tmp_path / "tgt.es", tmp_path / "pairs.txt"
    src.write_text("".join(f"{s}\n" for s in en))
    tgt.write_text("".join(f"{t}\n" for t in es))
    joined.write_text("".join(f"{s} ||| {t}\n" for s, t in zip(en, es)))
    return src, tgt, joined


def run(model: Path, *args: str) -> None:
    assert main(["align", "--model", str(model), "--layer", "1", "--device", "cpu", *args]) == 0


@pytest.mark.parametrize("method", ["ot", "softmax"])
def test_input_file_stdin_and_stdout_give_the_two_files_links(
    tiny_model, texts, tmp_path, capsys, monkeypatch, method
):
    src, tgt, joined = texts
    run(tiny_model, str(src), str(tgt), "-o", str(tmp_path / "two.txt"), "--method", method)
    expected = (tmp_path / "two.txt").read_text()
    assert len(expected.splitlines()) == N_PAIRS and expected.splitlines()[3] == ""
    run(tiny_model, "--input", str(joined), "--out", str(tmp_path / "one.txt"), "--method", method)
    assert (tmp_path / "one.txt").read_text() == expected
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(joined.read_bytes())))
    run(tiny_model, "--input", "-", "--out", "-", "--method", method)
    assert capsys.readouterr().out == expected


@pytest.mark.parametrize("method", ["ot", "itermax", "argmax", "softmax"])
def test_prob_and_word_outputs_match_the_links_and_the_api(tiny_model, texts, tmp_path, method):
    src, tgt, _ = texts
    out, probs, words = (tmp_path / f"{x}.txt" for x in ("out", "probs", "words"))
    run(
        tiny_model,
        *(str(src), str(tgt), "-o", str(out), "--method", method),
        *("--output-prob", str(probs), "--output-words", str(words)),
    )
    api = Aligner.from_pretrained(tiny_model, layer=1, method=method, device="cpu")
    en, es = (p.read_text().splitlines() for p in (src, tgt))
    expected = api.align_batch(en, es)
    rows = zip(
        out.read_text().splitlines(), probs.read_text().splitlines(), words.read_text().splitlines()
    )
    for k, (line, prob_line, word_line) in enumerate(rows):
        links = line.split()
        assert [p.rpartition(":")[0] for p in prob_line.split()] == links
        assert links == [f"{x.src}-{x.tgt}" for x in expected[k]]
        scores = [float(p.rpartition(":")[2]) for p in prob_line.split()]
        assert scores == pytest.approx([x.score for x in expected[k]], rel=1e-5, abs=1e-9)
        assert all(0.0 <= s <= 1.0 for s in scores)
        s_words, t_words = en[k].split(), es[k].split()
        pairs = [tuple(w.split("<sep>")) for w in word_line.split()]
        assert pairs == [(s_words[x.src], t_words[x.tgt]) for x in expected[k]]
    assert len(out.read_text().splitlines()) == N_PAIRS


def test_streaming_reads_a_chunk_at_a_time_and_keeps_the_order(tiny_model):
    """Chunks of 8 pairs: the reader is pulled no further than the chunk being aligned, and the
    links do not depend on where the chunks break."""
    en = (FIXTURES / "en.txt").read_text().splitlines()
    es = (FIXTURES / "es.txt").read_text().splitlines()
    pairs = [(en[k % len(en)].split(), es[(3 * k) % len(es)].split()) for k in range(20)]
    pulled = 0

    def reader():
        nonlocal pulled
        for pair in pairs:
            pulled += 1
            yield pair

    small = load_aligner(tiny_model, AlignConfig(method="argmax", batch_size=3), [1], device="cpu")
    chunks = small.align_chunks(reader(), [1], chunk_pairs=8)
    part, first = next(chunks)
    assert len(part) == len(first[1]) == 8 and pulled == 8
    assert part == pairs[:8]
    rest = [a for _, chunk in chunks for a in chunk[1]]
    assert pulled == 20 and len(rest) == 12
    big = load_aligner(tiny_model, AlignConfig(method="argmax", batch_size=8), [1], device="cpu")
    streamed = [[(x.src, x.tgt) for x in a.links] for a in first[1] + rest]
    assert streamed == big.align(pairs, [1])[1]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("a b ||| c d\nno separator here\n", "pairs.txt:2"),
        ("a ||| b ||| c\n", "pairs.txt:1"),
    ],
)
def test_a_malformed_line_is_a_one_line_error(tiny_model, tmp_path, capsys, content, where):
    bad = tmp_path / "pairs.txt"
    bad.write_text(content)
    out = tmp_path / "out.txt"
    code = main(
        ["align", "--model", str(tiny_model), "--layer", "1", "--input", str(bad), "-o", str(out)]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("crossalign: error: ") and where in err and "|||" in err
    assert not out.exists()  # no half-written output


def test_a_malformed_line_on_stdin_is_found_as_it_is_read(
    tiny_model, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out.txt"
    stdin = io.TextIOWrapper(io.BytesIO(b"a b ||| c d\ne f ||| g\nno separator\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    args = ["align", "--model", str(tiny_model), "--layer", "1", "--input", "-", "-o", str(out)]
    assert main(args) == 2
    assert "<stdin>:3: expected 'source ||| target'" in capsys.readouterr().err
    assert not out.exists()


def test_input_errors(tiny_model, texts, tmp_path, capsys):
    src, tgt, joined = texts
    cases = [
        (["--input", str(joined), str(src), str(tgt)], "not both"),
        ([str(src)], "give SRC_FILE TGT_FILE"),
    ]
    for args, message in cases:
        assert main(["align", "--model", str(tiny_model), "--layer", "1", *args]) == 2
        assert message in capsys.readouterr().err


# --- symmetrize -----------------------------------------------------------------------------


def symmetrize(tmp_path: Path, forward: list[str], backward: list[str], method: str) -> list[str]:
    f, b, out = tmp_path / "fwd.txt", tmp_path / "bwd.txt", tmp_path / "sym.txt"
    f.write_text("".join(x + "\n" for x in forward))
    b.write_text("".join(x + "\n" for x in backward))
    args = ["symmetrize", "--forward", str(f), "--backward", str(b), "--method", method]
    assert main([*args, "--out", str(out)]) == 0
    return out.read_text().splitlines()


def flip(line: str) -> str:
    """A source-target Pharaoh line as the target-source aligner writes it."""
    return " ".join(f"{j}-{i}" for i, j in (t.split("-") for t in line.split()))


def test_intersection_and_union_by_hand(tmp_path):
    forward = ["0-0 1-1 2-1", "", "0-1"]
    backward = [flip("0-0 1-2 2-1"), flip("0-0"), flip("0-1")]  # written as target-source
    assert symmetrize(tmp_path, forward, backward, "intersection") == ["0-0 2-1", "", "0-1"]
    assert symmetrize(tmp_path, forward, backward, "union") == [
        "0-0 1-1 1-2 2-1",
        "0-0",
        "0-1",
    ]


def test_grow_diag_final_and_by_hand(tmp_path):
    # the worked example of tests/unit/test_symmetrize.py, through the files:
    # intersection (0,0) (1,1); grow-diag adds (2,1), (2,2), (3,3), (4,3);
    # final-and adds (5,5) from the forward and (6,4) from the backward links
    forward = "0-0 1-1 2-1 3-3 5-5 0-5"
    backward = flip("0-0 1-1 2-2 4-3 6-4")
    expected = "0-0 1-1 2-1 2-2 3-3 4-3 5-5 6-4"
    assert symmetrize(tmp_path, [forward, "0-0"], [backward, "0-0"], "grow-diag-final-and") == [
        expected,
        "0-0",
    ]


def test_symmetrize_to_stdout_and_errors(tmp_path, capsys):
    f, b = tmp_path / "fwd.txt", tmp_path / "bwd.txt"
    f.write_text("0-0 1-1\n")
    b.write_text("1-1 0-0\n")
    assert main(["symmetrize", "--forward", str(f), "--backward", str(b)]) == 0
    assert capsys.readouterr().out == "0-0 1-1\n"
    f.write_text("0-0\n1-x\n")
    b.write_text("0-0\n1-1\n")
    assert main(["symmetrize", "--forward", str(f), "--backward", str(b)]) == 2
    err = capsys.readouterr().err
    assert "fwd.txt:2: '1-x' is not a Pharaoh link" in err
    b.write_text("0-0\n")
    assert main(["symmetrize", "--forward", str(f), "--backward", str(b)]) == 2
    assert "differ in line count" in capsys.readouterr().err
