"""The database wall against the application role itself: it cannot widen its own scope to every team (raw SQL), its
questions across teams answer ids only, and no row can point at another team's row (composite foreign keys; a plain
foreign key check bypasses row-level security and would also reveal whether an id exists)."""

from __future__ import annotations

import psycopg
import pytest
from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, models, transaction
from django.utils import timezone

from dreamweb import rls
from memory.models import ContextServe, Feedback
from reviews.models import SessionAnalysis
from tests.api_support import make_key
from tests.conftest import app_credentials, is_postgres
from tests.factories import MembershipFactory, SessionFactory, StoreFactory, TeamFactory, UserFactory, make_entry
from tests.scoping import all_teams

pytestmark = [
    pytest.mark.skipif(not is_postgres(), reason="the database wall is PostgreSQL row-level security"),
    pytest.mark.django_db,
]


def _has_team(model) -> bool:
    return any(f.name == "team" and f.is_relation for f in model._meta.concrete_fields)


TEAM_MODELS = [m for m in apps.get_models() if _has_team(m)]
TEAM_TABLES = sorted({"dreamweb_team", *(m._meta.db_table for m in TEAM_MODELS)})


def _links() -> list[tuple[str, str, str]]:
    """(table, column, parent table) of every reference from a team-owned row to another team-owned row."""
    out = set()
    for model in TEAM_MODELS:
        for field in model._meta.concrete_fields:
            if field.is_relation and field.name != "team" and _has_team(field.related_model):
                out.add((model._meta.db_table, field.column, field.related_model._meta.db_table))
    return sorted(out)


LINKS = _links()


@pytest.fixture
def two_teams():
    with all_teams():
        teams = [TeamFactory(slug="wall-a"), TeamFactory(slug="wall-b")]
        for team in teams:
            store = StoreFactory(team=team, slug="eng")
            make_entry(store, key=f"{team.slug}-entry")
            SessionFactory(team=team, external_id=f"{team.slug}-session")
            make_key(team, "k")
        MembershipFactory(team=teams[0], user=UserFactory(username="walter"))
    return teams


def _count(table: str) -> int:
    with connection.cursor() as c:
        c.execute(f'SELECT count(*) FROM "{table}"')
        return c.fetchone()[0]


def test_the_app_role_cannot_widen_its_own_scope(two_teams):
    a, _ = two_teams
    with connection.cursor() as c:
        c.execute("SELECT current_user")
        assert c.fetchone()[0] == settings.DREAMWEB_DB_APP_ROLE  # code under test runs as the application role
        c.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
        c.execute("SELECT dreamweb_all_teams()")
        assert c.fetchone()[0] is False
    assert {table: _count(table) for table in TEAM_TABLES} == dict.fromkeys(TEAM_TABLES, 0)
    with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic(), connection.cursor() as c:
        c.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
        c.execute("INSERT INTO dreamweb_team (slug, name, allowed_hosts, created_at) VALUES ('x', 'x', '[]', now())")
    with rls.team_scope(a):  # its own teams, named, it can see
        assert _count("memory_memoryentry") == 1


@pytest.fixture
def app_login():
    """A connection of its own that logs in as the application role (not a SET ROLE of the test's login)."""
    db = connection.settings_dict
    creds = app_credentials()
    conn = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        dbname=db["NAME"],
        user=creds["USER"],
        password=creds["PASSWORD"],
        autocommit=True,
    )
    yield conn
    conn.close()


def test_a_real_app_login_cannot_become_a_role_that_sees_every_team(app_login):
    owner = connection.settings_dict["USER"]
    with app_login.cursor() as c:
        c.execute("SELECT set_config('dreamweb.team_ids', '*', false), dreamweb_all_teams()")
        assert c.fetchone()[1] is False
        c.execute("SELECT rolsuper, rolbypassrls, pg_has_role(current_user, %s, 'USAGE') FROM pg_roles "
                  "WHERE rolname = current_user", [owner])  # fmt: skip
        assert c.fetchone() == (False, False, False)
    refusals = [
        f'SET ROLE "{owner}"',
        "ALTER TABLE memory_memoryentry NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY team_isolation ON memory_memoryentry",
        "CREATE FUNCTION public.dreamweb_all_teams() RETURNS boolean LANGUAGE sql AS 'SELECT true'",
        "CREATE OR REPLACE FUNCTION dreamweb_all_teams() RETURNS boolean LANGUAGE sql AS 'SELECT true'",
    ]
    for sql in refusals:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), app_login.cursor() as c:
            c.execute(sql)


def test_questions_across_teams_answer_ids_and_leave_the_scope_alone(two_teams):
    a, b = two_teams
    with all_teams():
        prefix = a.agent_keys.get().prefix
        walter = a.memberships.get().user_id
    with connection.cursor() as c:
        c.execute(
            "SELECT dreamweb_key_team(%s), dreamweb_team_by_slug(%s), dreamweb_member_team_ids(%s),"
            " dreamweb_key_team('nope'), dreamweb_team_by_slug('nope'), dreamweb_member_team_ids(0)",
            [prefix, b.slug, walter],
        )
        assert c.fetchone() == (a.pk, b.pk, [a.pk], None, None, [])
        c.execute("SELECT coalesce(current_setting('dreamweb.team_ids', true), '')")
        assert c.fetchone()[0] == ""  # the functions' all-teams value does not outlive them
    assert _count("dreamweb_team") == 0


