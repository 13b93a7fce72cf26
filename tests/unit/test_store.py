"""The tokenized corpus store against independent oracles: the in-memory readers
(``read_mono``, ``read_parallel``), ``pack_blocks``, ``PairArray`` and the fast tokenizer's
``word_ids``; whatever the chunking, sharding or number of processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from crossalign.config import TokenizerConfig
from crossalign.data import inputs
from crossalign.data.readers import read_mono, read_parallel
from crossalign.data.store import prepare
from crossalign.data.store.prepare import (
    Sources,
    cached_store,
    store_key,
    store_sources,
    tokenizer_sample,
    training_data,
)
from crossalign.data.store.token_store import build_store, dtype_for, open_store
from crossalign.data.tokenizer import train_tokenizer
from crossalign.errors import CrossalignError
from crossalign.lexicon.vocab import token_counts
from tests.oracles.batching import PairArray, pack_blocks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
EN, ES = FIXTURES / "en.txt", FIXTURES / "es.txt"
EN_LINES = EN.read_text(encoding="utf-8").splitlines()
ES_LINES = ES.read_text(encoding="utf-8").splitlines()
LENGTHS = (8, 16, 33)
BIG = 100_000

# Blank lines, a line of spaces, CRLF, duplicates, non-ASCII, three blank lines that fill a
# whole 3-line chunk (lines 7-9: an empty piece), and a last line without a newline.
MESSY = (
    "the cat sleeps on the warm bed\n"
    "\n"
    "   \n"
    "  a dog runs\t in the park  \r\n"
    "el niño come pan\n"
    "the cat sleeps on the warm bed\n"
    "\n"
    "\n"
    "\n"
    "Ünïcødé: naïve café — 日本語 テキスト 🙂\r\n"
    "\t\n"
    "x\n"
    "the children play with a red ball\n"
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ\n"
    "a\u2028b inside one line\n"
    "\u00a0nbsp around\u00a0\n"
    "my mother reads a long book\r\n"
    "we eat bread and cheese at noon"
)
MESSY2 = (
    "x\n"
    "la casa es grande\r\n"
    "the cat sleeps on the warm bed\n"
    "\n"
    "la casa es grande\n"
    "   the children play with a red ball   \n"
    "mi madre lee un libro largo\n"
    "naïve ☃ snowman\n"
    "a dog runs in the green park"
)
# line-aligned; some pairs empty on one side (dropped), CRLF on one side, no final newline
SRC = ["hello world", "", "only source", "  spaced  \r", "x", "café", "dup", "dup", " \t "]
TGT = ["hola mundo", "sin fuente", "", "espaciado\r", "y", "café con leche", "dup", "dup", "z"]
TSV = (
    "a b\tc d\n"
    "\n"
    "  \n"
    "x\t\n"
    "\ty\n"
    "one\ttwo\tthree\r\n"
    "  sp  \t  sp2 \n"
    + "".join(f"{e}\t{s}\n" for e, s in zip(EN_LINES[:-1], ES_LINES[:-1]))
    + f"{EN_LINES[-1]}\t{ES_LINES[-1]}"
)


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer({"en": EN_LINES, "es": ES_LINES}, TokenizerConfig(vocab_size=200))


@pytest.fixture(scope="module")
def tok_other():
    return train_tokenizer({"en": EN_LINES, "es": ES_LINES}, TokenizerConfig(vocab_size=150))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("texts")
    out = {"en": str(EN), "es": str(ES)}
    contents = {
        "messy": MESSY,
        "messy2": MESSY2,
        "src": "\n".join(SRC + EN_LINES) + "\n",
        "tgt": "\n".join(TGT + ES_LINES),  # no final newline: still as many lines
        "tsv": TSV,
    }
    for name, text in contents.items():
        (d / f"{name}.txt").write_bytes(text.encode("utf-8"))
        out[name] = str(d / f"{name}.txt")
    return out


def all_sources(files: dict[str, str]) -> Sources:
    """Every form of source at once: a file, messy text, a de-duplicated list, two-file and
    TSV pairs, held-out sets."""
    return Sources(
        mono={
            "en": files["en"],
            "es": files["messy"],
            "de": [files["messy"], files["messy2"], files["en"]],
        },
        parallel={"en-es": [files["src"], files["tgt"]], "en-fr": files["tsv"]},
        valid_mono={"en": files["messy2"], "es": [files["messy"], files["messy2"]]},
        valid_parallel={"en-es": files["tsv"]},
    )


def build(sources: Sources, tok, out: Path, **kw):
    """Build a store (key ``test``) and open it."""
    kw.setdefault("chunk_lines", 3)
    build_store(store_sources(sources), tok, out, "test", progress=False, **kw)
    return open_store(out)


def specials(tok) -> tuple[int, int, int]:
    return tok.cls_token_id, tok.sep_token_id, tok.pad_token_id


def oracle_blocks(tok, spec, length: int) -> np.ndarray:
    ids = tok(read_mono(spec), add_special_tokens=False)["input_ids"]
    return pack_blocks(ids, length, *specials(tok))


def oracle_pairs(tok, spec) -> PairArray:
    pairs = read_parallel(spec)
    src = tok([s for s, _ in pairs], add_special_tokens=False)["input_ids"]
    tgt = tok([t for _, t in pairs], add_special_tokens=False)["input_ids"]
    return PairArray.from_lists(src, tgt)


def oracle_starts(tok, lines: list[str]) -> list[list[int]]:
    """Per sentence, 1 where the word id changes (and at the first token)."""
    enc = tok(lines, add_special_tokens=False)
    out = []
    for i in range(len(lines)):
        w = enc.word_ids(i)
        out.append([int(j == 0 or w[j] != w[j - 1]) for j in range(len(w))])
    return out


def every_block(blocks) -> np.ndarray:
    return blocks[np.arange(len(blocks))]


def contents(store, tok, length: int = 16) -> dict:
    """Everything a run reads from a store, as plain lists."""
    data = training_data(store, tok, length, 10**9)
    out = {}
    for part in ("mono", "valid_mono"):
        for name, blocks in getattr(data, part).items():
            idx = np.arange(len(blocks))
            out[f"{part}/{name}"] = (blocks[idx].tolist(), blocks.word_starts(idx).tolist())
    for part in ("parallel", "valid_parallel"):
        for name, pairs in getattr(data, part).items():
            out[f"{part}/{name}"] = [
                [a.tolist() for a in (*pairs.pair(k), *pairs.word_starts(k))]
                for k in range(len(pairs))
            ]
    return out


# ---------------------------------------------------------------------------------------------
# Contents against the in-memory oracles


@pytest.mark.parametrize("chunk_lines", [3, BIG])
def test_blocks_equal_pack_blocks(files, tok, tmp_path, chunk_lines):
    sources = all_sources(files)
    store = build(sources, tok, tmp_path / "s", chunk_lines=chunk_lines)
    assert set(store.mono) == {"en", "es", "de"}
    for length in (*LENGTHS, *range(8, 41)):
        data = training_data(store, tok, length, 10**9)
        for part in ("mono", "valid_mono"):
            for name, spec in getattr(sources, part).items():
                blocks = getattr(data, part)[name]
                want = oracle_blocks(tok, spec, length)
                got = every_block(blocks)
                assert got.dtype == np.int32 and got.shape == want.shape, (part, name, length)
                np.testing.assert_array_equal(got, want, err_msg=f"{part}/{name} L={length}")
    # any order, with repeats
    blocks = training_data(store, tok, 16, 10**9).mono["de"]
    want = oracle_blocks(tok, sources.mono["de"], 16)
    idx = np.random.default_rng(0).integers(0, len(blocks), 40)
    np.testing.assert_array_equal(blocks[idx], want[idx])
    with pytest.raises(IndexError):
        blocks[np.array([len(blocks)])]


def test_list_of_files_drops_duplicates_across_files(files, tok, tmp_path):
    spec = [files["messy"], files["messy2"], files["en"]]
    store = build(Sources(mono={"de": spec}), tok, tmp_path / "s")
    lines = read_mono(spec)
    assert (
        len(lines)
        == len(set(lines))
        < len(read_mono(files["messy"])) + len(read_mono(files["messy2"])) + len(EN_LINES)
    )
    sentences = list(store.mono["de"].iter_sentences())
    want = tok(lines, add_special_tokens=False)["input_ids"]
    assert [s.tolist() for s in sentences] == want


@pytest.mark.parametrize("chunk_lines", [3, BIG])
def test_pairs_equal_pair_array(files, tok, tmp_path, chunk_lines):
    sources = all_sources(files)
    store = build(sources, tok, tmp_path / "s", chunk_lines=chunk_lines)
    data = training_data(store, tok, 16, 10**9)
    for part in ("parallel", "valid_parallel"):
        for name, spec in getattr(sources, part).items():
            pairs, want = getattr(data, part)[name], oracle_pairs(tok, spec)
            assert len(pairs) == len(want) == len(read_parallel(spec)), (part, name)
            for k in range(len(want)):
                src, tgt = pairs.pair(k)
                assert src.dtype == tgt.dtype == np.int32
                assert src.tolist() == want.pair(k)[0].tolist(), (part, name, k)
                assert tgt.tolist() == want.pair(k)[1].tolist(), (part, name, k)
            with pytest.raises(IndexError):
                pairs.pair(len(want))


@pytest.mark.parametrize("chunk_lines", [3, BIG])
def test_word_starts_follow_word_ids(files, tok, tmp_path, chunk_lines):
    sources = all_sources(files)
    store = build(sources, tok, tmp_path / "s", chunk_lines=chunk_lines)
    for name, spec in sources.mono.items():
        flags = oracle_starts(tok, read_mono(spec))
        stream = [f for s in flags for f in (*s, 0)]  # a separator is no word start
        text = store.mono[name]
        assert text.slice(0, text.total, "starts").tolist() == stream, name
        for length in LENGTHS:
            blocks = training_data(store, tok, length, 10**9).mono[name]
            body, n = length - 2, len(oracle_blocks(tok, spec, length))
            want = np.zeros((n, length), dtype=np.uint8)
            for k in range(n):
                seg = stream[k * body : (k + 1) * body]
                want[k, 1 : 1 + len(seg)] = seg
            got = blocks.word_starts(np.arange(len(blocks)))
            assert got.dtype == np.uint8
            np.testing.assert_array_equal(got, want, err_msg=f"{name} L={length}")
    for name, spec in sources.parallel.items():
        pairs = read_parallel(spec)
        want_src = oracle_starts(tok, [s for s, _ in pairs])
        want_tgt = oracle_starts(tok, [t for _, t in pairs])
        for k in range(len(pairs)):
            src, tgt = store.parallel[name].word_starts(k)
            assert src.tolist() == want_src[k] and tgt.tolist() == want_tgt[k], (name, k)


def test_held_out_caps_keep_the_first(files, tok, tmp_path):
    sources = all_sources(files)
    store = build(sources, tok, tmp_path / "s")
    data = training_data(store, tok, 8, 3)
    for name, spec in sources.valid_mono.items():
        want = oracle_blocks(tok, spec, 8)
        assert len(want) > 3
        assert len(data.valid_mono[name]) == 3
        np.testing.assert_array_equal(every_block(data.valid_mono[name]), want[:3])
    want = oracle_pairs(tok, sources.valid_parallel["en-es"])
    pairs = data.valid_parallel["en-es"]
    assert len(pairs) == 3
    for k in range(3):
        assert [a.tolist() for a in pairs.pair(k)] == [a.tolist() for a in want.pair(k)]
    with pytest.raises(IndexError):
        pairs.pair(3)
    # the training parts are never capped; a cap above the size keeps everything
    assert len(data.mono["de"]) == len(oracle_blocks(tok, sources.mono["de"], 8))
    assert len(data.parallel["en-fr"]) == len(oracle_pairs(tok, sources.parallel["en-fr"]))
    roomy = training_data(store, tok, 8, 10**6)
    assert len(roomy.valid_mono["en"]) == len(oracle_blocks(tok, sources.valid_mono["en"], 8))
    assert len(roomy.valid_parallel["en-es"]) == len(want)


def test_token_counts_equal_vocab_token_counts(files, tok, tmp_path):
    sources = all_sources(files)
    store = build(sources, tok, tmp_path / "s")
    for name, spec in sources.mono.items():
        lines = read_mono(spec)
        for n in (1, 2, 5, 7, len(lines), 10**6):
            for size in (len(tok), 50):
                got = store.mono[name].token_counts(size, n)
                want = token_counts(tok, lines[:n], size)
                assert got.dtype == np.int64 and got.shape == (size,)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} n={n} V={size}")


def test_token_counts_cover_the_whole_store_in_chunks(files, tok, tmp_path):
    """Without ``max_sentences`` every sentence of every piece counts, whatever the chunk."""
    sources = all_sources(files)
    store = build(sources, tok, tmp_path / "s", chunk_lines=2)
    for name, spec in sources.mono.items():
        lines = read_mono(spec)
        text = store.mono[name]
        assert len(text.pieces.names) > 1 and text.sentences == len(lines) > 3
        naive = Counter(
            t for line in lines for t in tok(line, add_special_tokens=False)["input_ids"]
        )
        want = np.array([naive[t] for t in range(len(tok))], dtype=np.int64)
        for chunk in (1, 3, 1 << 24):
            np.testing.assert_array_equal(text.token_counts(len(tok), chunk=chunk), want)
            capped = text.token_counts(len(tok), 3, chunk=chunk)  # a cap below the text
            np.testing.assert_array_equal(capped, token_counts(tok, lines[:3], len(tok)))
        assert not np.array_equal(capped, want)


def test_hf_dataset_equals_text_file(tmp_path, tok):
    pytest.importorskip("datasets")
    lines = MESSY.replace("\r\n", "\n").split("\n")
    text = tmp_path / "same.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    jsonl = tmp_path / "same.jsonl"
    rows = [{"text": t, "alt": t.upper()} for t in lines]
    rows.insert(4, {"text": None, "alt": "NULL"})  # a missing value is skipped, as a blank line
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    spec = {"dataset": str(jsonl)}
    alt = {"dataset": str(jsonl), "column": "alt"}
    store = build(Sources(mono={"en": spec, "es": str(text), "de": alt}), tok, tmp_path / "s")
    assert read_mono(spec) == read_mono(str(text))
    for length in LENGTHS:
        data = training_data(store, tok, length, 10**9)
        np.testing.assert_array_equal(every_block(data.mono["en"]), every_block(data.mono["es"]))
        np.testing.assert_array_equal(
            every_block(data.mono["en"]), oracle_blocks(tok, spec, length)
        )
        np.testing.assert_array_equal(every_block(data.mono["de"]), oracle_blocks(tok, alt, length))


# ---------------------------------------------------------------------------------------------
# The same store however it is built


def test_chunking_does_not_change_the_store(files, tok, tmp_path, monkeypatch):
    sources = all_sources(files)
    whole = contents(build(sources, tok, tmp_path / "whole", chunk_lines=BIG), tok)
    assert contents(build(sources, tok, tmp_path / "c3", chunk_lines=3), tok) == whole
    assert contents(build(sources, tok, tmp_path / "c1", chunk_lines=1), tok) == whole
    # line offsets found by reading the files in blocks of a few bytes
    monkeypatch.setattr(inputs, "BLOCK", 7)
    assert contents(build(sources, tok, tmp_path / "b7", chunk_lines=2), tok) == whole


def test_shards_build_the_same_store(files, tok, tmp_path):
    sources = all_sources(files)
    whole = contents(build(sources, tok, tmp_path / "whole"), tok)
    out = tmp_path / "sharded"
    listed = store_sources(sources)
    for k in (2, 0):
        build_store(listed, tok, out, "test", shard=(k, 3), chunk_lines=3, progress=False)
    with pytest.raises(CrossalignError, match="incomplete") as err:
        open_store(out)
    assert "--shard 1/3" in str(err.value)
    assert "--shard 0/3" not in str(err.value) and "--shard 2/3" not in str(err.value)
    build_store(listed, tok, out, "test", shard=(1, 3), chunk_lines=3, progress=False)
    assert contents(open_store(out), tok) == whole
    # each shard wrote only its own pieces, and together all of them
    names = [sorted(json.loads((out / "shards" / f"shard-{k}-of-3.json").read_text())["pieces"])
             for k in range(3)]  # fmt: skip
    assert sum(map(len, names)) == len(set().union(*names)) > 3
    with pytest.raises(CrossalignError, match="holds another store"):
        build_store(listed, tok, out, "test", shard=(0, 2), chunk_lines=3, progress=False)
    with pytest.raises(CrossalignError, match="holds another store"):
        build_store(listed, tok, out, "other", shard=(0, 3), chunk_lines=3, progress=False)
    with pytest.raises(CrossalignError, match="--shard 3/3"):
        build_store(listed, tok, tmp_path / "bad", "test", shard=(3, 3), progress=False)


def test_two_processes_build_the_same_store(files, tok, tmp_path):
    sources = all_sources(files)
    one = contents(build(sources, tok, tmp_path / "one", num_proc=1), tok)
    assert contents(build(sources, tok, tmp_path / "two", num_proc=2), tok) == one


def test_interrupted_build_resumes(files, tok, tmp_path):
    sources = all_sources(files)
    out = tmp_path / "s"
    whole = contents(build(sources, tok, out), tok)
    # as if stopped part-way: shard manifest and some pieces not yet written
    (out / "shards" / "shard-0-of-1.json").unlink()
    pieces = sorted(p for p in (out / "pieces").glob("*/*/*") if p.is_dir())
    for piece in pieces[::2]:
        for f in piece.iterdir():
            f.unlink()
        piece.rmdir()
    with pytest.raises(CrossalignError, match="--shard 0/1"):
        open_store(out)
    assert contents(build(sources, tok, out), tok) == whole


# ---------------------------------------------------------------------------------------------
# The cache


def mtimes(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in path.rglob("*")}


def test_cached_store_is_found_not_rebuilt(tmp_path, tok, monkeypatch):
    src = tmp_path / "en.txt"
    src.write_text(EN.read_text(encoding="utf-8"), encoding="utf-8")
    sources = Sources(mono={"en": str(src)}, parallel={"en-es": [str(src), str(ES)]})
    cache = tmp_path / "cache"
    path = cached_store(sources, tok, cache, progress=False)
    assert path.parent == cache and path.name == store_key(store_sources(sources), tok)
    before = mtimes(path)
    assert any(name.endswith("ids.npy") for name in before)

    def rebuilt(*args, **kwargs):
        raise AssertionError("cached_store built the store again")

    with monkeypatch.context() as m:
        m.setattr(prepare, "build_store", rebuilt)
        assert cached_store(sources, tok, cache, progress=False) == path
    assert mtimes(path) == before
    # the default cache directory follows CROSSALIGN_CACHE
    monkeypatch.setenv("CROSSALIGN_CACHE", str(tmp_path / "env"))
    assert cached_store(sources, tok, progress=False) == tmp_path / "env" / "stores" / path.name


def test_changed_source_or_tokenizer_gives_a_new_store(tmp_path, tok, tok_other):
    src = tmp_path / "en.txt"
    src.write_text(EN.read_text(encoding="utf-8"), encoding="utf-8")
    sources = Sources(mono={"en": str(src)})
    cache = tmp_path / "cache"
    first = cached_store(sources, tok, cache, progress=False)
    # touched: same content, another modification time
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))
    touched = cached_store(sources, tok, cache, progress=False)
    assert touched != first
    # new content: the new store holds it
    src.write_text("a brand new line\n" + EN.read_text(encoding="utf-8"), encoding="utf-8")
    changed = cached_store(sources, tok, cache, progress=False)
    assert changed not in (first, touched)
    blocks = training_data(open_store(changed), tok, 16, 10).mono["en"]
    np.testing.assert_array_equal(every_block(blocks), oracle_blocks(tok, str(src), 16))
    # another tokenizer: another key, and a store of one tokenizer refuses the other
    other = cached_store(sources, tok_other, cache, progress=False)
    assert other not in (first, touched, changed)
    assert store_key(store_sources(sources), tok) != store_key(store_sources(sources), tok_other)
    with pytest.raises(CrossalignError, match="tokenized with another tokenizer"):
        training_data(open_store(other), tok, 16, 10)
    with pytest.raises(CrossalignError, match="tokenized with another tokenizer"):
        training_data(open_store(changed), tok_other, 16, 10)
    blocks = training_data(open_store(other), tok_other, 16, 10).mono["en"]
    np.testing.assert_array_equal(every_block(blocks), oracle_blocks(tok_other, str(src), 16))


# ---------------------------------------------------------------------------------------------
# Errors


def reader_error(fn, *args) -> str:
    with pytest.raises(CrossalignError) as err:
        fn(*args)
    return str(err.value)


def latin1_file(path: Path) -> str:
    """20 lines; line 14 (in the fifth chunk of 3 lines) is not UTF-8."""
    lines = [f"line {i}".encode() for i in range(20)]
    lines[13] = "caf\xe9 latin-1".encode("latin-1")
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


def test_non_utf8_line_names_file_and_line(tmp_path, tok):
    bad = latin1_file(tmp_path / "bad.txt")
    want = reader_error(read_mono, bad)
    assert "bad.txt:14: not UTF-8" in want
    for i, spec in enumerate((bad, [str(EN), bad])):
        with pytest.raises(CrossalignError) as err:
            build(Sources(mono={"en": spec}), tok, tmp_path / f"s{i}")
        assert str(err.value) == want
    # the target side of a parallel corpus
    src = tmp_path / "src.txt"
    src.write_text("\n".join(EN_LINES[:20]) + "\n", encoding="utf-8")
    with pytest.raises(CrossalignError) as err:
        build(Sources(parallel={"en-es": [str(src), bad]}), tok, tmp_path / "p")
    assert str(err.value) == reader_error(read_parallel, [str(src), bad]) == want


WORKER_ERROR = """
import faulthandler
import sys
from pathlib import Path
from crossalign.data.store.prepare import Sources, store_sources
from crossalign.data.store.token_store import build_store
from crossalign.data.tokenizer import load_tokenizer
from crossalign.errors import CrossalignError

