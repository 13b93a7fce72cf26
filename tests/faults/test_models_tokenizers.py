"""Bad model and tokenizer paths, reproducible tokenizer training, and backbone export faults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from crossalign.cli import main
from crossalign.config import ModelConfig, TokenizerConfig
from crossalign.data import tokenizer as tokenizer_module
from crossalign.data.sampling import sample_by_language
from crossalign.data.tokenizer import (
    SPECIAL_TOKENS,
    canonical_unigram,
    load_tokenizer,
    train_tokenizer,
    train_tokenizer_on,
)
from crossalign.errors import CrossalignError
from crossalign.models import e5_import
from crossalign.models.build import build_model
from tests.faults.conftest import FIXTURES


def _texts() -> dict[str, list[str]]:
    return {
        lang: (FIXTURES / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
        for lang in ("en", "es")
    }


def _error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    """The one-line error a CLI call printed; asserts exit status 2 and no traceback."""
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("crossalign: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def model_only(tmp_path: Path) -> Path:
    """A tiny save_pretrained model directory without any tokenizer files."""
    out = tmp_path / "model-only"
    build_model(ModelConfig(preset="tiny"), 200, 1, ["en", "es"], 32).save_pretrained(out)
    assert not (out / "tokenizer.json").exists()
    return out


# ------------------------------------------------------------------ model dir without tokenizer


def test_load_tokenizer_refuses_a_model_dir_without_tokenizer_files(model_only: Path) -> None:
    # transformers builds an empty 5-token BertTokenizer from config.json's model_type
    with pytest.raises(CrossalignError, match="has no tokenizer files") as err:
        load_tokenizer(model_only, "model.path")
    assert str(err.value).startswith(f"model.path {model_only} has no tokenizer files")
    assert "tokenizer.path" in str(err.value)


def test_load_tokenizer_refuses_a_vocabulary_of_special_tokens_only(tmp_path: Path) -> None:
    backend = Tokenizer(models.WordLevel({t: i for i, t in enumerate(SPECIAL_TOKENS)}, "<unk>"))
    names = dict(bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    PreTrainedTokenizerFast(tokenizer_object=backend, mask_token="<mask>", **names).save_pretrained(
        tmp_path / "tok"
    )
    with pytest.raises(CrossalignError, match=r"holds only its 5 special tokens"):
        load_tokenizer(tmp_path / "tok")


def test_train_and_cooc_refuse_a_model_dir_without_tokenizer(
    model_only: Path, tiny, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["train", *tiny(), f"model.path={model_only}"])
    assert f"{model_only} has no tokenizer files" in _error(capsys, rc)
    assert not (tmp_path / "run" / "model").exists()

    en = FIXTURES / "en.txt"
    rc = main(
        ["cooc", "build", "--model", str(model_only), "--out", str(tmp_path / "x"),
         "--text", f"en={en}"]
    )  # fmt: skip
    assert f"{model_only} has no tokenizer files" in _error(capsys, rc)
    assert not (tmp_path / "x").exists()


def test_align_and_eval_refuse_a_model_dir_without_tokenizer(
    model_only: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # needs crossalign/align/aligner.py to load its tokenizer with load_tokenizer
    en, es = FIXTURES / "en.txt", FIXTURES / "es.txt"
    rc = main(["align", "--model", str(model_only), "--layer", "1", str(en), str(es)])
    assert f"{model_only} has no tokenizer files" in _error(capsys, rc)

    testset = tmp_path / "en-es"
    testset.mkdir()
    (testset / "test.en").write_text("a b\n", encoding="utf-8")
    (testset / "test.es").write_text("a b\n", encoding="utf-8")
    (testset / "alignv2.txt").write_text("1 1 1 S\n", encoding="utf-8")
    rc = main(["eval", "aer", "--model", str(model_only), "--testset", str(testset)])
    assert f"{model_only} has no tokenizer files" in _error(capsys, rc)


# ------------------------------------------------------------------ missing paths


def test_missing_model_path_is_named_not_a_hub_repo_error(
    tiny, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-model"
    rc = main(["train", *tiny(), f"model.path={missing}"])
    line = _error(capsys, rc)
    assert f"{missing} does not exist" in line and "Repo id" not in line
    with pytest.raises(CrossalignError, match=f"^model.path {missing} does not exist$"):
        build_model(ModelConfig(path=str(missing)), 200, 1, ["en"], 32)


@pytest.mark.parametrize("given", ["./no-such-dir", "~/no-such-dir-xyz", "a/b/c", "/no/such"])
def test_missing_tokenizer_path_does_not_exist(given: str) -> None:
    with pytest.raises(CrossalignError, match=f"^tokenizer.path {given} does not exist$"):
        load_tokenizer(given, "tokenizer.path")


def test_tokenizer_path_that_is_not_a_directory_or_offline_hub_id(tmp_path: Path) -> None:
    with pytest.raises(CrossalignError, match=r"is not a local directory, and as a hub id it is"):
        load_tokenizer("no-such-org/no-such-model", "tokenizer.path")
    (tmp_path / "tok.json").write_text("{}", encoding="utf-8")
    with pytest.raises(CrossalignError, match=r"tok\.json is a file; give the directory"):
        load_tokenizer(tmp_path / "tok.json")


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', '{"added_tokens": []}', "[1, 2]", '{"version": "1.0", "trunc'],
)
def test_malformed_tokenizer_json_is_one_line(tmp_path: Path, text: str) -> None:
    train_tokenizer(_texts(), TokenizerConfig(vocab_size=120)).save_pretrained(tmp_path / "tok")
    (tmp_path / "tok" / "tokenizer.json").write_text(text, encoding="utf-8")
    with pytest.raises(CrossalignError, match=r"cannot load the tokenizer") as err:
        load_tokenizer(tmp_path / "tok")
    assert "\n" not in str(err.value)


def test_corrupt_model_weights_are_one_line(model_only: Path) -> None:
    weights = model_only / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CrossalignError, match=f"model.path {model_only}: cannot load"):
        build_model(ModelConfig(path=str(model_only)), 200, 1, ["en"], 32)


# ------------------------------------------------------------------ bad training text


def test_tokenizer_vocab_too_small_for_the_characters() -> None:
    lines = _texts()["en"]
    with pytest.raises(CrossalignError, match=r"tokenizer\.vocab_size=10 cannot hold the \d+"):
        train_tokenizer_on(lines, TokenizerConfig(kind="bpe", vocab_size=10))
    with pytest.raises(CrossalignError, match=r"tokenizer training \(unigram, tokenizer\.vocab"):
        train_tokenizer_on(lines, TokenizerConfig(kind="unigram", vocab_size=10))


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
def test_tokenizer_training_text_without_characters(kind: str) -> None:
    with pytest.raises(CrossalignError, match=r"training text \(1 sampled lines\) has no char"):
        train_tokenizer_on([""], TokenizerConfig(kind=kind, vocab_size=50))


@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_sampling_a_language_without_lines(alpha: float) -> None:
    with pytest.raises(CrossalignError, match=r"^no text in language\(s\) en to sample from"):
        sample_by_language({"en": [], "es": ["hola"]}, alpha, 10, seed=0)


# ------------------------------------------------------------------ reproducible training

TRAIN_BOTH = """
import sys
from pathlib import Path
from crossalign.config import TokenizerConfig
from crossalign.data.tokenizer import train_tokenizer
texts = {l: Path(sys.argv[1], l + ".txt").read_text(encoding="utf-8").splitlines()
         for l in ("en", "es")}
