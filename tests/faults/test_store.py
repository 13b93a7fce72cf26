"""Fault injection on the token store and its cache: damaged pieces, files edited behind the
cache's back, a full disk while tokenizing, a read-only shared cache and a wrong ``--out``.

Every test breaks the store the way a user or the machine would, then checks that training
never reads the damage silently and that the message names the file and a fix that works.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from crossalign.cli import main
from crossalign.config import TokenizerConfig
from crossalign.data.store import prepare
from crossalign.data.store.prepare import Sources, cached_store, store_sources, training_data
from crossalign.data.store.reading import open_store
from crossalign.data.store.token_store import build_store
from crossalign.data.tokenizer import train_tokenizer
from crossalign.errors import CrossalignError

from .conftest import FIXTURES

EN, ES = FIXTURES / "en.txt", FIXTURES / "es.txt"
LINES = {lang: (FIXTURES / f"{lang}.txt").read_text().splitlines() for lang in ("en", "es")}
OLD = 1_000_000_000 * 10**9  # 2001-09-09, in ns


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(LINES, TokenizerConfig(vocab_size=200))


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory, tok) -> Path:
    out = tmp_path_factory.mktemp("tok") / "tokenizer"
    tok.save_pretrained(out)
    return out


SOURCES = Sources(mono={"en": str(EN)}, parallel={"en-es": [str(EN), str(ES)]})


def build(tok, out: Path) -> Path:
    """The fixture's English text and English-Spanish pairs, in chunks of 10 lines."""
    build_store(store_sources(SOURCES), tok, out, "test", chunk_lines=10, progress=False)
    return out


def piece(store: Path, part: str = "parallel/en-es", n: int = 0) -> Path:
    return sorted((store / "pieces" / part).iterdir())[n]


def everything(store: Path, tok) -> dict:
    """Every block, sentence and pair a run can read from the store."""
    data = training_data(open_store(store), tok, 16, 10**9)
    blocks, pairs, n = data.mono["en"], data.parallel["en-es"], len(data.sentences["en"])
    return {
        "blocks": blocks[np.arange(len(blocks))].tolist(),
        "sentences": [s.tolist() for s in map(data.sentences["en"].__getitem__, range(n))],
        "pairs": [tuple(x.tolist() for x in pairs.pair(k)) for k in range(len(pairs))],
    }


def refused(fn, *args) -> str:
    with pytest.raises(CrossalignError) as err:
        fn(*args)
    message = str(err.value)
    assert "\n" not in message
    return message


def save_like(path: Path, array: np.ndarray, when: int | None = None) -> None:
    """Overwrite ``path`` with ``array``; ``when``: set its modification time back to it."""
    np.save(path, array)
    if when is not None:
        os.utime(path, ns=(when, when))


# ---------------------------------------------------------------------------------------------
# 1. A corrupted store is refused at open, naming the file


@pytest.mark.parametrize(
    "damage, problem",
    [
        ("offsets_past_end", "past the end"),
        ("offsets_decreasing", "decreas"),
        ("id_past_vocab", "vocabulary"),
        ("fewer_pairs", "piece.json"),
    ],
)
def test_a_damaged_piece_is_refused_at_open_naming_the_file(tmp_path, tok, damage, problem):
    store = build(tok, tmp_path / "s")
    where = piece(store)
    offsets = np.load(where / "src_offsets.npy")
    ids = np.load(where / "src_ids.npy")
    if damage == "offsets_past_end":
        offsets[-1] += 50
        save_like(where / "src_offsets.npy", offsets)
        name = "src_offsets.npy"
    elif damage == "offsets_decreasing":
        offsets[2], offsets[3] = offsets[3], offsets[2]
        save_like(where / "src_offsets.npy", offsets)
        name = "src_offsets.npy"
    elif damage == "id_past_vocab":
        ids[3] = len(tok) + 7
        save_like(where / "src_ids.npy", ids)
        name = "src_ids.npy"
    else:  # a consistent piece, but shorter than its manifest says
        save_like(where / "src_offsets.npy", offsets[:-1])
        save_like(where / "src_ids.npy", ids[: offsets[-2]])
        save_like(where / "src_starts.npy", np.load(where / "src_starts.npy")[: offsets[-2]])
        name = "src_offsets.npy"
    message = refused(open_store, store)
    assert str(where / name) in message and problem in message, message
    assert "delete" in message


