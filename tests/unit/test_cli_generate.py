"""``crossalign.cli.generate``: argparse options generated from typed dataclasses."""

from __future__ import annotations

import dataclasses
import shlex
from typing import Literal

import pytest

from crossalign.cli.generate import Parser, options_from
from crossalign.errors import CrossalignError
from crossalign.options import add_options, command_line, opt


@dataclasses.dataclass
class Options:
    """Options of a made-up command."""

    model: str
    """Model directory."""
    max_words: int = 1500
    """Words to evaluate (100% of them)."""
    method: Literal["csls", "nn"] = "csls"
    """Retrieval."""
    lr: float = 2e-5
    """Peak learning rate."""
    layer: int | None = None
    """Hidden layer; None: the last."""
    reverse: bool = False
    """Swap the languages."""
    cache: bool = True
    """Reuse what is there."""
    joint: bool = opt(False, flag="--joint/--separate", help="encode the pair as one sequence")
    text: tuple[str, str] | None = opt(None, metavar="FILE")
    """Source and target text."""
    corpus: tuple[str, ...] = opt((), append=True, metavar="DIR")
    """Corpora; repeat the flag."""
    files: list[str] = opt([], help="input files")
    output: str | None = opt(None, short="-o", help="where to write")
    internal: int = opt(3, cli=False)


def _parser() -> Parser:
    parser = Parser(prog="crossalign demo")
    add_options(parser, Options)
    return parser


def _parse(*argv: str, overrides: tuple[str, ...] = ()) -> Options:
    return options_from(_parser().parse_args(list(argv)), Options, overrides, where="demo")


def test_types_map_to_argparse_actions():
    o = _parse("--model", "m", "--max-words", "7", "--method", "nn", "--lr", "1e-3",
               "--layer", "4", "--reverse", "--no-cache", "--joint", "--text", "a", "b",
               "--corpus", "c1", "--corpus", "c2", "--files", "f1", "f2", "-o", "out")  # fmt: skip
    assert o == Options("m", 7, "nn", 1e-3, 4, True, False, True, ("a", "b"), ("c1", "c2"),
                        ["f1", "f2"], "out")  # fmt: skip
    assert _parse("--model", "m", "--separate") == Options("m")
    assert _parse("--model", "m").files == [] and Options("x").files is not Options("y").files


def test_defaults_and_docstrings_make_the_help(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--max-words MAX_WORDS Words to evaluate (100% of them). (default 1500)" in help_text
    assert "Peak learning rate. (default 2e-05)" in help_text
    assert "--method {csls,nn}" in help_text and "(default csls)" in help_text
    assert "--cache, --no-cache Reuse what is there." in help_text
    assert "--text FILE FILE" in help_text and "--corpus DIR" in help_text
    assert "--internal" not in help_text


def test_required_fields_are_required(capsys):
    with pytest.raises(SystemExit) as e:
        _parser().parse_args([])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("crossalign: error: the following arguments are required: --model")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("max_words=12", "lr=0.5"), {"max_words": 12, "lr": 0.5}),
        (("layer=null", "text=[a, b]"), {"layer": None, "text": ("a", "b")}),
        (("corpus=[x, y]", "method=nn", "reverse=true"),
         {"corpus": ("x", "y"), "method": "nn", "reverse": True}),
    ],
)  # fmt: skip
def test_key_value_overrides_come_after_the_flags(overrides, expected):
    o = _parse("--model", "m", "--max-words", "7", "--layer", "3", overrides=overrides)
    assert {k: getattr(o, k) for k in expected} == expected
    assert o.model == "m"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "max_word=3",
            "demo: unknown option 'max_word' in 'max_word=3' (did you mean 'max_words'?)",
        ),
        ("max_words=many", "demo: max_words='many' must be of type int"),
        ("max_words=1e3", "demo: max_words='1e3' must be of type int (write 1000)"),
        ("method=csl", "demo: method='csl' is not one of csls, nn (did you mean 'csls'?)"),
        ("reverse=3", "demo: reverse=3 must be of type bool"),
        ("internal=4", "demo: unknown option 'internal'"),
        ("layer", "override 'layer' must look like key=value"),
    ],
)
def test_bad_overrides_are_one_line_errors(override, message):
    with pytest.raises(CrossalignError) as e:
        _parse("--model", "m", overrides=(override,))
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_command_line_parses_back_to_the_same_options():
    o = Options("my model", 9, "nn", 0.1 + 0.2, 2, True, False, True, ("a b", "c"), ("x", "y"),
                ["f"], "out")  # fmt: skip
    line = command_line(["crossalign", "demo"], o)
    assert line.startswith("crossalign demo --model 'my model' --max-words 9 --method nn")
    assert "--lr 0.30000000000000004" in line and "--corpus x --corpus y" in line
    assert "--no-cache" in line and "--internal" not in line
    assert _parse(*shlex.split(line)[2:]) == o
    short = command_line(["demo"], Options("m"), ["model", "lr", "reverse", "output"])
    assert short == "demo --model m --lr 2e-05"


def test_positional_fields():
    @dataclasses.dataclass
    class Build:
        dicts: list[str]
        out: str = "data/x"

    parser = Parser(prog="crossalign build")
    add_options(parser, Build, positional=["dicts"])
    built = options_from(parser.parse_args(["a", "b", "--out", "o"]), Build)
    assert built == Build(["a", "b"], "o")
    assert command_line(["build"], built, positional=["dicts"]) == "build a b --out o"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "m", "--max-wrds", "3"],
         "unrecognized arguments: --max-wrds 3 (did you mean '--max-words'?)"),
        (["--model", "m", "--method", "csl"],
         "argument --method: invalid choice: 'csl' (choose from 'csls', 'nn') "
         "(did you mean 'csls'?)"),
    ],
)  # fmt: skip
def test_unknown_flags_and_choices_suggest_the_nearest(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == f"crossalign: error: {message} (see 'crossalign demo --help')\n"


def test_unknown_flag_of_a_subcommand_names_its_options(capsys):
    from crossalign.cli import main

    with pytest.raises(SystemExit):
        main(["data", "derive", "--transform", "trans", "--corpus", "x", "--out", "o",
              "--dict-fractoin", "0.5"])  # fmt: skip
    err = capsys.readouterr().err
    assert "unrecognized arguments: --dict-fractoin 0.5 (did you mean '--dict-fraction'?)" in err
    with pytest.raises(SystemExit):
        main(["trian"])
    assert "(did you mean 'train'?)" in capsys.readouterr().err


def test_prefixes_of_flags_are_still_accepted():
    assert _parse("--model", "m", "--max-w", "5").max_words == 5
