"""Optional dependencies: a feature that needs a package outside the core install imports it
through ``require``, which names the extra that installs it."""

from __future__ import annotations

import importlib
from importlib import metadata
from types import ModuleType

from crossalign.errors import CrossalignError

EXTRAS = {
    "bible": "pysword (the Bible corpus builder)",
    "derive": "spaCy and its English pipeline (derived languages)",
    "plots": "matplotlib (report figures and per-layer PNGs)",
}
"""The extras of ``pyproject.toml`` beyond test, bench and backbone, and what needs them."""


def require(module: str, extra: str, needed_by: str) -> ModuleType:
    """``import module``, or a one-line CrossalignError saying ``needed_by`` needs it and
    ``pip install 'crossalign[extra]'`` installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise CrossalignError(
            f"{needed_by} needs {package}, which is not installed: pip install "
            f"'crossalign[{extra}]'"
        ) from None


def installed_version(distribution: str) -> str | None:
    """The installed version of the Python distribution ``distribution``, read from its
    metadata without importing it; None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