def test_ids_replaced_by_other_valid_ids_are_found_by_their_hash(tmp_path, tok, capsys):
    store = build(tok, tmp_path / "s")
    good = everything(store, tok)
    assert main(["data", "verify", str(store)]) == 0
    assert "verified" in capsys.readouterr().out
    where = piece(store, "mono/en", 1)
    ids = np.load(where / "ids.npy")
    words = ids != ids[-1]  # not a separator
    ids[words] = ids[words][::-1]
    # newer than the store's manifests: checked at open
    save_like(where / "ids.npy", ids)
    message = refused(open_store, store)
    assert str(where / "ids.npy") in message and "hash" in message
    # its modification time set back: still found by data verify
    save_like(where / "ids.npy", ids, when=OLD)
    assert main(["data", "verify", str(store)]) == 2
    err = capsys.readouterr().err
    assert str(where / "ids.npy") in err and "hash" in err
    assert len(err.strip().splitlines()) == 1
    # the advice works: delete the file, build again, the same store
    (where / "ids.npy").unlink()
    build(tok, store)
    assert everything(store, tok) == good


def test_a_zero_byte_offsets_file_names_the_file(tmp_path, tok):
    store = build(tok, tmp_path / "s")
    where = piece(store)
    (where / "src_offsets.npy").write_bytes(b"")
    message = refused(open_store, store)
    assert str(where / "src_offsets.npy") in message and "delete" in message


# ---------------------------------------------------------------------------------------------
# 2. An edit that keeps the size and the modification time still gives a new store


def test_an_edit_keeping_size_and_mtime_is_not_served_from_the_cache(tmp_path, tok):
    src = tmp_path / "en.txt"
    src.write_text(EN.read_text(encoding="utf-8"), encoding="utf-8")
    os.utime(src, ns=(OLD, OLD))
    sources = Sources(mono={"en": str(src)})
    cache = tmp_path / "cache"
    first = cached_store(sources, tok, cache, progress=False)
    before = src.stat()
    text = src.read_text(encoding="utf-8")
    src.write_text(text.replace("the", "hte", 3), encoding="utf-8")  # sed -i
    os.utime(src, ns=(OLD, OLD))  # touch -d OLD
    after = src.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    second = cached_store(sources, tok, cache, progress=False)
    assert second != first
    got = training_data(open_store(second), tok, 16, 10).sentences["en"]
    assert got[0].tolist() == tok(text.replace("the", "hte", 3).splitlines()[0].strip(),
                                  add_special_tokens=False)["input_ids"]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# 3. A full disk while tokenizing


def test_a_full_disk_while_tokenizing_names_the_file_and_leaves_nothing(
    tmp_path, tok_dir, monkeypatch, capsys
):
    out = tmp_path / "store"
    args = ["data", "tokenize", "--out", str(out), "--tokenizer", str(tok_dir),
            f"data.mono={{en: {EN}}}", f"data.parallel={{en-es: [{EN}, {ES}]}}"]  # fmt: skip
    real, calls = np.save, []

    def full(file, *a, **k):
        calls.append(file)
        if len(calls) == 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(file, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(np, "save", full)
        assert main(args) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if "crossalign: error" in x]
    assert len(err) == 1 and err[0].startswith("crossalign: error: "), err
    tmp = Path(calls[-1])  # the piece's file named where it was to be, not its tmp copy
    assert str(tmp.parent.parent / tmp.parent.name.split(".tmp")[0][1:] / tmp.name) in err[0]
    assert "No space left on device" in err[0]
    assert not list(out.rglob("*.tmp*")), list(out.rglob("*.tmp*"))
    # a crashed builder's leftover (a process that no longer runs) is swept by the next build
    stale = out / "pieces" / "mono" / "en" / f".00000-0000009.tmp-{os.uname().nodename}-999999999"
    stale.mkdir(parents=True)
    np.save(stale / "ids.npy", np.zeros(10**5, np.uint16))
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert not list(out.rglob("*.tmp*"))
    size = sum(f.stat().st_size for f in out.rglob("*.npy"))
    assert f"{size / 2**20:,.1f} MiB" in printed


