"""Production settings from the environment: `check --deploy` clean with the documented production environment,
security headers and a Content-Security-Policy on every page, sign-in locked after repeated failures, and the API's
per-key rate limit shared by every worker process (two processes, one limit)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.test import RequestFactory, override_settings

from dreamweb.security import client_ip
from tests.factories import UserFactory
from tests.page_support import PageClient
from tests.scoping import all_teams

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_ENV = ROOT / "deploy" / "production.env"
REDIS_URL = os.environ.get("DREAMWEB_TEST_REDIS_URL", "")


def production_env() -> dict:
    values = {}
    for line in PRODUCTION_ENV.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def _check_deploy(env: dict) -> subprocess.CompletedProcess:
    # Only what a production process would have: the documented variables, none of the test run's.
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV", "PYTHONPATH")}
    clean.update(env)
    clean["DATABASE_URL"] = "sqlite:///:memory:"  # the checks need no database
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_is_clean_with_the_documented_production_environment():
    done = _check_deploy(production_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_without_it_check_deploy_names_what_is_missing():
    done = _check_deploy({"DEBUG": "false", "SECRET_KEY": production_env()["SECRET_KEY"]})
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stdout + done.stderr


@pytest.mark.django_db
def test_every_page_has_a_content_security_policy_and_the_security_headers():
    response = PageClient().get("/accounts/login/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy.split("style-src-attr")[0]  # scripts and style sheets: this site only
    assert response["X-Frame-Options"] == "DENY" and response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.django_db
@override_settings(SECURE_SSL_REDIRECT=True, SECURE_HSTS_SECONDS=31536000, SECURE_PROXY_SSL_HEADER=(
    "HTTP_X_FORWARDED_PROTO", "https"))  # fmt: skip
def test_https_redirect_and_hsts_behind_the_proxy():
    client = PageClient()
    plain = client.get("/accounts/login/")
    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    assert client.get("/healthz").status_code == 200  # the health check stays reachable over plain HTTP
    secure = client.get("/accounts/login/", headers={"X-Forwarded-Proto": "https"})
    assert secure.status_code == 200 and secure["Strict-Transport-Security"].startswith("max-age=31536000")


@pytest.fixture
def rita(db):
    with all_teams():
        return UserFactory(username="rita", password="the-right-one")


def _sign_in(client, password: str, address: str = "203.0.113.7"):
    return client.post("/accounts/login/", {"username": "rita", "password": password}, REMOTE_ADDR=address)


def test_sign_in_is_locked_after_repeated_failures(rita, settings):
    settings.AXES_FAILURE_LIMIT = 5
    client = PageClient()
    for _ in range(4):
        assert _sign_in(client, "wrong").status_code == 200  # the form again, with its error
    assert _sign_in(client, "wrong").status_code == 429  # the fifth failure locks
    locked = _sign_in(client, "the-right-one")
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.content.decode()
    assert "_auth_user_id" not in client.session  # the right password does not get in while locked
    # Another address is not locked out by someone else's guesses (the lock is per username and address).
    assert _sign_in(PageClient(), "the-right-one", address="198.51.100.9").status_code == 302


def test_a_success_before_the_limit_starts_the_count_again(rita, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client = PageClient()
    for _ in range(2):
        _sign_in(client, "wrong")
    assert _sign_in(client, "the-right-one").status_code == 302
    client.logout()
    for _ in range(2):
        assert _sign_in(client, "wrong").status_code == 200


@pytest.mark.parametrize(
    "proxies, remote, forwarded, expected",
    [
        (0, "10.0.0.5", "", "10.0.0.5"),
        (0, "10.0.0.5", "6.6.6.6", "10.0.0.5"),  # no proxy trusted: a client's header is ignored
        (1, "10.0.0.5", "203.0.113.7", "203.0.113.7"),  # what the proxy saw
        (1, "10.0.0.5", "6.6.6.6, 203.0.113.7", "203.0.113.7"),  # a forged first entry does not count
        (2, "10.0.0.5", "6.6.6.6, 203.0.113.7, 10.0.0.9", "203.0.113.7"),
        (1, "10.0.0.5", "", "10.0.0.5"),  # a proxy that sent no header: its own address
    ],
)
def test_the_client_address_behind_trusted_proxies(settings, proxies, remote, forwarded, expected):
    settings.DREAMWEB_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


WORKER = textwrap.dedent(
    """
    import os, sys, time
    import django
    django.setup()
    from dreamweb.api_throttling import AgentKeyRateThrottle
    from dreamweb.models import AgentKey

    class Request:
        auth = AgentKey(prefix="shared-key")

    start = float(sys.argv[1])
    while time.time() < start:
        time.sleep(0.001)
    allowed = sum(AgentKeyRateThrottle().allow_request(Request(), None) for _ in range(int(sys.argv[2])))
    print(allowed)
    """
)


@pytest.mark.skipif(not REDIS_URL, reason="needs Redis (DREAMWEB_TEST_REDIS_URL)")
def test_the_api_rate_limit_is_one_limit_for_two_processes():
    import time

    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {**os.environ, "REDIS_URL": REDIS_URL, "DATABASE_URL": "sqlite:///:memory:", "DJANGO_SETTINGS_MODULE":
           "dreamweb.settings", "DREAMWEB_API_KEY_RATE": "40/hour"}  # fmt: skip
    if 3600 - time.time() % 3600 < 60:  # not across the start of a new window
        time.sleep(3600 - time.time() % 3600 + 1)
    start = str(time.time() + 3)  # both processes start counting together
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, start, "60"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    results = [p.communicate(timeout=60) for p in procs]
    allowed = [int(out.strip()) for out, err in results]
    assert sum(allowed) == 40, (allowed, [err for _, err in results])  # 80 if each process counted alone
