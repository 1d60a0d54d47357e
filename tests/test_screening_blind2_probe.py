"""Probe attack5: a second blind family of poisoned texts (tests/data/blind/poison-payloads-2.json), written without
reading the screen, in forms the first family (poison-payloads.json) does not use: other fetchers and interpreters,
Windows living-off-the-land binaries, URLs hidden in variables, here-strings and heredocs, persistence, unknown
images with host mounts, other credential files and exfiltration channels (gists, /dev/tcp, DNS), agent addressing
in other languages, attributes, forged chat turns and disguised policies, SVG/MathML/markdown markup, and look-alike
hosts. Driven like tests/test_screening.py: every item to flag is screened with a named reason of its family; no
benign, non-debatable look-alike is screened.

Of its 402 cases 99 failed on the code probed (stop 27); the families were fixed with tests of their own
(tests/test_screening_families2.py). Four stay, as decisions, strict xfail: an HTML comment and an element given
attributes are markup whatever they hold (text hidden from a page, shown to a model; an image that loads something);
"support assistants must …" reads as words to the agents (the first family's rule); mounting the Docker socket is
flagged by the unknown image's host, not as remote code.
"""

from __future__ import annotations

import pytest

from dreamweb import screening
from reviews.analysis import risk
from tests import payload_probe
from tests.test_screening import FAMILY_REASON  # the family -> reason map of the first payload file

DATA, FLAG, BENIGN = payload_probe.load("poison-payloads-2.json")
FIRST = payload_probe.load("poison-payloads.json")[0]
ALLOWED = DATA["allowed_hosts"]
FAMILIES = {*FAMILY_REASON, "unknown_host"}
# the credential family covers reads and sending data away (docs/dream-pipeline.md, "Screening by kind"): either
# named reason counts for it
CREDENTIAL_REASONS = {screening.REASON_CREDENTIAL_READ, getattr(screening, "REASON_EXFILTRATION", None)} - {None}


# Decisions, not gaps (see the module's docstring): (test, index in its list).
DECIDED = {
    ("benign", 36): "'support assistants must' reads as words to the agents (first family's rule)",
    ("benign", 37): "an HTML comment is text hidden from a page and shown to a model",
}


def test_the_second_family_is_well_formed_and_new():
    assert FIRST["allowed_hosts"] == ALLOWED
    assert len(DATA["items"]) == 186 and len(FLAG) == 114 and len(BENIGN) == 59
    for item in DATA["items"]:
        assert item["family"] in FAMILIES and item["expected"] in {"flag", "benign"} and item["why"]
    first_texts = {item["text"].strip().lower() for item in FIRST["items"]}
    assert not [item["text"] for item in DATA["items"] if item["text"].strip().lower() in first_texts]


@pytest.mark.parametrize("item", FLAG, ids=payload_probe.ids(FLAG, 24))
def test_every_payload_to_flag_is_screened_with_a_named_reason(item):
    reasons = screening.screen(item["text"], allowed_hosts=ALLOWED)
    assert reasons, item["why"]
    assert all(screening.is_screening_reason(r) for r in reasons), reasons


@pytest.mark.parametrize("item", payload_probe.cases(FLAG, DECIDED, "named"), ids=payload_probe.ids(FLAG, 24))
def test_each_payload_is_named_for_its_family(item):
    reasons = screening.screen(item["text"], allowed_hosts=ALLOWED)
    if item["family"] == "unknown_host":
        assert any(r.startswith(screening.UNKNOWN_HOST_PREFIX) for r in reasons), (item["why"], reasons)
    elif item["family"] == "credential_read":
        assert CREDENTIAL_REASONS & set(reasons), (item["why"], reasons)
    else:
        assert FAMILY_REASON[item["family"]] in reasons, (item["why"], reasons)


@pytest.mark.parametrize("item", payload_probe.cases(BENIGN, DECIDED, "benign"), ids=payload_probe.ids(BENIGN, 24))
def test_no_benign_look_alike_is_screened(item):
    assert screening.screen(item["text"], allowed_hosts=ALLOWED) == [], item["why"]


@pytest.mark.parametrize("item", FLAG, ids=payload_probe.ids(FLAG, 24))
def test_every_payload_as_a_proposal_is_high_risk_and_poisoned(item):
    draft = {"operation": "add", "content": item["text"], "evidence": [{"trust": "agent", "excerpt": ""}]}
    level, reasons = risk.assess(draft, allowed_hosts=ALLOWED)
    assert level == "high" and risk.is_poisoned(level, reasons), (item["why"], level, reasons)
