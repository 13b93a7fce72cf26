"""``crossalign align`` and ``crossalign eval aer`` in-process, on a tiny random BERT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossalign.align.aligner import AlignConfig, load_aligner
from crossalign.align.words import Pieces
from crossalign.cli import main
from tests.tiny_models import save_tiny_bert

from .conftest import FIXTURES

N_PAIRS = 9


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer BERT (random weights, language embeddings for en and es) + unigram tokenizer."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-aligner"), ["en", "es"])


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    src, tgt = tmp_path / "src.en", tmp_path / "tgt.es"
    en = (FIXTURES / "en.txt").read_text().splitlines()[:N_PAIRS]
    es = (FIXTURES / "es.txt").read_text().splitlines()[:N_PAIRS]
    en[3] = ""  # an empty sentence gets an empty line
    src.write_text("\n".join(en) + "\n")
    tgt.write_text("\n".join(es) + "\n")
    return src, tgt


def parse(path: Path) -> list[list[tuple[int, int]]]:
    return [
        [tuple(map(int, t.split("-"))) for t in line.split()]
        for line in path.read_text().splitlines()
    ]


def align(model: Path, src: Path, tgt: Path, out: Path, *options: str) -> list:
    assert (
        main(
            [
                "align",
                "--model",
                str(model),
                "--layer",
                "1",
                str(src),
                str(tgt),
                "-o",
                str(out),
                *options,
            ]
        )
        == 0
    )
    return parse(out)


@pytest.mark.parametrize("method", ["ot", "itermax", "argmax", "softmax"])
@pytest.mark.parametrize("encoding", ["tlm", "concat", "separate"])
def test_align_writes_sorted_links_in_range(tiny_model, files, tmp_path, method, encoding):
    src, tgt = files
    options = ("--method", method, "--encoding", encoding)
    lines = align(tiny_model, src, tgt, tmp_path / "out.txt", *options)
    assert len(lines) == N_PAIRS and lines[3] == []
    pairs = zip(src.read_text().splitlines(), tgt.read_text().splitlines())
    for links, (s, t) in zip(lines, pairs):
        assert links == sorted(set(links))
        assert all(0 <= i < len(s.split()) and 0 <= j < len(t.split()) for i, j in links)
    assert sum(map(len, lines)) >= N_PAIRS - 1  # argmax links at least one pair per sentence


def test_a_run_directory_aligns_with_its_model(tiny_model, files, tmp_path):
    """``--model RUN_DIR`` (a directory holding ``config.yaml`` and ``model/``) means the
    run's ``model/``, as it does for ``eval``: the same links as naming ``model/`` itself."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_model, run / "model")
    (run / "config.yaml").write_text("run_dir: run\n")
    src, tgt = files
    direct = align(run / "model", src, tgt, tmp_path / "direct.txt")
    assert align(run, src, tgt, tmp_path / "run.txt") == direct
    assert sum(map(len, direct)) > 0


@pytest.mark.parametrize("method", ["ot", "softmax"])
@pytest.mark.parametrize("encoding", ["tlm", "concat", "separate"])
def test_batched_equals_one_pair_at_a_time(tiny_model, files, tmp_path, encoding, method):
    src, tgt = files
    options = ("--encoding", encoding, "--method", method)
    one = align(tiny_model, src, tgt, tmp_path / "one.txt", *options, "--batch-size", "1")
    many = align(tiny_model, src, tgt, tmp_path / "many.txt", *options, "--batch-size", "4")
    assert one == many


def test_cut_encoder_gives_the_same_links(tiny_model, files):
    src, tgt = (p.read_text().split("\n")[:N_PAIRS] for p in files)
    pairs = [(s.split(), t.split()) for s, t in zip(src, tgt)]
    cut = load_aligner(tiny_model, AlignConfig(), layers=[1])
    full = load_aligner(tiny_model, AlignConfig(), layers=None)
    assert len(cut.model.encoder.layer) == 1 and len(full.model.encoder.layer) == 2
    assert cut.align(pairs, [1]) == full.align(pairs, [1])


