"""Helpers for the page tests.

On PostgreSQL a test runs in one transaction, and each request's middleware sets the transaction-local team scope
to the signed-in person's teams; PageClient sends every request from an empty scope, as a real request starts, and
gives the test code its own scope back afterwards (like tests/api_support.Api does for the API; tests/scoping.py).
"""

from __future__ import annotations

import pytest
from django.test import Client

from .scoping import no_scope


class PageClient(Client):
    def request(self, **request):
        with no_scope():
            return super().request(**request)


@pytest.fixture
def client():
    return PageClient()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The personas get passwords; the default hasher makes that the slowest part of a page test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
