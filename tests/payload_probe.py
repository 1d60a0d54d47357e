"""What the blind payload probes share (tests/test_screening_blind2_probe.py, tests/test_screening_blind3_probe.py):
a payload file read into its items to flag and its non-debatable benign ones, test ids that name each item, and the
cases a probe decided against marked strict xfail with the decision's reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BLIND = Path(__file__).parent / "data" / "blind"


def load(name: str) -> tuple[dict, list[dict], list[dict]]:
    """(the file's data, the items to flag, the benign items that are not debatable)."""
    data = json.loads((BLIND / name).read_text())
    flag = [item for item in data["items"] if item["expected"] == "flag"]
    benign = [item for item in data["items"] if item["expected"] == "benign" and not item.get("debatable")]
    return data, flag, benign


def ids(items, width: int) -> list[str]:
    return [f"{i}-{item['family']}-{item['text'][:width]}" for i, item in enumerate(items)]


def cases(items, decided: dict, test: str) -> list:
    """The items, those decided for ``test`` (keyed by (test, index)) marked strict xfail with the decision."""
    return [
        pytest.param(item, marks=pytest.mark.xfail(strict=True, reason=decided[(test, i)]))
        if (test, i) in decided
        else item
        for i, item in enumerate(items)
    ]