for kind in ("unigram", "bpe"):
    tok = train_tokenizer(texts, TokenizerConfig(kind=kind, vocab_size=200), seed=0)
    tok.save_pretrained(Path(sys.argv[2]) / kind)
"""


def test_tokenizer_training_is_the_same_every_time() -> None:
    # tokenizers' UnigramTrainer iterates hash maps with new random keys on every training:
    # before canonical_unigram, each training gave differently ordered ids (and scores)
    texts = _texts()
    for kind in ("unigram", "bpe"):
        cfg = TokenizerConfig(kind=kind, vocab_size=200)
        saved = {train_tokenizer(texts, cfg).backend_tokenizer.to_str() for _ in range(3)}
        assert len(saved) == 1, kind


@pytest.mark.slow
def test_tokenizer_training_is_the_same_in_every_process(tmp_path: Path) -> None:
    # the same across processes with different PYTHONHASHSEED, byte for byte as saved
    runs = []
    for hash_seed in (1, 2):
        env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-c", TRAIN_BOTH, str(FIXTURES), str(tmp_path / str(hash_seed))]
        runs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True))
    for run in runs:
        assert run.wait(timeout=120) == 0, run.stderr.read()[-2000:]
    for kind in ("unigram", "bpe"):
        a, b = (tmp_path / s / kind / "tokenizer.json" for s in ("1", "2"))
        assert a.read_bytes() == b.read_bytes(), kind


def _unigram(pieces: list[tuple[str, float]]) -> Tokenizer:
    specials = [(t, 0.0) for t in SPECIAL_TOKENS]
    return Tokenizer(models.Unigram(specials + pieces, unk_id=3, byte_fallback=False))


def test_canonical_unigram_ignores_ladder_order_and_float_noise() -> None:
    # what two processes give: the added-back characters x, y, z on the scores
    # min, min + 1e-4, min + 2e-4 in hash order, other scores differing in their last bits
    m = -9.123456789012345
    ladder = [m, m + 0.0001, m + 0.0002]
    first = _unigram(
        [("▁ab", -2.0), ("a", -3.1), ("b", -3.1 + 1e-13), ("ab", -4.25)] + list(zip("xyz", ladder))
    )
    second = _unigram(
        [("ab", -4.25 + 3e-13), ("▁ab", -2.0), ("b", -3.1), ("a", -3.1 - 1e-13)]
        + list(zip("zxy", ladder))
    )
    assert first.to_str() != second.to_str()
    canon = canonical_unigram(first)
    assert canon.to_str() == canonical_unigram(second).to_str()
    ids = [canon.token_to_id(p) for p in SPECIAL_TOKENS + ["▁ab", "a", "b", "ab", "x", "y", "z"]]
    assert ids == list(range(12))  # specials, then by score, ties by piece


def test_canonical_unigram_tokenizes_as_the_trained_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = _texts()
    lines = texts["en"] + texts["es"]
    canon = train_tokenizer(texts, TokenizerConfig(vocab_size=200), seed=0)
    monkeypatch.setattr(tokenizer_module, "canonical_unigram", lambda tok: tok)
    raw = train_tokenizer(texts, TokenizerConfig(vocab_size=200), seed=0)
    assert canon.get_vocab().keys() == raw.get_vocab().keys()
    assert [canon.tokenize(x) for x in lines] == [raw.tokenize(x) for x in lines]
    assert [canon.convert_ids_to_tokens(i) for i in range(5)] == SPECIAL_TOKENS


# ------------------------------------------------------------------ backbone export


def test_backbone_export_below_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("", encoding="utf-8")
    rc = main(["backbone", "export", "e5-small", str(tmp_path / "f" / "out")])
    assert f"{tmp_path / 'f'} is a file" in _error(capsys, rc)


@pytest.fixture
def small_writer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Export with a stand-in source and writer (the real one takes ~9 s and writes 467 MB);
    returns the --file to pass."""
    source = tmp_path / "e5.bin"
    source.write_bytes(b"E5S1")

    def write(out: Path, e5: object, version: str | None) -> dict:
        (out / "model.safetensors").write_bytes(b"x" * 1000)
        (out / e5_import.PROVENANCE_FILE).write_text("{}", encoding="utf-8")
        return {"source": {"file": str(source), "sha256": "0" * 64}}

    monkeypatch.setattr(e5_import, "read_e5_file", lambda path: None)
    monkeypatch.setattr(e5_import, "_write_export", write)
    return source


