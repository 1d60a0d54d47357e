"""A credential glued to a name by an underscore (`http_ghp_…`, a tool `deploy_sk-…`, `…_prod`) is still the
credential: a token's edges are where letters and digits stop, not where word characters do. Ordinary words that
end like a prefix (`task-`, `desk-`) stay words."""

from __future__ import annotations

import pytest

from dreamweb.secret_scan import has_secret, redact

TOKENS = {
    "github": "ghp_" + "R4nd0mT0k3nR4nd0mT0k3nR4nd0mT0k3n12",
    "github fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "openai": "sk-proj-" + "Zq8vR3mT1yL0pQ7wX2nB5cJ9",
    "anthropic": "sk-ant-" + "api03-Zq8vR3mT1yL0pQ7wX2nB5cJ9kD4",
    "stripe": "sk_live_" + "51Hx9aQ2bC3dE4fG5hI6",
    "gitlab": "glpat-" + "Zq8vR3mT1yL0pQ7wX2nB",
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "slack": "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl",
    "google": "AIza" + "SyD3xAmPl3K3yF0rT3st1ngPurp0s3s12",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
    "npm": "npm_" + "Zq8vR3mT1yL0pQ7wX2nB5cJ9kD4fH6gA",
    "hugging face": "hf_" + "Zq8vR3mT1yL0pQ7wX2nB5cJ9kD4fH6gA",
}


@pytest.mark.parametrize("glue", ["http_{}", "deploy_{}", "{}_prod", "x_{}_y", "__{}__"])
@pytest.mark.parametrize("name", sorted(TOKENS))
def test_a_token_glued_by_underscores_is_found_and_redacted(name, glue):
    text = "tool " + glue.format(TOKENS[name]) + " ran"
    assert has_secret(text), text
    assert TOKENS[name] not in redact(text)
    assert TOKENS[name][6:20] not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "task-abcdefghijklmnopqrstuvw finished",
        "desk-booking-service-for-the-office-floor",
        "the mask-rcnn-resnet50-fpn-coco weights",
        "run make-test_fixtures_for_billing_service",
        "ghp_short is not a token",
        "package husk_keyboard_layout_switcher_v2",
    ],
)
def test_words_that_end_like_a_prefix_stay_words(text):
    assert not has_secret(text), text
    assert redact(text) == text
