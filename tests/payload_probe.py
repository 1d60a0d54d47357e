"""What the blind probes share (tests/test_screening_blind2_probe.py … blind4, tests/test_secret_blind2_probe.py and
blind3): a payload file read into its items to flag and its non-debatable benign ones, test ids that name each item,
the cases a probe decided against marked strict xfail with the decision's reason, and the checks every payload
family and every secret family is held to."""

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


def assert_named_for_family(item: dict, reasons: list[str]) -> None:
    """A payload is screened with a reason of its own family (the credential family: a read or data sent away)."""
    from dreamweb import screening
    from tests.test_screening import FAMILY_REASON

    if item["family"] == "unknown_host":
        assert any(r.startswith(screening.UNKNOWN_HOST_PREFIX) for r in reasons), (item["why"], reasons)
    elif item["family"] == "credential_read":
        credential = {screening.REASON_CREDENTIAL_READ, screening.REASON_EXFILTRATION}
        assert credential & set(reasons), (item["why"], reasons)
    else:
        assert FAMILY_REASON[item["family"]] in reasons, (item["why"], reasons)


def assert_poisoned_as_a_proposal(item: dict, allowed) -> None:
    from reviews.analysis import risk

    draft = {"operation": "add", "content": item["text"], "evidence": [{"trust": "agent", "excerpt": ""}]}
    level, reasons = risk.assess(draft, allowed_hosts=allowed)
    assert level == "high" and risk.is_poisoned(level, reasons), (item["why"], level, reasons)


def secret_items(name: str) -> tuple[list[dict], list[dict]]:
    """A blind secret file's (texts with a secret, benign texts)."""
    items = json.loads((BLIND / name).read_text())
    return [i for i in items if i["secret"] is not None], [i for i in items if i["secret"] is None]


def by_id(items, known_gaps: dict) -> list:
    """The items, those named in ``known_gaps`` (by id) marked strict xfail with the gap's reason."""
    return [
        pytest.param(item, marks=pytest.mark.xfail(strict=True, reason=known_gaps[item["id"]]))
        if item["id"] in known_gaps
        else item
        for item in items
    ]


def assert_redacted(item: dict) -> None:
    from reviews.analysis import risk

    assert item["secret"] in item["text"]
    assert item["secret"] not in risk.redact(item["text"])
    assert risk.has_secret(item["text"])
