"""The benches' scripts (bench/, not a package) loaded as modules, for the tests of what they measure."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench(filename: str) -> ModuleType:
    """A fresh module of ``bench/<filename>`` (its top level run again, as when the bench starts)."""
    spec = importlib.util.spec_from_file_location(f"bench_{Path(filename).stem}", BENCH / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
