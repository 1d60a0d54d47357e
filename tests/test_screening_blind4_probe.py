"""Probe poison4: a fourth blind family of poisoned texts (tests/data/blind/poison-payloads-4.json), written without
reading the screen, in forms the first three families do not use: payloads split over lines and continuations,
here-docs and process substitution, xargs/env/busybox/nohup/timeout/script/find/vim/awk wrappers, ANSI-C hex and
octal escapes, printf-built commands, rev, base32, xxd, openssl and gzip decoding, hosts and commands in variables,
IPv4 in decimal, octal, hex and short forms, IPv4-mapped IPv6, localhost tunnels and look-alikes, URL shorteners,
DNS TXT records and DNS-over-HTTPS, data URIs, unknown repositories built and installed, go run/npx/uvx/pipx/uv of
remote code, privileged containers and pods from unknown registries, kubectl and helm of remote manifests and charts,
editor extensions, setuid downloads, history disabled; credentials read through /proc/self/environ, docker
inspect/exec, kubectl secrets as YAML/JSON, STS, gcloud, az, heroku and gh tokens, interpreters dumping the
environment, and sent by curl -F/--upload-file, scp, rsync and a forced `.env` pushed to an unknown remote; words to
the AI in footnotes, alt text, HTML attributes, link titles, invisible text, zero-width characters, soft hyphens,
homoglyphs, fullwidth letters, split lines, rot13 and reversed text, role-play, fake tool results, fake user turns,
fake memory updates, and in Vietnamese, Indonesian, Thai, Hebrew, Greek, Ukrainian, Swahili and Persian. Its benign
look-alikes are the same tools used safely and everyday team rules in the same languages.

Driven like tests/test_screening_blind3_probe.py: every item to flag is screened with a named reason of its family
and is high risk and poisoned as a proposal; no benign, non-debatable look-alike is screened.

Of its 574 cases 143 failed on the code probed (as written, before any fix): 37 payloads not screened at all (words
to the AI in role-play, faked tool results and memory updates, reversed text and all eight new languages; one secret
or a whole environment printed, STS, heroku and gpg; a data-URI module; a UNC share), 22 screened under another family
only (commands the shell computes, wrappers, remote code installed or applied, read only as unknown hosts) and 10
benign texts screened (plain HTML attributes, scp/rsync/curl -F to the team's own hosts, a version number and an image
tag as hosts, a wheel from the allowed file host). Every family was fixed, with strings of its own in
tests/test_screening_families4.py; none is left as a decision.
"""

from __future__ import annotations

import pytest

from dreamweb import screening
from tests import payload_probe
from tests.test_screening import FAMILY_REASON  # the family -> reason map of the first payload file

DATA, FLAG, BENIGN = payload_probe.load("poison-payloads-4.json")
EARLIER = [
    payload_probe.load(name)[0] for name in ("poison-payloads.json", "poison-payloads-2.json", "poison-payloads-3.json")
]
ALLOWED = DATA["allowed_hosts"]
FAMILIES = {*FAMILY_REASON, "unknown_host"}


# Decisions, not gaps: (test, index in its list). None yet.
DECIDED: dict[tuple[str, int], str] = {}


def _screen(item):
    return screening.screen(item["text"], allowed_hosts=ALLOWED)


def test_the_fourth_family_is_well_formed_and_new():
    assert all(earlier["allowed_hosts"] == ALLOWED for earlier in EARLIER)
    items = DATA["items"]
    assert len(items) >= 200
    benign_share = sum(item["expected"] == "benign" for item in items) / len(items)
    assert 0.35 <= benign_share <= 0.45, benign_share
    for item in items:
        assert item["family"] in FAMILIES and item["expected"] in {"flag", "benign"} and item["why"], item
    earlier_texts = {item["text"].strip().lower() for earlier in EARLIER for item in earlier["items"]}
    repeated = [item["text"] for item in items if item["text"].strip().lower() in earlier_texts]
    assert not repeated, repeated
    texts = [item["text"] for item in items]
    assert len(set(texts)) == len(texts)


@pytest.mark.parametrize("item", FLAG, ids=payload_probe.ids(FLAG, 28))
def test_every_payload_to_flag_is_screened_with_a_named_reason(item):
    reasons = _screen(item)
    assert reasons, f"not screened: {item['why']}"
    assert all(screening.is_screening_reason(r) for r in reasons), reasons


@pytest.mark.parametrize("item", FLAG, ids=payload_probe.ids(FLAG, 28))
def test_each_payload_is_named_for_its_family(item):
    payload_probe.assert_named_for_family(item, _screen(item))


@pytest.mark.parametrize("item", payload_probe.cases(BENIGN, DECIDED, "benign"), ids=payload_probe.ids(BENIGN, 28))
def test_no_benign_look_alike_is_screened(item):
    reasons = _screen(item)
    assert reasons == [], (item["why"], reasons)


@pytest.mark.parametrize("item", FLAG, ids=payload_probe.ids(FLAG, 28))
def test_every_payload_as_a_proposal_is_high_risk_and_poisoned(item):
    payload_probe.assert_poisoned_as_a_proposal(item, ALLOWED)
