"""Bad config values and objective options: one line naming the key, before any training.

Config values are refused by ``load_config`` (nothing is built); objective options by the
objective's constructor, tested directly on a small TokenContext, and once through the CLI.
"""

from __future__ import annotations

import pytest

from crossalign.cli import main
from crossalign.config import load_config
from crossalign.errors import CrossalignError
from crossalign.objectives import OBJECTIVES, TokenContext


def one_error_line(capsys: pytest.CaptureFixture, alone: bool = True) -> str:
    """The CLI's error: one ``crossalign: error:`` line, the last of stderr (its only line
    when ``alone``: nothing ran before the error) and no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and err.count("crossalign: error: ") == 1, err
    assert lines[-1].startswith("crossalign: error: ") and (len(lines) == 1 or not alone), err
    return lines[-1]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.steps=true", "train.steps=True must be of type int"),
        ("train.steps=1e3", "train.steps='1e3' must be of type int (write 1000)"),
        ("train.betas=5", "train.betas=5 must be a list of 2 values"),
        ("train.betas=[0.9, 1.5]", "train.betas.1=1.5 must be in [0, 1)"),
        ("train.lr=-1", "train.lr=-1.0 must be > 0"),
        ("train.lr=0", "train.lr=0.0 must be > 0"),
        ("train.lr=.nan", "train.lr=nan must be a finite number > 0"),
        ("train.log_every=0", "train.log_every=0 must be >= 1"),
        ("train.save_every=-1", "train.save_every=-1 must be >= 0"),
        ("train.eval_every=-1", "train.eval_every=-1 must be >= 0"),
        ("train.keep_checkpoints=-1", "train.keep_checkpoints=-1 must be >= 0"),
        ("train.max_grad_norm=-1", "train.max_grad_norm=-1.0 must be >= 0"),
        ("train.weight_decay=-1", "train.weight_decay=-1.0 must be >= 0"),
        ("train.seed=-1", "train.seed=-1 must be in [0, 4294967295]"),
        ("train.precision=fp8", "train.precision 'fp8' is unknown (did you mean 'fp16'?)"),
        ("data.max_length=4", "data.max_length=4 must be >= 8"),
        ("data.max_valid_sequences=0", "data.max_valid_sequences=0 must be >= 1"),
        ("data.alpha=abc", "data.alpha='abc' must be of type float"),
        ("data.mono=5", "data.mono must be a mapping, got 5"),
        ("data.mono={no: en.txt}", "data.mono: key False is not a string; quote it in YAML"),
        ("tokenizer.vocab_size=6", "tokenizer.vocab_size=6 must be >= 7"),
        ("tokenizer.kind=wordpiece", "tokenizer.kind 'wordpiece' is unknown; choose unigram or"),
        ("model.preset=[1]", "model.preset=[1] must be of type str"),
        ("objectives=mlm", "objectives must be a list, got 'mlm'"),
        ("objectives=[{weight: 1}]", "objectives.0: required key 'name' is missing"),
        ("objectives=[{name: mlm, weight: -1}]", "objective mlm: weight=-1.0 must be >= 0"),
        (
            "objectives=[{name: mlm, weight: 0}, {name: tlm, weight: 0}]",
            "every objective has weight 0",
        ),
        ("objectives=[{name: mlm, options: 5}]", "objectives.0.options must be a mapping"),
        (
            "objectives=[{name: mlm, mask_prob: 0.2, options: {mask_prob: 0.3}}]",
            "objectives.0: option 'mask_prob' is given twice",
        ),
        (
            "objectives=[{name: mlm, name: tlm}]",
            "not valid YAML at line 1, column 14: key 'name' is given twice",
        ),
        (
            "objectives.5.weight=1",
            "override 'objectives.5.weight=1': objectives has 2 items (0-1), not '5'",
        ),
        (
            "train.steps.x=1",
            "override 'train.steps.x=1': train.steps is a single int, it has no key 'x'",
        ),
        ("train.steps=[1", "override 'train.steps=[1': not valid YAML at line 1, column 3"),
        ("train..steps=1", "override 'train..steps=1': 'train..steps' is not a dotted key"),
    ],
)
def test_bad_value_is_one_line_naming_the_key(tiny, capsys, override, message):
    assert main(["train", *tiny(), override]) == 2
    assert message in one_error_line(capsys)


def test_bools_are_not_numbers_nor_numbers_flags():
    for override, message in [
        ("train.lr=true", "train.lr=True must be of type float"),
        ("objectives=[{name: mlm, batch_size: true}]", "objectives.0.batch_size=True must be"),
        ("model.language_embeddings=1", "model.language_embeddings=1 must be of type bool"),
    ]:
        with pytest.raises(CrossalignError, match=message.replace("[", r"\[")):
            load_config(None, [override])
    cfg = load_config(None, ["model.language_embeddings=false", "train.steps=3"])
    assert cfg.model.language_embeddings is False and cfg.train.steps == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("train:\n  steps: 5\n   lr: 1\n", "line 3, column 6: mapping values are not allowed"),
        (
            "train: [unclosed\n",
            "line 2, column 1: expected ',' or ']', but got '<stream end>' (while parsing a "
            "flow sequence at line 1, column 8)",
        ),
        ("train:\n  steps: 5\n  steps: 10\n", "line 3, column 3: key 'steps' is given twice"),
    ],
)
def test_yaml_error_names_file_line_and_column(tmp_path, capsys, text, message):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert main(["train", "--config", str(path)]) == 2
    assert f"{path}: not valid YAML at {message}" in one_error_line(capsys)


def test_config_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"train:\n  steps: \xff\n")
    assert main(["train", "--config", str(path)]) == 2
    assert f"{path}: not UTF-8 text (byte 16)" in one_error_line(capsys)


def context() -> TokenContext:
    """A tokenizer-less context: option checks come before anything needs the tokenizer."""
    return TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=["en", "es"], position_offset=0, max_length=16,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("mlm", {"mask_prob": 1.5}, "objective mlm: mask_prob=1.5 must be in [0, 1]"),
        ("mlm", {"mask_prob": "abc"}, "mlm: mask_prob='abc' must be a finite number in [0, 1]"),
        ("tlm", {"mask_prob": True}, "objective tlm: mask_prob=True must be a finite number"),
        ("mlm", {"replace_probs": 0.8}, "mlm: replace_probs=0.8 must be two probabilities"),
        ("mlm", {"replace_probs": [1.2, 0]}, "mlm: replace_probs.0=1.2 must be in [0, 1]"),
        ("mlm", {"replace_probs": [0.8, 0.5]}, "replace_probs=[0.8, 0.5] must sum to at most 1"),
        ("dict_mlm", {"translate_prob": 2}, "dict_mlm: translate_prob=2 must be in [0, 1]"),
        ("align_mlm", {"alpha": -1}, "objective align_mlm: alpha=-1 must be >= 0"),
        ("align_mlm", {"dictionary": 5}, "align_mlm: dictionary=5 must be a path (a string)"),
        ("dict_mlm", {"dictionary": "d.txt", "vocab": 5}, "dict_mlm: vocab=5 must be a path"),
        ("tcs_mlm", {"switch_prob": 1.5}, "tcs_mlm: switch_prob=1.5 must be in [0, 1]"),
        ("tcs_mlm", {"threshold": 2.5}, "tcs_mlm: threshold=2.5 must be an integer >= 0"),
        ("tcs_mlm", {"csls_k": 0}, "objective tcs_mlm: csls_k=0 must be >= 1"),
        ("tcs_mlm", {"layer": -1}, "objective tcs_mlm: layer=-1 must be >= 0"),
        ("scs_mlm", {"top_k": 0}, "objective scs_mlm: top_k=0 must be >= 1"),
        ("scs_mlm", {"temperature": 0}, "objective scs_mlm: temperature=0 must be > 0"),
        ("tcs_mlm", {"layer": -1, "mask_prob": 2}, "objective tcs_mlm: layer=-1 must be >= 0"),
        ("tcs_mass", {"layer": -1}, "objective tcs_mass: layer=-1 must be >= 0"),
        ("scs_mass", {"top_k": 0}, "objective scs_mass: top_k=0 must be >= 1"),
        ("scs_mass", {"span_ratio": 0}, "objective scs_mass: span_ratio=0 must be in (0, 1]"),
        ("tcs_mlm", {"max_sentences": 0}, "objective tcs_mlm: max_sentences=0 must be >= 1"),
        (
            "scs_mass",
            {"csls_neighbourhood": "vocab"},
            "scs_mass: csls_neighbourhood 'vocab' is unknown (did you mean 'vocabulary'?); "
            "choose batch or vocabulary",
        ),
        ("mlm_gc", {"x_max": 0}, "objective mlm_gc: x_max=0 must be > 0"),
        ("mlm_gc", {"cooc": 5}, "objective mlm_gc: cooc=5 must be a path (a string)"),
        ("mlm_gc", {"window": "2"}, "objective mlm_gc: window='2' must be an integer >= 1"),
        ("mlm_gc", {"masked_neighbours": "yes"}, "masked_neighbours='yes' must be true or false"),
        (
            "mlm_gc",
            {"lookup_device": "gpu"},
            "lookup_device 'gpu' is unknown (did you mean 'cpu'?)",
        ),
        ("dwa", {"mu": 0}, "objective dwa: mu=0 must be > 0"),
        ("dwa", {"alpha": 1.5}, "objective dwa: alpha=1.5 must be in [0, 1]"),
        ("dwa", {"filter_iters": 0}, "objective dwa: filter_iters=0 must be >= 1"),
        ("dwa", {"reduction": "avg"}, "objective dwa: reduction 'avg' is unknown"),
        ("dwa", {"allow_cold_start": "yes"}, "allow_cold_start='yes' must be true or false"),
    ],
)
def test_bad_objective_option_is_named(name, options, message):
    with pytest.raises(CrossalignError) as caught:
        OBJECTIVES.get(name)(context(), **options)
    assert message in str(caught.value)


def test_bad_objective_option_from_the_cli(tiny, capsys):
    # once end to end: the constructor's error reaches the CLI as one line (no traceback)
    assert main(["train", *tiny(), "objectives=[{name: mlm, mask_prob: abc}]"]) == 2
    line = one_error_line(capsys, alone=False)
    assert "objective mlm: mask_prob='abc' must be a finite number in [0, 1]" in line
