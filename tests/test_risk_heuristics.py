"""The secret heuristics of reviews.analysis.risk at their edges: each threshold and each condition of the
password-, key- and token-shaped rules, seen through find_secrets/redact (the functions the services call). The mutation
bench (docs/mutation.md) found these rules without a test on either side of their edges."""

from __future__ import annotations

import pytest

from reviews.analysis import risk


def redacted(text: str) -> bool:
    return risk.redact(text) != text


# `login: ops / <pw>`: a user name, a slash and a word is a password when the text talks about credentials and the
# word is 6 or more characters of letters and digits with a symbol or mixed case. The words are too short for the
# typed-password and context-token rules, so only the user/password rule decides.
@pytest.mark.parametrize(
    "word,is_password",
    [
        ("Ab1cde", True),  # 6 characters: the shortest password
        ("Ab1cdef", True),
        ("Ab1cdeX", True),  # redacted to its last letter
        ("Ab1cd.", False),  # the trailing full stop ends the sentence: 5 characters left
        ("Ab1.cd", False),  # a dotted name
        ("abc12#", True),  # lower case, a digit and a symbol
        ("ABC12#", True),  # upper case, a digit and a symbol
        ("abc123", False),  # one case, no symbol: a name with a number
        ("ABC123", False),
        ("Abcdef", False),  # no digit
        ("123456", False),  # no letter
    ],
)
def test_user_slash_password_needs_six_characters_letters_digits_and_a_symbol_or_mixed_case(word, is_password):
    text = f"login: ops / {word}"
    assert redacted(text) is is_password
    if is_password:
        assert risk.redact(text) == "login: ops / [REDACTED]"


# With no credential word around it, a word is a typed password only with lower case, upper case, a digit and a
# symbol, and no slash, brackets or `=` (paths, calls, settings) and not an e-mail address.
@pytest.mark.parametrize(
    "word,is_password",
    [
        ("Ab1!cdef", True),
        ("AB12!CDE", False),  # no lower case
        ("ab12!cde", False),  # no upper case
        ("Ab1!cd/ef", False),  # a path
        ("Ab1!x=Yz9", False),  # a setting
        ("f(Ab1!cde)", False),  # a call
        ("Ann+tag1@Mail.com", False),  # an address
    ],
)
def test_a_typed_password_needs_both_cases_a_digit_and_a_symbol_and_is_no_path_or_address(word, is_password):
    assert redacted(f"{word} is here") is is_password


def test_a_long_token_of_few_distinct_characters_is_no_key():
    # three character classes but an entropy far below a key's
    assert not redacted("build aaaaaaaaaaAAAAAAAAAA1111111111 done")
    assert redacted("build aK9xQ2mZ7pL4vR8tW3yB6nC1 done")


def test_a_long_token_needs_lower_case_upper_case_and_digits_to_be_a_key():
    assert not redacted("serial X7K9Q2MZ4PL8VR3TW6YB5 on the box")  # a serial number: no lower case
    assert redacted("serial X7k9Q2MZ4PL8VR3TW6YB5 on the box")


@pytest.mark.parametrize("prefix", ["http", "www"])
def test_a_long_token_that_begins_like_an_address_is_no_key(prefix):
    # the same random-looking value is a key unless it begins with http or www
    assert not redacted(f"{prefix}Root=Site9Build_Eu4West2x")
    assert redacted(f"xyz{prefix}Root=Site9Build_Eu4West2x")


def found(text: str) -> list[tuple[str, str]]:
    return sorted((kind, text[start:end]) for kind, start, end in risk.find_secrets(text))


# The kind is what a reviewer reads ("An agent saved a credential in-band (webhook URL): ..."), the span is what
# redaction removes: each rule names its kind and spans the secret only.
@pytest.mark.parametrize(
    "text,expected",
    [
        (
            "notify https://hooks.slack.com/services/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 when green",
            [
                ("URL credential", "q3VvYw8Kp0LmNa7TsUe2RjXd"),
                ("webhook URL", "services/T7HQ2LK9A/B05RZ8M1C/q3VvYw8Kp0LmNa7TsUe2RjXd"),
            ],
        ),
        ("https://store.example.org/f.zip?sig=Qw7rT2yU9&exp=2026", [("URL credential", "Qw7rT2yU9")]),
        ("https://status.example.io/api/key/Zt8pQw3LmN6vRx1Y/incidents", [("URL credential", "Zt8pQw3LmN6vRx1Y")]),
        (
            "share https://files.example.com/s/Ab3dEf7GhJ2kLmN9pQ4rStU for the dump",
            [("URL credential", "Ab3dEf7GhJ2kLmN9pQ4rStU")],
        ),
        ("db01.internal:5432:orders:reporter:Plum-Harbor-41", [("password file line", "Plum-Harbor-41")]),
        ("mysql -h db -u admin -pMarble88 shop", [("command-line password", "Marble88")]),
        ("password=hunter2x9", [("credential", "hunter2x9")]),
        ("build aK9xQ2mZ7pL4vR8tW3yB6nC1 done", [("high-entropy token", "aK9xQ2mZ7pL4vR8tW3yB6nC1")]),
        ("Ab1!cdef is here", [("credential", "Ab1!cdef")]),
        ("login: ops / Ab1cde", [("credential", "Ab1cde")]),
        ("the key: Ab1cdeFgh2ij", [("credential", "Ab1cdeFgh2ij")]),
    ],
)
def test_each_rule_names_its_kind_and_spans_the_secret_only(text, expected):
    assert found(text) == expected
    assert risk.secret_kinds(text) == sorted({kind for kind, _ in expected})