tok, bad, out, want, times = sys.argv[1:]
tok = load_tokenizer(tok)
for i in range(int(times)):
    # a build that makes no progress for 30 s is stuck: print where, and exit
    faulthandler.dump_traceback_later(30, exit=True)
    try:
        build_store(store_sources(Sources(mono={"en": bad})), tok, Path(out) / str(i), "k",
                    num_proc=2, chunk_lines=3, progress=False)
    except CrossalignError as e:
        assert str(e) == want, str(e)
    else:
        sys.exit("no error")
    faulthandler.cancel_dump_traceback_later()
    print(i, flush=True)
"""


def test_error_in_a_worker_process_is_reported(tmp_path, tok):
    """With num_proc=2 the error of a chunk comes back from a worker process: the build must
    stop with it every time. A hang is a race (about 1 build in 100-300 here), so two child
    processes repeat the build side by side; a stuck one exits with its stack."""
    bad = latin1_file(tmp_path / "bad.txt")
    want = reader_error(read_mono, bad)
    tok.save_pretrained(tmp_path / "tok")
    times = 50
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}

    def cmd(i: int) -> list[str]:
        args = [str(tmp_path / "tok"), bad, str(tmp_path / f"s{i}"), want, str(times)]
        return [sys.executable, "-c", WORKER_ERROR, *args]

    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": env}
    children = [subprocess.Popen(cmd(i), **pipes) for i in range(2)]
    results = [child.communicate(timeout=600) for child in children]
    for child, (stdout, stderr) in zip(children, results):
        done = len(stdout.splitlines())
        assert "Timeout" not in stderr, (
            f"build_store(num_proc=2) hung after a worker raised (build {done + 1} of {times}):\n"
            + stderr[-3000:]
        )
        assert child.returncode == 0 and done == times, stderr[-2000:]


def test_parallel_files_of_different_lengths(tmp_path, tok):
    short = tmp_path / "short.txt"
    short.write_text("\n".join(ES_LINES[:-1]) + "\n", encoding="utf-8")
    spec = [str(EN), str(short)]
    with pytest.raises(CrossalignError, match="differ in line count") as err:
        build(Sources(parallel={"en-es": spec}), tok, tmp_path / "s")
    assert str(err.value) == reader_error(read_parallel, spec)
    assert "(24 lines)" in str(err.value) and "(23 lines)" in str(err.value)


def test_tsv_line_without_tab(tmp_path, tok):
    tsv = tmp_path / "pairs.tsv"
    rows = [f"{e}\t{s}" for e, s in zip(EN_LINES, ES_LINES)]
    rows[10] = "no tab on this line"  # line 11: in the fourth chunk of 3 lines
    tsv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(CrossalignError) as err:
        build(Sources(parallel={"en-es": str(tsv)}), tok, tmp_path / "s")
    assert "pairs.tsv:11: no tab" in str(err.value)
    assert str(err.value) == reader_error(read_parallel, str(tsv))


@pytest.mark.parametrize("text", ["", " \n\n\t\r\n"], ids=["empty", "blank"])
def test_empty_file(tmp_path, tok, text):
    empty = tmp_path / "empty.txt"
    empty.write_text(text, encoding="utf-8")
    reader_error(read_mono, str(empty))  # the in-memory reader refuses it too
    for i, spec in enumerate((str(empty), [str(EN), str(empty)])):
        with pytest.raises(CrossalignError, match=r"empty\.txt: no text"):
            build(Sources(mono={"en": spec}), tok, tmp_path / f"s{i}")
    with pytest.raises(CrossalignError, match=r"empty\.txt"):
        open_store(cached_store(Sources(mono={"en": str(empty)}), tok, tmp_path, progress=False))
    reader_error(read_parallel, [str(empty), str(empty)])
    with pytest.raises(CrossalignError, match=r"empty\.txt"):
        build(Sources(parallel={"en-es": [str(empty), str(empty)]}), tok, tmp_path / "p")


def test_open_store_on_a_directory_that_is_not_one(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    with pytest.raises(CrossalignError, match="is not a token store"):
        open_store(tmp_path / "plain")
    with pytest.raises(CrossalignError, match="is not a token store"):
        open_store(tmp_path / "missing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "store.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CrossalignError, match="token store"):
        open_store(tmp_path / "other")


def test_id_dtype():
    assert dtype_for(200) == np.uint16 and dtype_for(1 << 16) == np.uint16
    assert dtype_for((1 << 16) + 1) == np.uint32 and dtype_for(250_002) == np.uint32


# ---------------------------------------------------------------------------------------------
# Tokenizer training sample


@pytest.fixture
def sample_sources(tmp_path) -> tuple[Sources, dict[str, set[str]], dict[str, int]]:
    def write(name: str, lines: list[str]) -> str:
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return str(tmp_path / name)

    en = [f"english sentence {i}" for i in range(600)]
    es = [f"frase española {i}" for i in range(20)]
    src = [f"english pair side {i}" for i in range(50)]
    fr = [f"phrase française {i}" for i in range(50)]
    sources = Sources(
        mono={"en": write("en.txt", en), "es": write("es.txt", es)},
        parallel={"en-fr": [write("src.txt", src), write("fr.txt", fr)]},
        valid_mono={"en": write("valid.txt", ["held out only"])},
    )
    pools = {"en": set(en) | set(src), "es": set(es), "fr": set(fr)}
    return sources, pools, {"en": 650, "es": 20, "fr": 50}


def test_tokenizer_sample_draws_by_language(sample_sources, monkeypatch):
    sources, pools, sizes = sample_sources
    alpha, total = 0.5, 300
    sample = tokenizer_sample(sources, alpha, total, seed=3)
    by_lang = Counter()
    every_line = set().union(*pools.values())
    for line in sample:
        assert line in every_line, line  # only lines of the training sources
        by_lang[next(lang for lang, pool in pools.items() if line in pool)] += 1
    weights = {lang: n**alpha for lang, n in sizes.items()}
    for lang, w in weights.items():
        want = total * w / sum(weights.values())
        assert abs(by_lang[lang] - want) <= 1, (lang, by_lang, want)
    # a small language is repeated, each line at most once per pass
    es_counts = Counter(line for line in sample if line in pools["es"])
    assert set(es_counts) == pools["es"] and max(es_counts.values()) == 2
    # deterministic for a seed, another seed draws another sample
    assert tokenizer_sample(sources, alpha, total, seed=3) == sample
    assert tokenizer_sample(sources, alpha, total, seed=4) != sample
    # read in chunks: the same lines
    monkeypatch.setattr(prepare, "CHUNK_LINES", 7)
    assert tokenizer_sample(sources, alpha, total, seed=3) == sample


def test_tokenizer_sample_skips_blank_lines(files):
    sources = Sources(mono={"es": files["messy"]}, parallel={"en-fr": files["tsv"]})
    sample = tokenizer_sample(sources, 1.0, 10_000, seed=0)
    allowed = set(read_mono(files["messy"]))
    for line in Path(files["tsv"]).read_text(encoding="utf-8").splitlines():
        allowed.update(side.strip() for side in line.split("\t", 1))
    assert sample and all(line and line in allowed for line in sample)


CACHE_WORKER = """
import sys
import time
from pathlib import Path
from crossalign.data.store import prepare
from crossalign.data.tokenizer import load_tokenizer