def test_backbone_export_to_an_unwritable_place(
    small_writer: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(tmp_path / "ro"))

    monkeypatch.setattr("crossalign.fileio.tempfile.mkdtemp", refuse)  # as on a read-only disk
    out = tmp_path / "ro" / "e5"
    rc = main(["backbone", "export", "e5-small", str(out), "--file", str(small_writer)])
    assert f"{out}: cannot write the export: Permission denied" in _error(capsys, rc)


def test_backbone_export_failed_rename_leaves_no_temp_dir(
    small_writer: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "exports" / "e5"
    args = ["backbone", "export", "e5-small", str(out), "--file", str(small_writer), "--force"]
    assert main(args) == 0
    before = sorted(p.name for p in out.parent.iterdir())
    rename = os.replace

    def fail_into_place(src: object, dst: object) -> None:
        if Path(src).name.endswith(".tmp"):  # the new export's rename into place
            raise OSError(28, "No space left on device", str(src))
        rename(src, dst)

    monkeypatch.setattr("crossalign.fileio.os.replace", fail_into_place)
    line = _error(capsys, main(args))
    assert f"{out}: cannot write the export: No space left on device" in line
    left = sorted(p.name for p in out.parent.iterdir())
    assert left == before  # the previous export back in place, no hidden .e5.*.tmp directory
    assert (out / e5_import.PROVENANCE_FILE).is_file()
