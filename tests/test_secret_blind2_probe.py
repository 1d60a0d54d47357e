"""Blind probe of secret redaction, second family (tests/data/blind/secret-texts-2.json), written without reading
the code under test: secrets as they appear in agents' transcripts (shell, config, code, HTTP, CI output, notes in
several languages) must disappear from ``risk.redact``; benign look-alikes (hashes, ids, digests, public keys,
placeholders, names without values, prose about passwords) must come back unchanged."""

from __future__ import annotations

import pytest

from reviews.analysis import risk
from tests import payload_probe

# Left open, each with its reason (strict: a gap that closes fails until its mark goes). Found at stop 29: 43 of
# 286 failed; fixed since are vendor prefixes (Pulumi, Buildkite, Google OAuth), passwords given to keytool, zip, 7z,
# az, PsExec, rabbitmqctl, `net user`, chpasswd, PHP's define(), "set the pw to X", notes in eight more languages,
# and as benign: public PEM blocks and their base64, key fingerprints, ids named `*_id`, model names with size tags,
# masked or referenced URL passwords, `sk-...`, an empty `KEY=` at a line's end.
KNOWN_GAPS = {
    "python-escaped-single-quote": "a quoted argument with an escaped quote, passed by position: no name says password",
    "totp-seed-grouped": "a TOTP seed in lower-case base32 groups reads as words",
    "github-recovery-codes": "recovery codes are short hex pairs; only the file name says what they are",
    "google-backup-codes": "backup codes are groups of digits, like any numbered list",
    "gh-actions-cache-key": "a cache key ends in a digest but is named `key`: kept redacted rather than guess",
    "gpg-fingerprint": "a GPG fingerprint on a line of its own: upper-case hex near `keys`",
    "jwks-public": "a JWKS's public modulus reads as a random token beside `kid`",
    "changeme-docs": 'decided: a default password is still a password ("changeme" opens the systems left at it)',
}


SECRETS, BENIGN = payload_probe.secret_items("secret-texts-2.json")


@pytest.mark.parametrize("item", payload_probe.by_id(SECRETS, KNOWN_GAPS), ids=[item["id"] for item in SECRETS])
def test_secret_is_redacted(item):
    payload_probe.assert_redacted(item)


@pytest.mark.parametrize("item", payload_probe.by_id(BENIGN, KNOWN_GAPS), ids=[item["id"] for item in BENIGN])
def test_benign_is_unchanged(item):
    assert risk.redact(item["text"]) == item["text"]