tok, en, es, cache, marker, me, other = sys.argv[1:]
tok = load_tokenizer(tok)
build = prepare.build_store


def counted(*args, **kwargs):
    with open(marker, "a") as f:
        f.write("build\\n")
    time.sleep(1.0)  # the other process asks for the store meanwhile
    return build(*args, **kwargs)


prepare.build_store = counted
Path(me).touch()
while not Path(other).exists():  # start together
    time.sleep(0.01)
sources = prepare.Sources(mono={"en": en}, parallel={"en-es": [en, es]})
print(prepare.cached_store(sources, tok, cache, progress=False))
"""


def test_two_processes_asking_for_one_store_build_it_once(tmp_path, tok):
    tok.save_pretrained(tmp_path / "tok")
    marker, cache = tmp_path / "builds.txt", tmp_path / "cache"
    ready = [tmp_path / f"ready{i}" for i in range(2)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}

    def cmd(i: int) -> list[str]:
        args = [str(tmp_path / "tok"), str(EN), str(ES), str(cache), str(marker)]
        return [sys.executable, "-c", CACHE_WORKER, *args, str(ready[i]), str(ready[1 - i])]

    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": env}
    children = [subprocess.Popen(cmd(i), **pipes) for i in range(2)]
    results = [child.communicate(timeout=300) for child in children]
    for child, (_, stderr) in zip(children, results):
        assert child.returncode == 0, stderr[-2000:]
    assert results[0][0] == results[1][0] and Path(results[0][0].strip()).is_dir()
    assert marker.read_text() == "build\n"
    open_store(Path(results[0][0].strip()))
