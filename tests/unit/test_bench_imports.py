"""Every benchmark script imports: a renamed or removed library function breaks the suite,
not the next person who runs the benchmark."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_benchmark_imports(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines functions; main() runs only as a script
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
