"""Agent authentication for the API: ``Authorization: Api-Key <key>``.

The request's row-level-security scope is set to the team of the key's public prefix (a database lookup that answers
a team id, nothing else: dreamweb.rls), the key is read inside that scope, its secret compared in constant time
against the stored sha256; a refused key empties the scope again.
"""

from __future__ import annotations

import functools
import hmac
import json
import threading
import time
from datetime import timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from . import prepared, rls
from .models import KEY_PREFIX, AgentKey, Team, hash_key

KEYWORD = "Api-Key"
# last_used_at is for people ("is this key still in use?"), not an audit log: one write a minute is plenty, and
# writing on every request would make every request of a key contend for the same row lock.
LAST_USED_RESOLUTION = timedelta(minutes=1)
_last_touch: dict[str, float] = {}
_last_touch_lock = threading.Lock()


class AgentPrincipal:
    """What ``request.user`` is for a key-authenticated request: an agent, not a person."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    def __init__(self, key: AgentKey):
        self.key = key
        self.pk = None

    def get_username(self) -> str:
        return f"key:{self.key.name}"

    def __str__(self) -> str:
        return self.get_username()


def parse_prefix(raw: str) -> str | None:
    """The public prefix of a key ``dw_<prefix>_<secret>``, or None when the key is not shaped like one."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1]


def _touch(key: AgentKey) -> None:
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    # Several requests of one key arrive together: only one per process and minute tries the write.
    with _last_touch_lock:
        seen = _last_touch.get(key.prefix, 0.0)
        if time.monotonic() - seen < LAST_USED_RESOLUTION.total_seconds():
            return
        _last_touch[key.prefix] = time.monotonic()
    # SKIP LOCKED: the row lock is held until the request's transaction commits, and a request that finds the row
    # locked is another process's touch of the same minute (or a change of the key): waiting for it would queue this
    # request behind the whole of the other one (a worker's first request builds its ranking data, 0.3 s and more),
    # and, having waited, lock the row in turn for every later one. Nothing is lost by skipping: that write is enough.
    stale = AgentKey.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION), pk=key.pk
    ).order_by()  # no ordering: the model's joins the team, whose row must not be locked too
    if connection.in_atomic_block:
        stale = AgentKey.objects.filter(pk__in=stale.select_for_update(skip_locked=True, no_key=True).values("pk"))
    stale.update(last_used_at=now)


# The key's team in the key's statement, for a view's extra columns.
KEY_TEAM_COLUMN = 'k."team_id"'


class KeyStatementExtra:
    """Columns a view asks the key's own statement to read (scalar expressions, and a join, over ``k``, the key's
    row), so that the view's first question of the database costs no statement of its own (the context's ranking
    check: memory.api.context). They are read in a lateral subquery gated on the stored hash being the presented
    secret's (and on the key holding the scope the view requires): for a wrong secret, or a key the view will refuse,
    the database reads nothing of the team's (no answer, and no timing, depends on its data). ``values`` holds them
    after the read; ``read`` says whether it happened (on PostgreSQL, inside the request's transaction, for a key the
    gate accepted)."""

    def __init__(self, columns: str, join: str, params: list, *, scope: str = ""):
        # Constant SQL texts from the view; every value is in ``params`` (the columns', then the join's). ``scope``:
        # the one the view's permission requires, so that a key without it reads nothing either (it gets its 403).
        self.columns, self.join, self.params, self.scope = columns, join, params, scope
        self.values: tuple = ()
        self.read = False


# The key is the one presented (its stored hash, a parameter), not revoked and not expired: what authenticate accepts.
_ACCEPTED = 'k."hashed_key" = %s AND k."revoked_at" IS NULL AND (k."expires_at" IS NULL OR k."expires_at" > now())'
# ... and holds the scope the view requires (scopes: a jsonb array of names; the scope a parameter).
_HOLDS_SCOPE = ' AND k."scopes" @> %s::jsonb'


@functools.cache
def _key_statement(vendor: str) -> tuple[str, str, list, int]:
    """The key with this prefix and its team, as ``AgentKey.objects.select_related("team").filter(prefix=...)``
    reads them, written out once per process: building that query through the ORM on every request cost more CPU
    than the rest of the key's check (docs/benchmarks.md, issue 15, stop 20). Returns the select list and the tables
    of the SQL, the converters the ORM would apply to its columns (JSON fields; SQLite's dates), and the number of
    the key's columns."""
    columns = [f.get_col("k") for f in AgentKey._meta.concrete_fields]
    columns += [f.get_col("t") for f in Team._meta.concrete_fields]
    # Table and column names come from the models; the prefix is a parameter, and unique: one row or none.
    select = ", ".join(f'{c.alias}."{c.target.column}"' for c in columns)
    tables = f'"{AgentKey._meta.db_table}" k JOIN "{Team._meta.db_table}" t ON t."id" = k."team_id"'
    converters = []
    for i, column in enumerate(columns):
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if found:
            converters.append((i, found, column))
    return select, tables, converters, len(AgentKey._meta.concrete_fields)


