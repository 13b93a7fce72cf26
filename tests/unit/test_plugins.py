"""Other packages extend crossalign through entry points: objectives, evaluations, backbones
and token tasks; a plugin that fails to load is a one-line error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossalign.errors import CrossalignError
from crossalign.evals.registry import EVALS
from crossalign.evals.transfer import TASKS
from crossalign.models.backbones import BACKBONES
from crossalign.objectives import OBJECTIVES
from crossalign.registry import Registry


def install_plugin(root: Path, group: str, entries: dict[str, str], module: str) -> None:
    """A distribution ``crossalign_test_plugin`` on ``root`` (a sys.path entry) with the
    module ``crossalign_test_plugin.py`` and ``entries`` (name -> object) in ``group``."""
    (root / "crossalign_test_plugin.py").write_text(module)
    info = root / "crossalign_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: crossalign-test-plugin\nVersion: 0.1\n"
    )
    lines = "\n".join(f"{name} = {target}" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")


def test_entry_points_add_entries_on_first_lookup(tmp_path, monkeypatch):
    install_plugin(
        tmp_path,
        "crossalign.test_plugins",
        {"shout": "crossalign_test_plugin:shout", "side": "crossalign_test_plugin"},
        "REGISTRY = None\ndef shout(text):\n    return text.upper()\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry = Registry("thing", plugins="crossalign.test_plugins")
    registry.register("builtin")(str.lower)
    assert registry.names() == ["builtin", "shout"]  # a module entry registers nothing itself
    assert registry.get("shout")("hi") == "HI"
    with pytest.raises(CrossalignError, match="unknown thing 'shot' \\(did you mean 'shout'\\?\\)"):
        registry.get("shot")


def test_a_plugin_that_does_not_load_is_one_line_naming_it(tmp_path, monkeypatch):
    install_plugin(
        tmp_path, "crossalign.test_broken", {"bad": "crossalign_test_plugin:nope"}, "x = 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry = Registry("evaluation", plugins="crossalign.test_broken")
    with pytest.raises(CrossalignError) as info:
        registry.names()
    message = str(info.value)
    assert "evaluation plugin 'bad' (crossalign_test_plugin:nope" in message
    assert "fix or uninstall" in message and "\n" not in message


def test_the_registries_read_their_entry_point_groups():
    assert OBJECTIVES.plugins == "crossalign.objectives"
    assert EVALS.plugins == "crossalign.evaluations"
    assert BACKBONES.plugins == "crossalign.backbones"
    assert TASKS.plugins == "crossalign.tasks"
