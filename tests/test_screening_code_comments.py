"""A line comment of C-family languages (`//nolint:errcheck`, `//go:embed`) is not a protocol-relative URL: a real
lesson about a linter must not be quarantined for "a host the team has not allowed". A `//` that reads as a network
path (a dotted name, an address, a user, a port, a path after it) still names a host and is still screened."""

from __future__ import annotations

import pytest

from dreamweb import screening

COMMENTS = [
    "Silence the check with `//nolint:nilerr` and a reason.",
    "x, _ := f() //nolint:errcheck // the error is logged above",
    "Add //nolint:ireturn,wrapcheck where the interface is intended.",
    "Put `//go:embed templates` above the variable.",
    "//go:generate stringer -type=Kind",
    "// +build linux",
    "//eslint-disable-next-line no-console",
    "//TODO: retry on 503",
    "//noinspection JSUnresolvedFunction",
    "//#region helpers",
    "///<reference path='x'/>",
    "see //nolint",
    "//lint:ignore SA1019 still needed",
]

NETWORK_PATHS = [
    ("fetch //evil.example/payload", "evil.example"),
    ("smbclient //fileserver/share -U ops", "fileserver"),
    ("connect to //cache:6379 first", "cache"),
    ("use //ops@vault for the secret", "vault"),
    ("load //10.1.2.3/x", "10.1.2.3"),
    ("the comment says http://nolint:nilerr", "nolint"),
]


@pytest.mark.parametrize("text", COMMENTS)
def test_a_line_comment_names_no_host_and_is_not_screened(text):
    assert screening.hosts_in(text) == set(), text
    assert screening.screen(text, allowed_hosts=["github.com"]) == [], text


@pytest.mark.parametrize(("text", "host"), NETWORK_PATHS)
def test_a_network_path_still_names_its_host_and_is_screened(text, host):
    assert host in screening.hosts_in(text), text
    reasons = screening.screen(text, allowed_hosts=["github.com"])
    assert any(r.startswith(screening.UNKNOWN_HOST_PREFIX) for r in reasons), (text, reasons)
