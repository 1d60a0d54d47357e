"""Two families from the blind corpora of stop 27 (tests/data/blind/scenario-blind-7.json): a credential with no
vendor prefix is found by the word that names it, in the words teams use for it (a personal access token, a
shared-access signature, Schlüssel, clé, contraseña); and a long name made of words and numbers (a build flag, a
class name) is no secret, however many cases and digits it mixes."""

from __future__ import annotations

import pytest

from dreamweb.secret_scan import has_secret, redact

# 52 characters of lower case and digits: the shape of an Azure DevOps token, with no prefix to find it by.
BARE = "q7w3z5ygkd2mvbl4xrt6hneo5pacu3fj7sdk2lmz4rqvb6ytnwe7a"


@pytest.mark.parametrize(
    "text",
    [
        "Azure DevOps PAT for the feed: {}",
        "PAT (packaging read) = {} — expires in March",
        "the SAS for the export container is {}",
        "OTP seed {}",
        "HMAC for the webhook: {}",
        "Der Schlüssel für das Paketfeed lautet {}",
        "Zugangsdaten des Feeds: {}",
        "la clé du flux est {}",
        "le jeton d'accès : {}",
        "la clave del feed es {}",
        "a chave do feed é {}",
    ],
)
def test_a_bare_token_named_by_its_credential_word_is_redacted(text):
    written = text.format(BARE)
    assert has_secret(written)
    assert BARE not in redact(written)


@pytest.mark.parametrize(
    "text",
    [
        "Unity.exe -batchmode -quit -buildWindows64Player Builds/Game.exe",
        "chromium --enableHttp2PushForClusterNodes",
        "set useIPv6OnlyForClusterNodes in the chart",
        "the bean OAuth2AuthorizationCodeGrantFilter is registered twice",
        "see S3BucketNotificationConfig2 for the retry",
        "gradle assembleRelease2024Flavor failed",
    ],
)
def test_a_name_of_words_and_numbers_is_no_secret(text):
    assert not has_secret(text)
    assert redact(text) == text


@pytest.mark.parametrize(
    "token",
    [
        "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY",  # the pieces a random key falls into are too short
        "aB3dE5fG7hI9jK1lM3nO5pQ",
        "Zq8vR3mT1yL0pQ7wX2nB5cJ9",
    ],
)
def test_a_random_mix_of_cases_and_digits_is_still_a_key(token):
    assert has_secret("value " + token)
    assert token not in redact("value " + token)
