"""``DeriveSettings``: one declaration of the derive settings for the writer, the command line
(a study's reuse key: it must not change) and the card."""

from __future__ import annotations

import dataclasses
import re

import pytest

from crossalign.cli import build_parser, main
from crossalign.data.derive.settings import DeriveSettings
from crossalign.errors import CrossalignError
from crossalign.languages import DERIVED_LANG

EN = "tests/fixtures/tiny/en.txt"


def _parsed(*argv: str) -> DeriveSettings:
    args = build_parser().parse_args(["data", "derive", "--out", "o", *argv])
    return DeriveSettings.from_values(vars(args))


# The strings the former derive_command_line(args) wrote for the same options: a changed
# string would make every existing study re-derive its corpora.
@pytest.mark.parametrize(
    ("argv", "out", "expected"),
    [
        (
            ["--transform", "trans+inv", "--corpus", "data/bible"],
            "o",
            "crossalign data derive --transform trans+inv --corpus data/bible --out o --overlap 0 "
            "--dict-fraction 0.25 --parallel-fraction 0.25 --vocab-size 8000 --seed 0 --valid "
            "1000 --test 1000",
        ),
        (
            ["--transform", "trans", "--corpus", "a b.txt", "--corpus", "c", "--overlap", "12.5",
             "--dict-fraction", "0.5", "--parallel-fraction", "1", "--tokenizer", "tok dir",
             "--max-lines", "100", "--seed", "3", "--valid", "10", "--test", "20"],
            "s/trans/derived",
            "crossalign data derive --transform trans --corpus 'a b.txt' --corpus c --out "
            "s/trans/derived --overlap 12.5 --dict-fraction 0.5 --parallel-fraction 1 "
            "--tokenizer 'tok dir' --max-lines 100 --seed 3 --valid 10 --test 20",
        ),
        (
            ["--transform", " trans+syn", "--corpus", "x", "--overlap", "0.000001",
             "--vocab-size", "120", "--tokenizer", ""],
            "o",
            "crossalign data derive --transform ' trans+syn' --corpus x --out o --overlap 1e-06 "
            "--dict-fraction 0.25 --parallel-fraction 0.25 --vocab-size 120 --seed 0 --valid "
            "1000 --test 1000",
        ),
        (  # a BPE tokenizer is named; the default (unigram) is not, so old keys stay the same
            ["--transform", "trans", "--corpus", "x", "--vocab-size", "4000",
             "--tokenizer-kind", "bpe"],
            "o",
            "crossalign data derive --transform trans --corpus x --out o --overlap 0 "
            "--dict-fraction 0.25 --parallel-fraction 0.25 --vocab-size 4000 --tokenizer-kind "
            "bpe --seed 0 --valid 1000 --test 1000",
        ),
    ],
)  # fmt: skip
def test_command_line_is_the_former_string(argv, out, expected):
    assert _parsed(*argv).command_line(out) == expected


def test_cli_defaults_are_the_dataclass_defaults():
    assert _parsed("--transform", "trans", "--corpus", EN) == DeriveSettings("trans", (EN,))


def test_card_records_overlap_as_a_fraction_and_the_normalised_transform():
    settings = DeriveSettings("trans+inv", ["c1", "c2"], overlap=10, max_lines=5, seed=2)
    assert settings.card("cmd") == {
        "format": "parallel",
        "command": "cmd",
        "sources": ["c1", "c2"],
        "seed": 2,
        "derived": {
            "transform": "inv+trans",
            "language": DERIVED_LANG,
            "overlap": 0.1,
            "dict_fraction": 0.25,
            "parallel_fraction": 0.25,
            "max_lines": 5,
        },
    }
    assert settings.corpus == ("c1", "c2")  # frozen: the list is copied into a tuple
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"overlap": 150.0}, "--overlap 150 must be a percentage in [0, 100]"),
        ({"overlap": -1.0}, "--overlap -1 must be a percentage in [0, 100]"),
        ({"overlap": float("nan")}, "--overlap nan must be a percentage in [0, 100]"),
        ({"dict_fraction": 0.0}, "--dict-fraction 0 must be a fraction in (0, 1]"),
        ({"parallel_fraction": 1.5}, "--parallel-fraction 1.5 must be a fraction in (0, 1]"),
        ({"vocab_size": 0}, "--vocab-size 0 must be at least 1"),
        ({"max_lines": 0}, "--max-lines 0 must be at least 1"),
        ({"valid": -5}, "--valid -5 must be at least 0"),
        ({"test": -1}, "--test -1 must be at least 0"),
        ({"corpus": ()}, "no --corpus given"),
        ({"transform": "trans+inverse"}, "unknown transform 'inverse'"),
        ({"transform": "inv", "overlap": 10.0}, "--overlap applies to transliteration"),
    ],
)
def test_bad_settings_are_refused_when_declared(change, message):
    base = {"transform": "trans", "corpus": (EN,)}
    with pytest.raises(CrossalignError, match="^" + re.escape(message)):
        DeriveSettings(**{**base, **change})


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--max-lines", "-1"], "--max-lines -1 must be at least 1"),  # was a ValueError traceback
        (["--valid", "-5"], "--valid -5 must be at least 0"),  # was written, silently wrong
        (["--overlap", "150"], "--overlap 150 must be a percentage in [0, 100]"),
    ],
)
def test_derive_cli_refuses_bad_settings_before_reading(tmp_path, capsys, option, message):
    out = tmp_path / "derived"
    argv = ["data", "derive", "--transform", "inv", "--corpus", EN, "--out", str(out), *option]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"crossalign: error: {message}" in err and "Traceback" not in err
    assert not out.exists()


def test_study_refuses_bad_settings_before_any_work(tmp_path, capsys):
    out = tmp_path / "study"
    argv = ["study", "derived", "--transform", "trans,trans+inv", "--corpus", EN, "--out",
            str(out), "--parallel-fraction", "0"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "crossalign: error: --parallel-fraction 0 must be a fraction in (0, 1]" in err
    assert not out.exists()
