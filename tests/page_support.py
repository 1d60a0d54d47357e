"""Helpers for the page tests.

On PostgreSQL a test runs in one transaction, and each request's middleware narrows the transaction-local team
scope to the signed-in person's teams; PageClient gives the test code its all-teams scope back after every request
(like tests/api_support.Api does for the API), so assertions can look at any row.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client


def restore_test_scope() -> None:
    if connection.vendor == "postgresql" and connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('dreamweb.team_ids', '*', true)")


class PageClient(Client):
    def request(self, **request):
        try:
            return super().request(**request)
        finally:
            restore_test_scope()


@pytest.fixture
def client():
    return PageClient()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The personas get passwords; the default hasher makes that the slowest part of a page test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
