"""Bad input files, over-long lines and misused lexicon/cooc options: one-line errors, never a
traceback; nothing silently read as text that is not."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from crossalign.align.aligner import AlignConfig, load_aligner
from crossalign.align.words import to_pieces
from crossalign.cli import main
from crossalign.data.inputs import PairInput, TextInput
from crossalign.data.readers import read_hf_text, read_parallel, read_text
from crossalign.data.store.prepare import Sources, tokenizer_sample
from crossalign.data.store.streaming import StreamingText
from crossalign.errors import CrossalignError
from tests.integration.test_align_cli import tiny_model  # noqa: F401
from tests.unit.test_corpus import tiny_corpus

from .conftest import FIXTURES


def _stored(path: Path) -> list[str]:
    """Lines as the tokenized store and tokenizer sampling read them (line ranges)."""
    text = TextInput(path=str(path))
    text.index(100)
    return text.read(0, 100)


def _tsv(path: Path) -> list[tuple[str, str]]:
    """Pairs of a TSV file as the store reads them."""
    pairs = PairInput(str(path))
    pairs.index(100)
    return pairs.read(0, 100)


READERS: dict[str, Callable[[Path], object]] = {
    "read_text": read_text,
    "store": _stored,
    "store-tsv": _tsv,
    "read_parallel": read_parallel,
}


def _directory(tmp_path: Path) -> Path:
    (tmp_path / "text").mkdir()
    return tmp_path / "text"


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "b.txt").symlink_to(tmp_path / "a.txt")
    return tmp_path / "a.txt"


def _bytes(data: bytes) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        (tmp_path / "text.txt").write_bytes(data)
        return tmp_path / "text.txt"

    return make


BAD_FILES = {
    "directory": (_directory, r"text is a directory; give a file$"),
    "symlink-loop": (_loop, r"a\.txt: symlink loop"),
    "utf-16": (
        _bytes("hello\tworld\n".encode("utf-16")),
        r"text\.txt is UTF-16 \(byte-order mark\); convert it to UTF-8, e\.g\. iconv -f UTF-16 "
        r"-t UTF-8",
    ),
    "utf-16-be": (
        _bytes(b"\xfe\xff" + "hello\tworld\n".encode("utf-16-be")),
        r"text\.txt is UTF-16 \(byte-order mark\)",
    ),
    "utf-32": (
        _bytes("hello\tworld\n".encode("utf-32")),
        r"text\.txt is UTF-32 \(byte-order mark\); convert it to UTF-8, e\.g\. iconv -f UTF-32",
    ),
    "nul": (_bytes(b"hello\tworld\nwo\x00rld\tx\n"), r"text\.txt:2: contains a NUL byte"),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_file_is_one_line_naming_it(tmp_path, case, reader):
    make, message = BAD_FILES[case]
    path = make(tmp_path)
    spec = [path, path] if reader == "read_parallel" else path
    with pytest.raises(CrossalignError, match=message) as err:
        READERS[reader](spec)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["directory", "symlink-loop", "utf-16", "nul"])
def test_align_cli_reports_a_bad_file(tmp_path, capsys, case):
    make, message = BAD_FILES[case]
    path = make(tmp_path)
    assert main(["align", "--model", str(tmp_path / "model"), str(path), str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crossalign: error: ") and "Traceback" not in err
    assert "\n" not in err
    assert re.search(message, err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file(tmp_path, capsys):
    path = tmp_path / "secret.txt"
    path.write_text("hello\n")
    path.chmod(0)
    assert main(["align", "--model", str(tmp_path / "model"), str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: permission denied; make the file readable" in err
    assert "Traceback" not in err


def test_permission_error_is_one_line(tmp_path, monkeypatch):
    """The same as ``test_unreadable_file``, simulated so it runs as root too."""
    path = tmp_path / "secret.txt"
    path.write_text("hello\n")

    def refuse(file, mode="r", *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr("crossalign.data.lines.open", refuse, raising=False)
    for reader in (read_text, _stored):
        with pytest.raises(CrossalignError, match=r"secret\.txt: permission denied; make"):
            reader(path)


@pytest.mark.parametrize(
    "reader", [read_text, _stored, lambda p: [s for s, _ in _tsv(p)]], ids=["read", "store", "tsv"]
)
def test_utf8_byte_order_mark_is_not_text(tmp_path, reader):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffhello\tworld\nbye\tadiós\n".encode())
    assert reader(path)[0].split("\t")[0] == "hello"


def test_byte_order_mark_stays_out_of_the_tokenizer_sample(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffhello world\nbye\n".encode())
    sample = tokenizer_sample(Sources(mono={"en": str(path)}), alpha=0.3, total=10, seed=0)
    assert "hello world" in sample and not any("\ufeff" in t for t in sample)


def test_byte_order_mark_of_a_text_dataset_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffhello world\nbye\n".encode())
    assert read_hf_text(str(path)) == ["hello world", "bye"]

    class Words:
        """A tokenizer stand-in recording what it is given."""

        cls_token_id, sep_token_id = 0, 1

        def __init__(self) -> None:
            self.seen: list[str] = []

        def __call__(self, text: str, add_special_tokens: bool) -> dict[str, list[int]]:
            self.seen.append(text)
            return {"input_ids": [2] * len(text.split())}

    words = Words()
    spec = {"dataset": str(path), "streaming": True, "size": 2}
    StreamingText(spec, "data.mono.en", words, 8)
    assert words.seen[0] == "hello world"


def test_align_truncates_a_50000_word_line(tiny_model, tmp_path, capsys):  # noqa: F811
    words = (FIXTURES / "en.txt").read_text().split()
    long_line = " ".join(words[i % len(words)] for i in range(50_000))
    src, tgt = tmp_path / "src.en", tmp_path / "tgt.es"
    src.write_text(f"hello world\n{long_line}\n")
    tgt.write_text(f"hola mundo\n{long_line}\n")
    # the word matrices of a batch are bounded by the positions, not the line's words
    aligner = load_aligner(tiny_model, AlignConfig(), [1], None, "cpu")
    pieces = to_pieces(aligner.tokenizer, [long_line.split()])[0].truncated(aligner.max_pieces)
    assert aligner.collate([(pieces, pieces)]).n_src_words <= aligner.max_pieces
    out = tmp_path / "links.txt"
    args = ["align", "--model", str(tiny_model), "--layer", "1", str(src), str(tgt), "-o", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: 1 of 2 pairs had a sentence longer than the model's {aligner.max_pieces} "
        f"subwords; it was truncated" in err
    )
    lines = out.read_text().splitlines()
    assert len(lines) == 2
    links = [tuple(map(int, x.split("-"))) for x in lines[1].split()]
    assert links and all(i < aligner.max_pieces and j < aligner.max_pieces for i, j in links)


def test_eval_aer_warns_about_truncated_pairs(tiny_model, tmp_path, capsys):  # noqa: F811
    testset = tmp_path / "en-es"
    testset.mkdir()
    long_line = " ".join(["hello"] * 500)
    (testset / "test.en").write_text(f"hello world\n{long_line}\n")
    (testset / "test.es").write_text(f"hola mundo\n{long_line}\n")
    (testset / "alignv2.txt").write_text("0 1 1 S\n1 400 400 S\n")
    args = ["eval", "aer", "--model", str(tiny_model), "--testset", str(testset), "--layers", "1"]
    assert main([*args, "--gold-ids", "zero"]) == 0
    assert "warning: 1 of 2 pairs had a sentence longer than" in capsys.readouterr().err


def test_induce_dict_out_is_a_directory(tmp_path, capsys):
    (tmp_path / "dicts").mkdir()
    text = str(FIXTURES / "en.txt")
    args = ["induce-dict", "--model", str(tmp_path / "model"), "--src", "en", "--tgt", "es"]
    args += ["--src-text", text, "--tgt-text", text, "--out", str(tmp_path / "dicts")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'dicts'} is a directory; give a file path, e.g. " in err
    assert "Traceback" not in err and "\n" not in err.strip()


@pytest.mark.parametrize("command", ["induce-dict", "eval induced-dict"])
def test_same_source_and_target_language(tiny_model, tmp_path, capsys, command):  # noqa: F811
    text = str(FIXTURES / "en.txt")
    args = [*command.split(), "--model", str(tiny_model), "--src", "en", "--tgt", "en"]
    args += ["--src-text", text, "--tgt-text", text]
    if command == "induce-dict":
        args += ["--out", str(tmp_path / "d.txt")]
    else:
        (tmp_path / "gold.txt").write_text("the el\n")
        args += ["--dict", str(tmp_path / "gold.txt")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--src and --tgt are the same language (en)" in err
    assert "threshold" not in err


@pytest.mark.parametrize("languages", [[], ["--languages", "en,de"]])
def test_cooc_build_on_an_empty_corpus_names_its_files(tmp_path, capsys, languages):
    corpus = tmp_path / "corpus"
    tiny_corpus(corpus)
    for f in corpus.glob("*/train.*"):
        f.write_text("")
    args = ["cooc", "build", "--model", str(tmp_path / "model"), "--corpus", str(corpus)]
    assert main([*args, *languages, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"corpus {corpus} has no training text: {corpus / 'en-de' / 'train.en'}" in err
    assert "rebuild the corpus" in err and "give --corpus" not in err
    assert ("train.zh-CN" in err) == (not languages)