# ---------------------------------------------------------------------------------------------
# 4. The damaged-cache advice works


@pytest.mark.parametrize("delete", ["file", "piece"])
def test_following_the_damaged_cache_advice_rebuilds_the_piece(tmp_path, tok, delete):
    cache = tmp_path / "cache"
    path = cached_store(SOURCES, tok, cache, progress=False)
    good = everything(path, tok)
    broken = sorted((path / "pieces" / "parallel" / "en-es").iterdir())[0] / "tgt_offsets.npy"
    broken.write_bytes(b"\x93NUMPY garbage")
    message = refused(open_store, path)
    assert str(broken) in message and "delete" in message
    if delete == "file":
        broken.unlink()
    else:
        for f in broken.parent.iterdir():
            f.unlink()
        broken.parent.rmdir()
    assert cached_store(SOURCES, tok, cache, progress=False) == path
    assert everything(path, tok) == good


# ---------------------------------------------------------------------------------------------
# 5. A read-only shared cache


class ReadOnlyLock:
    """``FileLock`` on a read-only file system."""

    def __init__(self, path, *a, **k) -> None:
        self.path = str(path)

    def __enter__(self):
        raise OSError(errno.EROFS, "Read-only file system", self.path)

    def __exit__(self, *exc) -> None:
        pass


def test_a_complete_store_in_a_read_only_cache_is_used_without_a_lock(tmp_path, tok, monkeypatch):
    cache = tmp_path / "cache"
    path = cached_store(SOURCES, tok, cache, progress=False)
    good = everything(path, tok)
    monkeypatch.setattr(prepare, "FileLock", ReadOnlyLock)
    assert cached_store(SOURCES, tok, cache, progress=False) == path
    assert everything(path, tok) == good
    # a store that is not there cannot be built there: say where to build it
    other = Sources(mono={"es": str(ES)})
    message = refused(cached_store, other, tok, cache)
    assert str(cache) in message and "data.cache_dir" in message and "--resume" not in message


# ---------------------------------------------------------------------------------------------
# 6. data tokenize --out: a run directory, a file


def test_tokenize_refuses_a_run_directory_and_a_file(tmp_path, tok_dir, capsys):
    run = tmp_path / "run"
    assert main(["train", f"run_dir={run}", "model.preset=tiny", "tokenizer.vocab_size=200",
                 f"data.mono={{en: {EN}}}", "data.max_length=16", "train.steps=1",
                 "train.batch_size=2", "train.save_every=0"]) == 0  # fmt: skip
    capsys.readouterr()
    before = sorted(p.name for p in run.iterdir())
    data = [f"data.mono={{en: {EN}}}"]
    assert main(["data", "tokenize", "--out", str(run), "--tokenizer", str(tok_dir), *data]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(run) in err and "run directory" in err, err
    assert sorted(p.name for p in run.iterdir()) == before
    file = tmp_path / "notes.txt"
    file.write_text("keep me\n")
    assert main(["data", "tokenize", "--out", str(file), "--tokenizer", str(tok_dir), *data]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(file) in err and "a file" in err, err
    assert file.read_text() == "keep me\n"