# After a credential word: a value that says the credential is absent, or describes it, is none.
@pytest.mark.parametrize(
    "text",
    [
        "password: Required",
        "token: NEEDED",
        "api key: Missing",
        "The password: required.",
        "the password is rotated.",
        "the password is elsewhere",
        "the password is encrypted at rest",
        "the password is expiring soon",
        "the password is usually rotated",
        "password=[REDACTED]",  # text redacted once stays as it is
    ],
)
def test_placeholders_and_descriptions_after_a_credential_word_are_no_secret(text):
    assert risk.find_secrets(text) == []


# A plain word after a password word (whatever the language, with or without a space) is the password.
@pytest.mark.parametrize(
    "text,secret",
    [
        ("password=swordfish", "swordfish"),
        ("pw:swordfish", "swordfish"),
        ("password: swordfish", "swordfish"),
        ("Mot de passe: soleil", "soleil"),
        ("password: required, token=Zq8xW2vB9", "Zq8xW2vB9"),  # a placeholder does not hide the next credential
        ("the password is encrypted, the token=Zq8xW2vB9", "Zq8xW2vB9"),  # nor does a description
    ],
)
def test_a_plain_word_after_a_password_word_is_the_password(text, secret):
    assert found(text) == [("credential", secret)]


# In a text about credentials, a token of 12 or more letters and digits is the credential when its entropy reaches
# 3 bits a character (8 characters, each twice: exactly 3.0; 7 characters, each twice: 2.8), and is not a
# lower-case slug (a branch, a page or a release name).
@pytest.mark.parametrize(
    "text,is_secret",
    [
        ("staging key ab12cd34ab12cd34", True),
        ("staging key ab12cd3ab12cd3", False),
        ("staging key Xq7Lm2Rt9Vz4Kp", True),
        ("token docs at release-2024-notes", False),
    ],
)
def test_a_token_beside_a_credential_word_needs_three_bits_a_character_and_no_slug(text, is_secret):
    assert redacted(text) is is_secret


@pytest.mark.parametrize(
    "text,expected",
    [
        # a secret at the very start of the text
        ("ghp_Zx81LmQpT3vN0aBcD4eFgH5iJkL6mNoP7qRs pushes the tags", "[REDACTED] pushes the tags"),
        # overlapping spans (a query value inside a longer token) give one marker over the longest, and a later
        # secret is still replaced
        (
            "export https://grafana.example.net/render?orgId=1&apiToken=GrafExport2026xyz and password=hunter2x9",
            # (the parameter's name stays, as a variable's does: `GH_TOKEN=[REDACTED]`)
            "export https://grafana.example.net/render?orgId=1&apiToken=[REDACTED] and password=[REDACTED]",
        ),
    ],
)
def test_redaction_replaces_each_secret_once_and_keeps_every_other_character(text, expected):
    assert risk.redact(text) == expected
    assert risk.redact(expected) == expected


# A URL path segment with lower-case words in it is a page name when the words make 40 % of it or more (8 of 20
# characters: `abcd`, `efgh`), a token below (7 of 20).
@pytest.mark.parametrize("segment,is_token", [("Xk9Qabcd7ZP2efghM4T1", False), ("Xk9Qabcd7ZP2efgHM4T1", True)])
def test_a_url_segment_is_a_page_name_from_forty_percent_of_words(segment, is_token):
    assert redacted(f"share https://files.example.com/s/{segment} for the dump") is is_token


# After any credential word (not only a password word), a value that is not a plain lower-case word is the credential.
@pytest.mark.parametrize(
    "text,secret", [("api token: k3yb0ard99", "k3yb0ard99"), ("the secret is Swordfish", "Swordfish")]
)
def test_a_value_that_is_no_plain_word_after_any_credential_word_is_the_credential(text, secret):
    assert found(text) == [("credential", secret)]


# Beside a credential word, a word with a digit, a letter and a symbol is the credential even in one case, unless it is
# a path (the words after it are still read) or an address.
@pytest.mark.parametrize(
    "text,expected",
    [
        ("staging key zz#12345x", [("credential", "zz#12345x")]),
        ("staging key in ./run#1x/job2 then zz#12345x", [("credential", "zz#12345x")]),
        ("login as ann+ops1@mail.example.com", []),
    ],
)
def test_a_symbol_word_beside_a_credential_word_is_the_credential_unless_a_path_or_address(text, expected):
    assert found(text) == expected


def test_of_overlapping_spans_from_one_start_the_longest_is_redacted():
    # the value after `password:`, the typed-password token and the long token all start at the value
    assert risk.redact("password: Xk9Qm2Lp7Rt4Vz8Wb3Yn#!") == "password: [REDACTED]"