def _read_key(prefix: str, extra: KeyStatementExtra | None = None, presented: str = "") -> AgentKey | None:
    select, tables, converters, split = _key_statement(connection.vendor)
    if extra is None:
        sql, params = f'SELECT {select} FROM {tables} WHERE k."prefix" = %s', [prefix]  # noqa: S608
    else:
        # The gate's verdict comes back as the first column (NULL when refused): a refused row's NULLs must never
        # read as answers (a NULL store would be "no such store"). The database's clock may judge expiry a moment
        # apart from authenticate's; the view then takes the separate check.
        accepted, scope = (_ACCEPTED + _HOLDS_SCOPE, [json.dumps([extra.scope])]) if extra.scope else (_ACCEPTED, [])
        gated = f"SELECT true, {extra.columns} FROM (SELECT 1) AS one {extra.join} WHERE {accepted}"  # noqa: S608
        sql = f'SELECT {select}, x.* FROM {tables} LEFT JOIN LATERAL ({gated}) AS x ON true WHERE k."prefix" = %s'  # noqa: S608
        params = [*extra.params, presented, *scope, prefix]
    with prepared.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(AgentKey._meta.concrete_fields) + len(Team._meta.concrete_fields)
    values = list(row[:width])
    for i, found, column in converters:
        for convert in found:
            values[i] = convert(values[i], column, connection)
    key = AgentKey.from_db(connection.alias, None, values[:split])
    key.team = Team.from_db(connection.alias, None, values[split:])
    if extra is not None and row[width] is True:
        extra.values, extra.read = tuple(row[width + 1 :]), True
    return key


def _lookup(prefix: str, extra: KeyStatementExtra | None = None, presented: str = "") -> AgentKey | None:
    """The key with this prefix, read inside its own team's scope (which the request keeps if the key is good), with
    the view's extra columns (read only if ``presented``, the presented secret's hash, is the key's) when it is read
    in the request's transaction."""
    if not (rls.is_postgres() and connection.in_atomic_block):
        with rls.scope(""):  # outside a request's transaction: a block of its own
            rls.enter_key_scope(prefix)
            return _read_key(prefix)
    rls.enter_key_scope(prefix)
    return _read_key(prefix, extra, presented)


def _view_extra(request) -> KeyStatementExtra | None:
    """What the view of this request asks the key's statement to read (``key_statement_extra(request)``), if any."""
    view = (getattr(request, "parser_context", None) or {}).get("view")
    ask = getattr(view, "key_statement_extra", None)
    return ask(request) if ask is not None and rls.is_postgres() else None


def _refuse(message: str) -> exceptions.AuthenticationFailed:
    rls.set_scope("")  # the prefix's team was entered before the secret was checked
    return exceptions.AuthenticationFailed(message)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        keyword, _, raw = header.partition(" ")
        if keyword.lower() != KEYWORD.lower():
            return None  # another scheme: not ours; the permission then answers 401
        raw = raw.strip()
        if not raw or " " in raw:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: use `Authorization: Api-Key <key>`.")
        prefix = parse_prefix(raw)
        if prefix is None:
            raise exceptions.AuthenticationFailed("Invalid API key.")
        presented = hash_key(raw)
        key = _lookup(prefix, _view_extra(request), presented)
        # Compare even when no key was found, so that timing does not reveal which prefixes exist.
        expected = key.hashed_key if key is not None else "0" * 64
        if not hmac.compare_digest(presented, expected) or key is None:
            raise _refuse("Invalid API key.")
        if key.revoked_at is not None:
            raise _refuse(f"This API key was revoked on {key.revoked_at:%Y-%m-%d %H:%M} UTC.")
        if key.expires_at is not None and key.expires_at <= timezone.now():
            raise _refuse(f"This API key expired on {key.expires_at:%Y-%m-%d %H:%M} UTC.")
        # From here on the request's transaction sees only the key's team (PostgreSQL row-level security): the scope
        # _lookup entered.
        _touch(key)
        return AgentPrincipal(key), key

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) to unauthenticated requests, with a WWW-Authenticate challenge.
        return f'{KEYWORD} realm="api"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "dreamweb.api_auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <key>`: an agent key created by a team admin (shown once).",
        }