def test_language_ids_and_restarting_positions(tiny_model):
    aligner = load_aligner(tiny_model, AlignConfig(encoding="tlm"), [1], languages=("es", "en"))
    offset = aligner.offset
    batch = aligner.collate([(Pieces([7, 8], [0, 1], 2), Pieces([9], [0], 1))])
    cls, sep = aligner.cls_id, aligner.sep_id
    assert batch.inputs["input_ids"].tolist() == [[cls, 7, 8, sep, cls, 9, sep]]
    assert batch.inputs["position_ids"].tolist() == [[offset + p for p in (0, 1, 2, 3, 0, 1, 2)]]
    assert batch.inputs["token_type_ids"].tolist() == [[1, 1, 1, 1, 0, 0, 0]]  # es=1, en=0
    assert batch.src_col.tolist() == [[1, 2]] and batch.tgt_col.tolist() == [[5]]


def test_concat_encoding_is_the_released_aligners_layout(tiny_model):
    """``<s> src </s> tgt </s>`` with continuous positions (the released aligner's
    ``RawPair2WordAlignDataset``); a pair longer than the positions hold is cut, longer side
    first, to one sequence that fits."""
    aligner = load_aligner(tiny_model, AlignConfig(encoding="concat"), [1], languages=("es", "en"))
    batch = aligner.collate([(Pieces([7, 8], [0, 1], 2), Pieces([9], [0], 1))])
    cls, sep, offset = aligner.cls_id, aligner.sep_id, aligner.offset
    assert batch.inputs["input_ids"].tolist() == [[cls, 7, 8, sep, 9, sep]]
    assert batch.inputs["position_ids"].tolist() == [[offset + p for p in range(6)]]
    assert batch.inputs["token_type_ids"].tolist() == [[1, 1, 1, 1, 0, 0]]
    assert batch.src_col.tolist() == [[1, 2]] and batch.tgt_col.tolist() == [[4]]
    budget = aligner.pair_budget
    long = ["x"] * budget
    src, tgt = aligner.pieces([(long, long)])
    assert len(src[0].ids) + len(tgt[0].ids) <= budget and aligner.truncated == 1
    assert "per pair in one sequence" in aligner.truncation_warning()


@pytest.mark.parametrize("method", ["argmax", "itermax"])
def test_a_sentence_aligns_to_itself_on_the_diagonal(tiny_model, files, tmp_path, method):
    src, _ = files
    lines = align(tiny_model, src, src, tmp_path / "self.txt", "--layer", "0", "--method", method)
    words = [len(s.split()) for s in src.read_text().splitlines()]
    assert lines == [[(i, i) for i in range(n)] for n in words]
    # and scores AER 0 against a gold of the same diagonal, 1-based ids (the empty fourth
    # sentence has none, so the rule is given: auto would read the 8 ids by rank)
    gold = tmp_path / "gold.txt"
    gold.write_text(
        "".join(f"{k + 1} {i + 1} {i + 1} S\n" for k, n in enumerate(words) for i in range(n))
    )
    json_out = tmp_path / "scores.json"
    assert (
        main(
            [
                "eval",
                "aer",
                "--pred",
                str(tmp_path / "self.txt"),
                "--gold",
                str(gold),
                "--gold-ids",
                "one",
                "--json",
                str(json_out),
            ]
        )
        == 0
    )
    assert json.loads(json_out.read_text()) == {
        "self.txt": {"aer": 0.0, "precision": 1.0, "recall": 1.0, "f1": 1.0}
    }