def test_every_reference_between_team_owned_rows_has_a_same_team_foreign_key():
    with connection.cursor() as c:
        c.execute(
            """
            SELECT child.relname, parent.relname,
                   array(SELECT attname FROM unnest(k.conkey) WITH ORDINALITY u(n, i)
                         JOIN pg_attribute ON attrelid = k.conrelid AND attnum = u.n ORDER BY i),
                   array(SELECT attname FROM unnest(k.confkey) WITH ORDINALITY u(n, i)
                         JOIN pg_attribute ON attrelid = k.confrelid AND attnum = u.n ORDER BY i)
            FROM pg_constraint k JOIN pg_class child ON child.oid = k.conrelid JOIN pg_class parent ON parent.oid =
                 k.confrelid
            WHERE k.contype = 'f' AND cardinality(k.conkey) = 2
            """
        )
        found = {
            (child, cols[0], parent) for child, parent, cols, refs in c.fetchall()
            if cols[1] == "team_id" and refs == ["id", "team_id"]
        }  # fmt: skip
    assert len(LINKS) >= 20
    assert [link for link in LINKS if link not in found] == []


def _value(field, team, tag: str):
    """A valid value for a required column, distinct per team and row."""
    if field.choices:
        return field.choices[0][0]
    if isinstance(field, models.BooleanField):
        return False
    if isinstance(field, models.IntegerField | models.FloatField | models.DecimalField):
        return 1
    if isinstance(field, models.DateTimeField):
        return timezone.now()
    if isinstance(field, models.JSONField):
        return {}
    return f"{team.pk}-{tag}"[-(field.max_length or 100) :]


def _fresh(model, team, tag: str):
    """A new row of this team-owned model with only the columns it needs, its required team-owned parents new as
    well (so that no unique or one-to-one column of an older row gets in the way)."""
    values = {}
    for field in model._meta.concrete_fields:
        if field.primary_key or getattr(field, "generated", False):
            continue
        if field.is_relation:
            if field.name == "team":
                values["team"] = team
            elif not field.null and _has_team(field.related_model):
                values[field.name] = _fresh(field.related_model, team, tag)
            elif not field.null:  # a person (users are not team-owned)
                values[field.name] = UserFactory(username=f"{model._meta.model_name}-{team.pk}-{tag}")
            continue
        if not (field.null or field.has_default()):
            values[field.name] = _value(field, team, f"{model._meta.model_name}-{tag}")
    return model.objects.create(**values)


@pytest.fixture
def two_walled_teams():
    with all_teams():
        return TeamFactory(slug="every-a"), TeamFactory(slug="every-b")


@pytest.mark.parametrize("table, column, parent", LINKS)
def test_a_row_cannot_point_at_another_teams_row(two_walled_teams, table, column, parent):
    a, b = two_walled_teams
    by_table = {m._meta.db_table: m for m in TEAM_MODELS}
    with all_teams():
        child = _fresh(by_table[table], a, "child")
        theirs, ours = _fresh(by_table[parent], b, "theirs"), _fresh(by_table[parent], a, "ours")
    refused = pytest.raises(IntegrityError, match="same_team")
    with all_teams(), refused, transaction.atomic(), connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")  # checked at the statement, not at the commit
        c.execute(f'UPDATE "{table}" SET "{column}" = %s WHERE id = %s', [theirs.pk, child.pk])
    with all_teams(), transaction.atomic(), connection.cursor() as c:  # a row of its own team is fine
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        c.execute(f'UPDATE "{table}" SET "{column}" = %s WHERE id = %s', [ours.pk, child.pk])
        assert c.rowcount == 1


def test_feedback_for_another_teams_entry_is_refused_like_a_missing_entry(two_teams):
    """The case found in the wild: team A's feedback row naming team B's entry. Refused, with the same error as an id
    that does not exist, so the answer does not reveal that the entry exists."""
    a, b = two_teams
    with all_teams():
        b_entry = b.stores.get().entries.get().pk
    errors = []
    for entry_id in (b_entry, 10**12):
        with rls.team_scope(a), pytest.raises(IntegrityError) as caught, transaction.atomic():
            Feedback.objects.create(team=a, entry_id=entry_id, score=1.0)
            with connection.cursor() as c:
                c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        errors.append(type(caught.value.__cause__).__name__)
    assert errors == ["ForeignKeyViolation", "ForeignKeyViolation"]


@pytest.mark.parametrize("column", ["run_id", "session_id"])
def test_an_analysis_cannot_name_a_run_or_session_that_does_not_exist(two_walled_teams, column):
    """A run's analysis has no plain foreign key on its run, session and team (reviews migration 0017): the
    same-team keys alone refuse an id that names nothing."""
    a, _ = two_walled_teams
    with all_teams():
        analysis = _fresh(SessionAnalysis, a, "missing")
    with all_teams(), pytest.raises(IntegrityError, match="same_team"), transaction.atomic(), connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        c.execute(f'UPDATE "reviews_sessionanalysis" SET "{column}" = %s WHERE id = %s', [2**62, analysis.pk])


@pytest.mark.parametrize("column", ["store_id", "agent_key_id"])
def test_a_served_context_cannot_name_a_store_or_key_that_does_not_exist(two_walled_teams, column):
    """The audit row has no plain foreign key on its store and key (memory migration 0015): the same-team keys
    alone refuse an id that names nothing."""
    a, _ = two_walled_teams
    with all_teams():
        serve = ContextServe.objects.create(team=a)
    with all_teams(), pytest.raises(IntegrityError, match="same_team"), transaction.atomic(), connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        c.execute(f'UPDATE "memory_contextserve" SET "{column}" = %s WHERE id = %s', [2**62, serve.pk])
