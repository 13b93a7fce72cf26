"""Features outside the core install name the extra that installs what they need."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crossalign.errors import CrossalignError
from crossalign.extras import EXTRAS, require

ROOT = Path(__file__).resolve().parents[2]


def _bible(tmp: Path) -> None:
    from crossalign.data.corpora.bible import build_bible

    build_bible(tmp / "bible")


def _derive(tmp: Path) -> None:
    from crossalign.data.derive.derivation import load_spacy

    load_spacy(False)


def _layers_png(tmp: Path) -> None:
    from crossalign.evals.layers import plot_layers

    plot_layers([], tmp / "layers.png")


@pytest.mark.parametrize(
    ("module", "extra", "call"),
    [
        ("pysword", "bible", _bible),
        ("spacy", "derive", _derive),
        ("matplotlib", "plots", _layers_png),
    ],
)
def test_a_missing_optional_package_names_its_extra(module, extra, call, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    with pytest.raises(CrossalignError) as info:
        call(tmp_path)
    message = str(info.value)
    assert f"pip install 'crossalign[{extra}]'" in message and "\n" not in message


def test_require_returns_the_module_and_the_extras_are_in_pyproject():
    tomllib = pytest.importorskip("tomllib")
    assert require("json", "plots", "x").dumps([1]) == "[1]"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    assert extras["all"] == ["crossalign[backbone,bible,derive,plots]"]
    names = [d.split(">")[0].split("=")[0].split("<")[0] for d in project["dependencies"]]
    assert not {"spacy", "pysword", "matplotlib"} & set(names)