def test_eval_aer_sweeps_layers(tiny_model, files, tmp_path, capsys):
    src, tgt = files
    testset = tmp_path / "en-es"
    testset.mkdir()
    (testset / "test.en").write_text(src.read_text())
    (testset / "test.es").write_text(tgt.read_text())
    # gold for the first 2 of 9 sentences, by 0-based line number: the rest have no links
    (testset / "alignv2.txt").write_text("0 1 1 S\n0 2 2 P\n1 1 1 S\n")
    out = tmp_path / "aer.json"
    args = [
        "eval",
        "aer",
        "--model",
        str(tiny_model),
        "--testset",
        str(testset),
        "--gold-ids",
        "zero",
        "--json",
        str(out),
    ]
    assert main([*args, "--layers", "all"]) == 0
    printed = capsys.readouterr().out
    assert "en-es, ot, separate encoding" in printed and "layer 2" in printed
    assert "gold en-es: 9 sentences, ids read 0-based (--gold-ids zero); 7 without" in printed
    scores = json.loads(out.read_text())
    assert list(scores) == ["layer 0", "layer 1", "layer 2"]
    assert all(0.0 <= s["aer"] <= 1.0 for s in scores.values())
    assert main([*args, "--layers", "0,2", "--method", "argmax"]) == 0
    assert list(json.loads(out.read_text())) == ["layer 0", "layer 2"]
    # the predictions of `align` score the same through --pred
    align(
        tiny_model,
        src,
        tgt,
        tmp_path / "pred.txt",
        "--layer",
        "2",
        "--method",
        "argmax",
        "--languages",
        "en-es",
    )
    pred_args = ["--pred", str(tmp_path / "pred.txt"), "--gold", str(testset)]
    assert main(["eval", "aer", *pred_args]) == 2  # auto refuses 2 ids for 9 sentences
    assert main(["eval", "aer", *pred_args, "--gold-ids", "zero"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split()[1:] == printed_row(
        scores_of(out, "layer 2")
    )


def scores_of(path: Path, key: str) -> dict[str, float]:
    return json.loads(path.read_text())[key]


def printed_row(s: dict[str, float]) -> list[str]:
    return [f"{100 * s[k]:.2f}" for k in ("aer", "precision", "recall", "f1")]


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (
            lambda m, s, t, tmp: ["align", "--model", m, s, str(tmp / "short.txt")],
            "differ in line count",
        ),
        (
            lambda m, s, t, tmp: ["align", "--model", m, "--layer", "5", s, t],
            "layer 5 does not exist",
        ),
        (
            lambda m, s, t, tmp: ["align", "--model", str(tmp), s, t],
            "not a save_pretrained directory",
        ),
        (lambda m, s, t, tmp: ["align", "--model", m, "--batch-size", "0", s, t], "batch_size=0"),
        (lambda m, s, t, tmp: ["eval", "aer", "--pred", s, "--gold", str(tmp)], "must be named"),
        (lambda m, s, t, tmp: ["eval", "aer", "--model", m], "--model needs --testset"),
    ],
)
def test_errors_are_one_line(tiny_model, files, tmp_path, capsys, make_args, message):
    (tmp_path / "short.txt").write_text("one line\n")
    src, tgt = files
    assert main(make_args(str(tiny_model), str(src), str(tgt), tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("crossalign: error: ") and message in err[-1]


BACKBONE = Path(__file__).resolve().parents[2] / "runs" / "backbone-e5-small"
GOLD = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "word-alignment-gold"


@pytest.mark.slow
@pytest.mark.skipif(not BACKBONE.is_dir(), reason=f"no exported backbone at {BACKBONE}")
@pytest.mark.skipif(not GOLD.is_dir(), reason=f"no gold test sets at {GOLD}")
def test_pretrained_backbone_matches_simalign_end_to_end():
    """Same model, layer and pairs: crossalign's batched itermax/argmax give SimAlign's links."""
    simalign = pytest.importorskip("simalign")
    from crossalign.evals.gold import read_testset

    ts = read_testset(GOLD / "de-en")
    pairs = list(zip(ts.src, ts.tgt))[:24]
    theirs = simalign.SentenceAligner(
        model=str(BACKBONE), token_type="bpe", matching_methods="ai", layer=8
    )
    expected = [theirs.get_word_aligns(s, t) for s, t in pairs]
    for method, key in (("itermax", "itermax"), ("argmax", "inter")):
        ours = load_aligner(BACKBONE, AlignConfig(method=method, batch_size=8), [8], device="cpu")
        assert ours.align(pairs, [8])[8] == [sorted(e[key]) for e in expected]


def test_renamed_options_say_their_new_names(tiny_model, files, capsys):
    """The options renamed when ``ot`` became the released aligner: the error names the new
    name instead of the nearest choice."""
    from crossalign.errors import CrossalignError

    src, tgt = (str(p) for p in files)
    base = ["align", "--model", str(tiny_model), src, tgt]
    for extra, said in (
        (["--ot-filter", "iterative"], "('iterative' is now called 'eq9-literal')"),
        (["--joint"], "('--joint' is now called '--encoding tlm')"),
        (["--ot-filter", "itermx"], "did you mean 'itermax'"),  # any other typo
    ):
        with pytest.raises(SystemExit) as stop:
            main([*base, *extra])
        assert stop.value.code == 2 and said in capsys.readouterr().err
    with pytest.raises(CrossalignError, match="'iterative' is now called 'eq9-literal'"):
        AlignConfig(method="ot", ot_filter="iterative")
