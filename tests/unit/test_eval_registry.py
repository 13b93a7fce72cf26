"""The evaluation registry: every evaluation declares documented options and metrics with a
direction and a unit, its implementation exists, the catalog imports no torch, and the CLI
has one generated subcommand per evaluation."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import subprocess
import sys
import typing

import pytest

from crossalign.cli import build_parser, main
from crossalign.cli.generate import options_from
from crossalign.errors import CrossalignError
from crossalign.evals.registry import Metric, Unit, evaluations
from crossalign.options import field_docs

REGISTRY = evaluations()
NAMES = REGISTRY.names()
EXPECTED = [
    "aer", "alignment-score", "bleu", "bli", "cooc-compare", "induced-dict", "layers",
    "most-frequent-tag", "perplexity", "retrieval", "rsim", "transfer",
]  # fmt: skip
REQUIRED = {  # the least each evaluation's command needs to parse
    "aer": [],
    "alignment-score": ["--model", "m"],
    "bleu": ["--model", "m"],
    "bli": ["--model", "m", "--dict", "d"],
    "cooc-compare": ["--matrix", "x", "--pair", "en-de", "--dict", "d", "--out", "o"],
    "induced-dict": ["--model", "m", "--dict", "d"],
    "layers": ["--model", "m", "--dict", "d"],
    "most-frequent-tag": ["--derived", "d"],
    "perplexity": ["--model", "m"],
    "retrieval": ["--model", "m"],
    "rsim": ["--model", "m", "--dict", "d"],
    "transfer": ["--model", "m", "--derived", "d"],
}


def test_the_twelve_evaluations_are_registered():
    assert NAMES == EXPECTED


@pytest.mark.parametrize("name", NAMES)
def test_every_option_is_a_documented_field(name):
    options = REGISTRY.get(name).options
    assert dataclasses.is_dataclass(options) and options.__doc__
    docs = field_docs(options)
    undocumented = [f.name for f in dataclasses.fields(options) if not docs.get(f.name)]
    assert undocumented == []


@pytest.mark.parametrize("name", NAMES)
def test_every_metric_has_a_direction_unit_and_label(name):
    evaluation = REGISTRY.get(name)
    assert evaluation.metrics and evaluation.summary and evaluation.version >= 1
    for key, metric in evaluation.metrics.items():
        assert isinstance(metric, Metric) and metric.label and "/" not in key
        assert metric.unit in typing.get_args(Unit)
        assert metric.higher_is_better in (True, False, None)
        if metric.unit == "count":  # sizes are reported, never ranked
            assert metric.higher_is_better is None
    ranked = [m for m in evaluation.metrics.values() if m.higher_is_better is not None]
    assert ranked, f"{name} ranks nothing"


@pytest.mark.parametrize("name", NAMES)
def test_the_implementation_exists(name):
    module, _, func = REGISTRY.get(name).run.partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert func in defs
    assert [a.arg for a in defs[func].args.args] == ["model_dir", "opts"]


@pytest.mark.parametrize("name", NAMES)
def test_flag_defaults_are_the_dataclass_defaults(name):
    evaluation = REGISTRY.get(name)
    args = build_parser().parse_args(["eval", name, *REQUIRED[name]])
    assert args.evaluation == name and args.overrides == []
    built = options_from(args, evaluation.options)
    missing = dataclasses.MISSING
    required = {
        f.name: getattr(built, f.name)
        for f in dataclasses.fields(built)
        if (f.default is missing and f.default_factory is missing)
        or "--" + f.name.replace("_", "-") in REQUIRED[name]  # transfer: --derived
    }
    assert built == evaluation.options(**required)


def test_key_value_options_and_unknown_keys():
    args = build_parser().parse_args(["eval", "bli", "--model", "m", "--dict", "d", "seed=5"])
    assert options_from(args, REGISTRY.get("bli").options, args.overrides).seed == 5
    with pytest.raises(CrossalignError, match="did you mean 'max_words'"):
        REGISTRY.get("bli").build_options({"dict": "d", "max_word": 3})
    with pytest.raises(CrossalignError, match="words 'half' is unknown"):
        REGISTRY.get("bli").build_options({"dict": "d", "words": "half"})


def test_catalog_imports_no_torch():
    code = (
        "import sys; from crossalign.evals.registry import evaluations; evaluations(); "
        "import crossalign.cli.evaluate, crossalign.cli.lexicon; "
        "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_evaluation_names_the_nearest(capsys):
    with pytest.raises(SystemExit, match="2"):
        main(["eval", "bl1", "--model", "m"])
    err = capsys.readouterr().err
    assert err.startswith("crossalign: error: ") and "did you mean 'bli'" in err
    with pytest.raises(CrossalignError, match="unknown evaluation 'rsmi' \\(did you mean 'rsim'"):
        REGISTRY.get("rsmi")


def test_a_model_less_evaluation_refuses_a_model(capsys):
    args = ["eval", "cooc-compare", *REQUIRED["cooc-compare"], "--model", "m"]
    with pytest.raises(SystemExit, match="2"):
        main(args)
    assert "unrecognized arguments: --model" in capsys.readouterr().err


def test_ls_evaluations_lists_names_summaries_and_metric_directions(capsys):
    assert main(["ls", "evaluations"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert f"{name} " in out and REGISTRY.get(name).summary in out
    assert "aer ↓ (fraction)" in out and "precision_at_1-nn ↑ (percent)" in out
    assert "words (count)" in out and "mlm_ppl ↓ (perplexity)" in out


def test_tables_label_rows_and_join_half_widths():
    from crossalign.report.tables import evaluation_table

    table = evaluation_table(
        REGISTRY.get("cooc-compare"),
        {"n": 5, "translated": 0.5, "translated_ci95": 0.25, "bin-1/n": 2, "bin-1/random": 1.0},
    ).splitlines()
    assert table[0].split()[:4] == ["cooc-compare", "phrases", "translated", "|Δ"]
    assert "half-width" not in table[0]  # the half-width joined its metric's column
    assert table[2].split() == ["all", "5", "0.5000", "±", "0.2500", "-"]
    assert table[3].split() == ["bin", "-1", "2", "-", "1.0000"]
    layers = evaluation_table(REGISTRY.get("aer"), {"L0/aer": 0.5, "L8/aer": 0.25})
    assert [r.split()[:3] for r in layers.splitlines()[2:]] == [
        ["layer", "0", "50.00"],
        ["layer", "8", "25.00"],
    ]


def test_read_paths_lists_the_files_an_evaluation_reads():
    from crossalign.evals.options import AEROptions, PerplexityOptions, RetrievalOptions
    from crossalign.options import read_paths

    options = RetrievalOptions(src_file="a.txt", tgt_file="b.txt", corpus=None)
    assert read_paths(options) == [("src_file", "a.txt"), ("tgt_file", "b.txt")]
    options = PerplexityOptions(source="compute", text=["en=x/en.txt"], pairs=["en-de=p.tsv"])
    assert read_paths(options) == [("text", "x/en.txt"), ("pairs", "p.tsv")]
    options = AEROptions(gold="g/de-en", text=("s.de", "s.en"))
    assert read_paths(options) == [("gold", "g/de-en"), ("text", "s.de"), ("text", "s.en")]


def test_every_evaluation_reads_no_output_option():
    """Options that name what an evaluation writes are never checked for existence."""
    from crossalign.evals.registry import evaluations
    from crossalign.options import field_meta

    for evaluation in map(evaluations().get, evaluations().names()):
        for f in dataclasses.fields(evaluation.options):
            if f.name in ("out", "output", "png", "backward"):
                assert not field_meta(f)["reads"], (evaluation.name, f.name)
