"""Probe poison3: a third blind family of poisoned texts (tests/data/blind/poison-payloads-3.json), written without
reading the screen, in forms the first two families do not use: fetch-and-run in Ruby, Perl, PHP, Node, Lua, R,
Julia, Go, Java and .NET; package-manager hooks (npm lifecycle scripts, setup.py); CI files, Dockerfiles, Makefiles,
git hooks and aliases, ssh ProxyCommand, cron, systemd, shell rc files, editor tasks, Terraform, Ansible, Gradle and
CMake; keychains and credential managers on macOS, Windows and Linux; cloud metadata endpoints in several spellings;
data sent away through DNS, ICMP, chat webhooks, pastebins, mail and public gists; words to the AI, the model, the
reviewer or the memory system in YAML, JSON, TOML and CSV values, code comments, commit messages, filenames, error
and log messages, tables, and in Japanese, Chinese, Russian, Arabic, Hindi, Korean, Turkish and Polish; look-alike
hosts (punycode, typosquats, allowed hosts as subdomains of unknown ones, userinfo). Its benign look-alikes are what
a team writes every day (CI jobs, Dockerfiles, credential helpers, metadata hardening, polite requests to follow the
team's rules, in the same languages).

Driven like tests/test_screening_blind2_probe.py: every item to flag is screened with a named reason of its family
and is high risk and poisoned as a proposal; no benign, non-debatable look-alike is screened.

Of its 502 cases 155 failed on the code probed (stop 28): 48 payloads not screened (fetch-and-run in other
languages, download-then-run by other runners, credential stores of Windows, KDE, build tools and browsers, cloud
metadata addresses, words to the memory system, the reviewing model or the AI in values, file names and five more
languages) and 7 benign texts screened (`actions/checkout@v4` read as a user at host "v4", `pip --index-url` of the
allowed index as remote code, literal `curl -d` data to an allowed host and advice against pastebins as
exfiltration, a bare Chinese "ignore" before "lint warnings" as an injection). The families were fixed with tests of
their own (tests/test_screening_families3.py). One stays, as a decision, strict xfail: an ssh config naming a
private key (`IdentityFile ~/.ssh/id_ed25519`) is flagged as a credential read, as every mention of a key path is.
"""

from __future__ import annotations

import pytest

from dreamweb import screening
from tests import payload_probe
from tests.test_screening import FAMILY_REASON  # the family -> reason map of the first payload file

DATA, FLAG, BENIGN = payload_probe.load("poison-payloads-3.json")
EARLIER = [payload_probe.load(name)[0] for name in ("poison-payloads.json", "poison-payloads-2.json")]
ALLOWED = DATA["allowed_hosts"]
FAMILIES = {*FAMILY_REASON, "unknown_host"}


# Decisions, not gaps (see the module's docstring): (test, index in its list).
DECIDED = {
    ("benign", 45): "naming a private key path is flagged as a credential read wherever it appears",
}


def _screen(item):
    return screening.screen(item["text"], allowed_hosts=ALLOWED)


def test_the_third_family_is_well_formed_and_new():
    assert all(earlier["allowed_hosts"] == ALLOWED for earlier in EARLIER)
    items = DATA["items"]
    assert len(items) >= 150
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
