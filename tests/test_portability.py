"""Memory export and import: the round trip, merging into an existing store, markdown grouped by scope."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from dreamweb import rls
from dreamweb.provenance import Author, content_hash
from memory.models import MemoryEntry, MemoryStore, MemoryVersion
from memory.portability import DocumentInvalid, export_document, export_markdown, import_document, validate_document
from memory.services import update_entry
from tests.conftest import is_postgres
from tests.factories import StoreFactory, TeamFactory, make_entry
from tests.scoping import all_teams, no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with no_scope():  # the commands open their own scope
        call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def filled():
    store = StoreFactory(team=TeamFactory(slug="acme"), slug="eng", name="Engineering")
    make_entry(store, key="review", content="Every PR needs one approval.", tags=["process"])
    make_entry(store, key="deploy", content="Deploy with `make release`.", scope_agent="deploy-bot", tags=["deploy"])
    make_entry(store, key="hotfix", content="Hotfixes go to `hotfix/*`.", scope_agent="deploy-bot", scope_task="hotfix")
    make_entry(store, key="tickets", content="Tag tickets with the team.", scope_task="ticket")
    gone = make_entry(store, key="old", content="Use Jenkins.")
    update_entry(gone, base_hash=gone.content_hash, author=Author.system(), status="archived")
    updated = make_entry(store, key="vpn", content="Staging needs VPN.", tags=["staging"])
    update_entry(updated, base_hash=updated.content_hash, author=Author.system(), content="Staging needs the VPN.")
    return store


def state(store) -> list[tuple]:
    return list(
        MemoryEntry.objects.for_store(store)
        .active()
        .order_by("key")
        .values_list("key", "content", "scope_agent", "scope_task", "tags")
    )


def test_export_is_the_contract_document(filled):
    doc = export_document(filled)
    assert (doc["store"], doc["team"]) == ("eng", "acme")
    assert [e["key"] for e in doc["entries"]] == ["deploy", "hotfix", "review", "tickets", "vpn"]  # not archived
    vpn = doc["entries"][-1]
    assert vpn == {
        "key": "vpn",
        "content": "Staging needs the VPN.",
        "scope": {"agent": None, "task": None},
        "tags": ["staging"],
        "version": 2,
        "content_hash": content_hash("Staging needs the VPN."),
    }


def test_export_then_import_into_an_empty_store_reproduces_the_entries(filled, tmp_path):
    path = tmp_path / "eng.json"
    out, err = run("export_memory", "--team", "acme", "--store", "eng", "-o", str(path))
    assert out == "" and err == f"wrote {path}\n"
    TeamFactory(slug="copy")
    out, _ = run("import_memory", str(path), "--team", "copy")
    assert out == "store eng (new store): created 5, updated 0, unchanged 0\n"
    copy = MemoryStore.objects.get(team__slug="copy", slug="eng")
    assert state(copy) == state(filled)
    assert (copy.name, copy.kind) == ("Engineering", filled.kind)
    assert set(MemoryVersion.objects.filter(entry__store=copy).values_list("operation", "author_kind")) == {
        ("import", "system")
    }
    # ... and importing it again changes nothing.
    out, _ = run("import_memory", str(path), "--team", "copy")
    assert out == "store eng: created 0, updated 0, unchanged 5\n"
    assert MemoryVersion.objects.filter(entry__store=copy).count() == 5


def test_import_into_an_existing_store_versions_the_changed_entries_only(filled):
    doc = export_document(filled)
    by_key = {e["key"]: e for e in doc["entries"]}
    by_key["deploy"]["content"] = "Deploy with `make ship`."
    by_key["review"]["tags"] = ["process", "github"]
    by_key["tickets"]["scope"] = {"agent": "support-bot", "task": "ticket"}
    doc["entries"].append({"key": "new-one", "content": "Brand new.", "scope": {"agent": None, "task": None}})
    doc["entries"].append({"key": "old", "content": "Use Jenkins."})  # archived in the store: brought back
    before = {e.key: (e.version, e.content_hash) for e in MemoryEntry.objects.for_store(filled)}

    report = import_document(filled.team, doc)

    assert (sorted(report.created), sorted(report.updated), sorted(report.unchanged)) == (
        ["new-one"],
        ["deploy", "old", "review", "tickets"],
        ["hotfix", "vpn"],
    )
    after = {e.key: e for e in MemoryEntry.objects.for_store(filled)}
    for key in ("hotfix", "vpn"):
        assert (after[key].version, after[key].content_hash) == before[key]
    deploy = after["deploy"]
    assert deploy.version == 2 and deploy.content == "Deploy with `make ship`."
    latest = deploy.versions.get(number=2)
    assert (latest.operation, latest.author_kind, latest.previous_hash) == ("import", "system", before["deploy"][1])
    assert after["review"].tags == ["process", "github"] and after["review"].version == 2
    assert (after["tickets"].scope_agent, after["tickets"].scope_task) == ("support-bot", "ticket")
    assert after["old"].status == "active" and after["old"].version == 3


def test_import_names_the_store_from_the_option_and_keeps_unmentioned_entries(filled):
    report = import_document(
        filled.team, {"store": "ignored", "entries": [{"key": "x", "content": "X"}]}, store_slug="eng"
    )
    assert report.store == filled and report.created == ["x"]
    assert MemoryEntry.objects.for_store(filled).active().count() == 6


def test_an_invalid_document_names_each_entry_and_imports_nothing(filled, tmp_path):
    doc = {
        "store": "eng",
        "entries": [
            {"key": "ok", "content": "fine"},
            {"key": "", "content": "no key"},
            {"key": "k" * 201, "content": "long key"},
            {"key": "s", "content": "x", "scope": {"agent": 3}},
            {"key": "t", "content": "x", "tags": "deploy"},
            "text",
            {"key": "ok", "content": "again"},
            {"key": "c"},
        ],
    }
    with pytest.raises(DocumentInvalid) as info:
        validate_document(doc)
    assert info.value.errors == [
        "entries[1].key: is required (a non-empty string)",
        "entries[2].key: at most 200 characters (got 201)",
        "entries[3].scope.agent: must be a string or null",
        "entries[4].tags: must be an array of strings",
        "entries[5]: must be an object",
        "entries[6].key: 'ok' repeats entries[0]",
        "entries[7].content: is required (a non-empty string)",
    ]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    err = io.StringIO()
    with pytest.raises(CommandError, match="7 problem"), no_scope():
        call_command("import_memory", str(path), "--team", "acme", stdout=io.StringIO(), stderr=err)
    assert "entries[6].key: 'ok' repeats entries[0]" in err.getvalue()
    assert not MemoryEntry.objects.filter(key="ok").exists()


@pytest.mark.parametrize(
    "doc, error",
    [
        ([], "document: must be a JSON object, not list"),
        ({"entries": []}, "store: is required (or name the store with --store)"),
        ({"store": "two words", "entries": []}, "store: 'two words' is not a valid store slug"),
        ({"store": "eng"}, "entries: is required"),
        ({"store": "eng", "entries": {}}, "entries: must be an array"),
    ],
)
def test_document_level_errors(doc, error):
    with pytest.raises(DocumentInvalid) as info:
        validate_document(doc)
    assert info.value.errors[0].startswith(error)


def test_markdown_groups_by_scope(filled):
    text = export_markdown(filled)
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [
        "# Memory: Engineering",
        "## Store-wide",
        "### review",
        "### vpn",
        "## Agent `deploy-bot`",
        "### deploy",
        "## Agent `deploy-bot`, task `hotfix`",
        "### hotfix",
        "## Task `ticket` (any agent)",
        "### tickets",
    ]
    assert "Deploy with `make release`.\n\n_tags: deploy · v1 · sha256 " in text
    assert "Use Jenkins." not in text  # archived entries are not current memory


def test_export_command_markdown_to_stdout_and_unknown_store(filled):
    out, _ = run("export_memory", "--team", "acme", "--store", "eng", "--format", "markdown")
    assert out.startswith("# Memory: Engineering\n") and "## Agent `deploy-bot`" in out
    with pytest.raises(CommandError, match="no store 'nope' in team acme"):
        run("export_memory", "--team", "acme", "--store", "nope")
    TeamFactory(slug="rival")
    with pytest.raises(CommandError, match="no store 'eng' in team rival"):
        run("export_memory", "--team", "rival", "--store", "eng")


@pytest.mark.skipif(not is_postgres(), reason="row-level security is a PostgreSQL feature")
def test_memory_commands_run_in_the_teams_scope_under_rls(tmp_path):
    with all_teams():
        acme, rival = TeamFactory(slug="acme"), TeamFactory(slug="rival")
        make_entry(StoreFactory(team=rival, slug="eng"), key="rival-secret", content="Rival only.")
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"store": "eng", "entries": [{"key": "a", "content": "A"}]}))
    out, _ = run("import_memory", str(path), "--team", "acme")
    assert out == "store eng (new store): created 1, updated 0, unchanged 0\n"
    out, _ = run("export_memory", "--team", "acme", "--store", "eng")
    assert [e["key"] for e in json.loads(out)["entries"]] == ["a"]
    with rls.team_scope(acme):
        assert set(MemoryVersion.objects.values_list("team_id", flat=True)) == {acme.pk}
