# ruff: noqa: F811 - the page_support and personas fixtures are imported by name
"""Blind probe of the admin's and reviewer's pages other than the queue card: dream runs, "dream now", the autonomy
policy, the memory browser (entries, history, revert), sessions, members, skills, effectiveness. Client tests first,
a few real-browser tests at the end (screenshots in /tmp/probe_adminpages/)."""

from __future__ import annotations

import html as htmllib
import io
import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dreamweb.models import Membership, Role
from dreamweb.provenance import Author
from memory.models import MemoryEntry
from memory.services import update_entry
from reviews.models import DreamRun, RunStatus
from tests.factories import SessionFactory, make_entry, make_skill
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures
from tests.personas import world  # noqa: F401 - fixture
from tests.scoping import all_teams

SHOTS = Path("/tmp/probe_adminpages")
TRACE_MARKERS = ("Traceback (most recent call last)", 'File "/', "django.core.exceptions", "Server Error (500)")


class _Forms(HTMLParser):
    """Collects each form's action, method and the default values of its fields."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []
        self._select = None
        self._textarea = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get"), "fields": {}})
        if not self.forms:
            return
        fields = self.forms[-1]["fields"]
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    fields[a["name"]] = a.get("value", "on")
            elif kind not in ("submit", "button"):
                fields[a["name"]] = a.get("value") or ""
        elif tag == "select" and a.get("name"):
            self._select = a["name"]
            fields.setdefault(a["name"], None)
        elif tag == "option" and self._select:
            if fields.get(self._select) is None or "selected" in a:
                fields[self._select] = a.get("value", "")
        elif tag == "textarea" and a.get("name"):
            self._textarea = a["name"]
            fields[a["name"]] = ""

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        if tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea and self.forms:
            self.forms[-1]["fields"][self._textarea] += data


def forms_of(text: str) -> list[dict]:
    parser = _Forms()
    parser.feed(text)
    return parser.forms


def title_of(text: str) -> str:
    match = re.search(r"<title>(.*?)</title>", text, re.S)
    return htmllib.unescape(match.group(1)).strip() if match else ""


def visible_text(text: str) -> str:
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", text, flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", text))


def login(client, user):
    client.force_login(user)
    return client


def policy_url(store):
    return f"/reviews/stores/{store.pk}/policy/"


def policy_fields(client, store) -> dict:
    page = client.get(policy_url(store)).content.decode()
    for form in forms_of(page):
        if form["action"].endswith(policy_url(store)) and form["method"].lower() == "post":
            return {k: v for k, v in form["fields"].items() if v is not None}
    raise AssertionError("no policy form on the policy page")


# ----------------------------------------------------------------------------------------------- dream runs


def test_run_list_paginates_a_long_history(client, world):
    """A store dreamt every 15 minutes has hundreds of runs: the list must paginate, not render them all."""
    with all_teams():
        DreamRun.objects.bulk_create(
            [DreamRun(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED) for _ in range(150)]
        )
    page = login(client, world.alice).get("/reviews/runs/").content.decode()
    rows = len(re.findall(r'href="/reviews/runs/\d+/"', page))
    assert rows <= 100, f"the runs list rendered {rows} run links on one page"


@pytest.mark.django_db(transaction=True)
def test_failed_run_page_explains_the_failure_in_words_without_a_traceback(client, world, settings):
    """A dream whose model endpoint is unreachable fails; its run page says what went wrong in words (failed
    sessions, why) and shows no raw Python traceback."""
    from django.core.management import call_command

    from tests.scoping import no_scope

    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OPENAI_API_KEY = "sk-test-not-a-real-key"
    settings.DREAMWEB_LLM_MODEL = "gpt-fake"
    settings.DREAMWEB_LLM_TIMEOUT = 2
    settings.DREAMWEB_LLM_MAX_RETRIES = 0
    settings.DREAMWEB_ANALYSIS_MAX_RETRIES = 0
    with all_teams():
        for i in range(2):
            SessionFactory(team=world.team_a, external_id=f"fail-{i}")
    out = io.StringIO()
    raised = None
    with no_scope():
        try:
            call_command("dream", "--team", "team-a", "--store", "eng", "--analyzer", "openai", stdout=out, stderr=out)
        except (SystemExit, Exception) as exc:  # noqa: BLE001 - a failed dream may exit non-zero
            raised = exc
    with all_teams():
        run = DreamRun.objects.filter(store=world.store_a).order_by("pk").last()
    assert run is not None, f"no run recorded: {raised!r} {out.getvalue()[-1500:]}"
    page = login(client, world.alice).get(f"/reviews/runs/{run.pk}/").content.decode()
    text = visible_text(page)
    assert not any(m in text for m in TRACE_MARKERS) and ("failed" in text.lower() or "error" in text.lower()), (
        run.status,
        run.error[:200],
    )


def test_run_page_title_names_the_store(client, world):
    """The tab title of a run page should say which store's dream it is: with several tabs open, "Dream #7" alone
    does not tell a reviewer which store they are looking at."""
    with all_teams():
        run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    page = login(client, world.alice).get(f"/reviews/runs/{run.pk}/").content.decode()
    title = title_of(page)
    assert world.store_a.slug in title.lower() or (world.store_a.name or "§") in title, title


def test_dream_now_while_one_is_running_does_not_start_a_second(client, world):
    """Pressing "dream now" while a dream of the store is still running must not start a parallel one."""
    with all_teams():
        DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.RUNNING)
    login(client, world.alice).post(f"/reviews/stores/{world.store_a.pk}/dream/")
    with all_teams():
        count = DreamRun.objects.filter(store=world.store_a, dry_run=False).count()
    assert count == 1, f"{count} runs after a dream-now during a running dream"


def test_dream_now_while_one_is_running_says_so(client, world):
    """The person who pressed "dream now" during a running dream is told, in words, that one is already running."""
    with all_teams():
        DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.RUNNING)
    response = login(client, world.alice).post(f"/reviews/stores/{world.store_a.pk}/dream/", follow=True)
    text = visible_text(response.content.decode()).lower()
    message = re.search(r"not started.{0,200}|already.{0,200}", text)
    assert message and ("running" in message.group(0) or "progress" in message.group(0)), text[-600:]


def test_dream_now_double_submit_starts_one_dream(client, world):
    """A double click posts the form twice; the second must not start another dream of the same sessions."""
    with all_teams():
        for i in range(3):
            SessionFactory(team=world.team_a, external_id=f"dbl-{i}")
    login(client, world.alice)
    client.post(f"/reviews/stores/{world.store_a.pk}/dream/")
    client.post(f"/reviews/stores/{world.store_a.pk}/dream/")
    with all_teams():
        runs = DreamRun.objects.filter(store=world.store_a, dry_run=False)
        with_sessions = [r for r in runs if (r.sessions_selected or 0) > 0]
    assert len(with_sessions) <= 1, f"{len(with_sessions)} runs each took sessions"


@pytest.mark.django_db(transaction=True)
def test_dream_now_with_no_sessions_says_there_is_nothing_to_read(client, world):
    """Dream now on a store with no session at all tells the person, in words, that there was nothing to read (and
    how sessions arrive), rather than a bare 0-of-0 run."""
    response = login(client, world.alice).post(f"/reviews/stores/{world.store_a.pk}/dream/", follow=True)
    text = visible_text(response.content.decode()).lower()
    assert re.search(r"no (new |unconsumed |eligible )?sessions?|nothing to (read|analy)", text), text[-800:]


@pytest.mark.django_db(transaction=True)
def test_dry_run_preview_does_not_consume_sessions(client, world):
    """The dry-run preview promises nothing is queued or applied: a real dream afterwards still reads the sessions."""
    with all_teams():
        for i in range(3):
            SessionFactory(team=world.team_a, external_id=f"dry-{i}")
    login(client, world.alice)
    client.post(f"/reviews/stores/{world.store_a.pk}/dream/", {"dry_run": "on"})
    client.post(f"/reviews/stores/{world.store_a.pk}/dream/")
    with all_teams():
        real = DreamRun.objects.filter(store=world.store_a, dry_run=False).order_by("pk").last()
    assert real is not None and real.sessions_selected == 3, real and real.sessions_selected


def test_viewer_sees_no_dream_now_button(client, world):
    """A viewer cannot start dreams, so the runs page must not offer them the button."""
    page = login(client, world.victor).get("/reviews/runs/").content.decode()
    found = re.findall(r'<form[^>]*action="/reviews/stores/\d+/dream/"', page)
    assert not found, found


def test_viewer_cannot_post_dream_now(client, world):
    """Hiding the button is not enough: the POST of a viewer is refused and starts nothing."""
    response = login(client, world.victor).post(f"/reviews/stores/{world.store_a.pk}/dream/")
    with all_teams():
        count = DreamRun.objects.filter(store=world.store_a).count()
    assert response.status_code in (403, 404) and count == 0, (response.status_code, count)


def test_other_teams_run_is_not_found(client, world):
    """bob (team B) must not read team A's run."""
    with all_teams():
        run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
    response = login(client, world.bob).get(f"/reviews/runs/{run.pk}/")
    assert response.status_code == 404


# ----------------------------------------------------------------------------------------------- policy


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_share", "1.7"),
        ("min_share", "0,5"),
        ("min_sessions", "-3"),
        ("min_sessions", ""),
        ("token_budget", "lots"),
        ("schedule_minutes", "0"),
        ("forget_after_days", "99999999999999999999"),
    ],
)
def test_policy_invalid_value_is_rejected_next_to_its_field(client, world, field, value):
    """An out-of-range or non-numeric threshold is refused with a message right next to that field, not saved."""
    login(client, world.adam)
    data = policy_fields(client, world.store_a)
    assert field in data, f"no {field} on the form: {sorted(data)}"
    data[field] = value
    if field == "schedule_minutes":
        data["schedule_enabled"] = "on"
    response = client.post(policy_url(world.store_a), data)
    page = response.content.decode()
    assert response.status_code in (200, 400), response.status_code
    field_block = re.search(r'<div class="field"><label for="id_' + field + r'".*?</div>', page, re.S)
    assert field_block and "errorlist" in field_block.group(0), f"no error next to {field}"


def test_policy_save_then_history_offers_a_way_back(client, world):
    """After saving a policy the admin can see the old values and get back to them: the change history shows the
    previous value of each changed setting."""
    login(client, world.adam)
    data = policy_fields(client, world.store_a)
    old = data.get("min_sessions")
    data["min_sessions"] = str(int(old or 2) + 5)
    client.post(policy_url(world.store_a), data, follow=True)
    page = client.get(policy_url(world.store_a)).content.decode()
    history = page[page.find("changes-table") :]
    assert "changes-table" in page and f"<del>{old}</del>" in history, "previous value not shown in history"


def test_policy_preview_does_not_save(client, world):
    """Preview impact shows what would happen without changing the stored policy."""
    login(client, world.adam)
    data = policy_fields(client, world.store_a)
    before = data.get("mode")
    data["mode"] = next(v for v in ("auto_low", "autonomous", "auto") if v != before)
    data["preview"] = "1"
    client.post(policy_url(world.store_a), data)
    after = policy_fields(client, world.store_a).get("mode")
    assert after == before, (before, after)


def test_viewer_cannot_change_the_policy(client, world):
    """A viewer's POST to the policy is refused (403), whatever the form says."""
    login(client, world.adam)
    data = policy_fields(client, world.store_a)
    data["min_sessions"] = "9"
    client.logout()
    response = login(client, world.victor).post(policy_url(world.store_a), data)
    assert response.status_code in (403, 404), response.status_code


def test_viewer_policy_page_shows_no_save_button(client, world):
    """A viewer sees the policy read only: no Save / Preview buttons and no editable inputs."""
    page = login(client, world.victor).get(policy_url(world.store_a)).content.decode()
    form = page[page.find("policy-form") : page.find("</form>", page.find("policy-form"))]
    editable = re.findall(r"<(?:input|select)\b(?![^>]*\bdisabled\b)(?![^>]*type=\"hidden\")[^>]*>", form)
    assert "Save policy" not in page and not editable, f"{len(editable)} editable controls for a viewer"


# ----------------------------------------------------------------------------------------------- memory store


def test_entries_list_paginates(client, world):
    """A store with 250 entries paginates its entries list."""
    with all_teams():
        for i in range(250):
            make_entry(world.store_a, key=f"fact-{i:03d}", content=f"Fact number {i}.")
    page = login(client, world.alice).get(f"/memory/stores/{world.store_a.pk}/").content.decode()
    links = len(set(re.findall(r'href="/memory/entries/(\d+)/"', page)))
    assert links <= 100 and "page=2" in page, f"{links} entries on page one"


def test_empty_store_says_what_to_do_next(client, world):
    """An empty store's page tells the user how memory gets there (add an entry, import, run a dream), with a
    link, instead of just stating it is empty."""
    page = login(client, world.alice).get(f"/memory/stores/{world.store_a.pk}/").content.decode()
    row = re.search(r'class="empty-row">(.*?)</td>', page, re.S)
    text = visible_text(row.group(1) if row else page).lower()
    assert any(w in text for w in ("add", "import", "dream", "push", "create")), f"empty state: {text.strip()!r}"


def test_entry_search_filters_the_list(client, world):
    """Searching the entries for a word shows the matching entry and not the others."""
    with all_teams():
        make_entry(world.store_a, key="deploy-command", content="Deploy with `make deploy`.")
        make_entry(world.store_a, key="lint-rule", content="Ruff runs before every commit.")
    page = login(client, world.alice).get(f"/memory/stores/{world.store_a.pk}/?q=ruff").content.decode()
    assert "lint-rule" in page and "deploy-command" not in page


def test_entry_search_non_latin_text(client, world):
    """Search works for non-Latin text (a Japanese team writes memory in Japanese)."""
    with all_teams():
        make_entry(world.store_a, key="deploy-ja", content="本番環境へのデプロイは金曜日に行わない。")
        make_entry(world.store_a, key="other", content="Something else entirely.")
    page = login(client, world.alice).get(f"/memory/stores/{world.store_a.pk}/?q=金曜日").content.decode()
    assert "deploy-ja" in page and "/memory/entries/" in page and ">other<" not in page


def _entry_with_versions(world):
    with all_teams():
        entry = make_entry(world.store_a, key="test-command", content="Run `pytest`.")
        entry = update_entry(entry, base_version=entry.version, author=Author.system(), content="Run `pytest -x`.")
    return entry


def test_revert_to_an_earlier_version_restores_its_content(client, world):
    """Reverting to v1 writes a new version whose content is v1's, and history stays (v1, v2, v3)."""
    entry = _entry_with_versions(world)
    login(client, world.alice).post(
        f"/memory/entries/{entry.pk}/revert/", {"number": 1, "base_version": entry.version, "reason": "x"}
    )
    with all_teams():
        entry = MemoryEntry.objects.get(pk=entry.pk)
        versions = entry.versions.count() if hasattr(entry, "versions") else None
    assert entry.content == "Run `pytest`." and entry.version == 3, (entry.content, entry.version, versions)


def test_entry_history_names_who_reverted(client, world):
    """After a revert, the entry's history shows who did it (provenance), so the way back is itself accountable."""
    entry = _entry_with_versions(world)
    login(client, world.alice).post(
        f"/memory/entries/{entry.pk}/revert/", {"number": 1, "base_version": entry.version, "reason": "too strict"}
    )
    page = client.get(f"/memory/entries/{entry.pk}/").content.decode()
    assert "alice" in page and "too strict" in page


def test_stale_revert_is_refused_in_words(client, world):
    """A revert based on an old version (someone changed the entry meanwhile) is refused with a message, not a
    500, and the entry is left as the other person wrote it."""
    entry = _entry_with_versions(world)
    response = login(client, world.alice).post(
        f"/memory/entries/{entry.pk}/revert/", {"number": 1, "base_version": 1, "reason": ""}, follow=True
    )
    with all_teams():
        content = MemoryEntry.objects.get(pk=entry.pk).content
    text = visible_text(response.content.decode()).lower()
    assert (
        response.status_code < 500
        and content == "Run `pytest -x`."
        and ("changed" in text or "conflict" in text or "newer" in text)
    ), (response.status_code, content)


def test_viewer_cannot_revert(client, world):
    """A viewer's revert POST is refused and the entry is unchanged."""
    entry = _entry_with_versions(world)
    response = login(client, world.victor).post(
        f"/memory/entries/{entry.pk}/revert/", {"number": 1, "base_version": entry.version}
    )
    with all_teams():
        content = MemoryEntry.objects.get(pk=entry.pk).content
    assert response.status_code in (403, 404) and content == "Run `pytest -x`.", (response.status_code, content)


def test_viewer_sees_no_revert_or_edit_controls(client, world):
    """A viewer sees no revert forms and no edit/archive buttons on an entry's page."""
    entry = _entry_with_versions(world)
    page = login(client, world.victor).get(f"/memory/entries/{entry.pk}/").content.decode()
    assert "revert-form" not in page and f"/memory/entries/{entry.pk}/edit/" not in page


# ----------------------------------------------------------------------------------------------- sessions


def test_sessions_list_paginates(client, world):
    """Hundreds of sessions: the list paginates."""
    with all_teams():
        for i in range(230):
            SessionFactory(team=world.team_a, external_id=f"pg-{i:04d}")
    page = login(client, world.alice).get("/memory/sessions/").content.decode()
    links = len(set(re.findall(r'href="/memory/sessions/(\d+)/"', page)))
    assert links <= 100 and "page=2" in page, links


def test_sessions_filter_with_no_match_says_the_filter_matched_nothing(client, world):
    """When sessions exist but the filter matches none, the page says no session matches the filter (and how to
    clear it) rather than "No session yet", which suggests nothing was ever pushed."""
    with all_teams():
        SessionFactory(team=world.team_a, external_id="present-1")
    page = login(client, world.alice).get("/memory/sessions/?q=zzz-does-not-exist").content.decode()
    row = re.search(r'class="empty-row">(.*?)</td>', page, re.S)
    text = visible_text(row.group(1) if row else "").lower()
    assert "match" in text or "filter" in text, f"empty state: {text.strip()!r}"


@pytest.mark.parametrize("page_param", ["abc", "99999", "-1", "1e9"])
def test_sessions_bogus_page_number_is_not_a_server_error(client, world, page_param):
    """A hand-edited ?page= never yields a 500."""
    response = login(client, world.alice).get(f"/memory/sessions/?page={page_param}")
    assert response.status_code < 500 and not any(m in response.content.decode() for m in TRACE_MARKERS)


HOSTILE = [
    "<script>window.__pwned=1</script><img src=x onerror=alert(1)>",
    "\x1b[31mRED\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07",
    "safe\u202egnp.exe",
    "pass\u200bword\u2060 \ufeffhidden",
    "https://example.test/" + "a" * 3000,
]


def _hostile_session(world):
    events = [{"type": "message", "role": "user", "content": text} for text in HOSTILE]
    with all_teams():
        return SessionFactory(team=world.team_a, external_id="hostile-1", events=events, event_count=len(events))


def test_hostile_session_html_is_escaped(client, world):
    """HTML in a transcript shows as text: no live <script> or onerror attribute."""
    session = _hostile_session(world)
    page = login(client, world.alice).get(f"/memory/sessions/{session.pk}/").content.decode()
    assert "<script>window.__pwned" not in page and "<img src=x onerror" not in page


def test_hostile_session_ansi_escapes_are_not_emitted_raw(client, world):
    """ANSI escape bytes (ESC) are not passed through raw to the page; they are shown or stripped visibly."""
    session = _hostile_session(world)
    page = login(client, world.alice).get(f"/memory/sessions/{session.pk}/").content.decode()
    raw = re.findall(r".{0,30}[\x1b\x07].{0,30}", page)
    assert not raw, raw


def test_hostile_session_bidi_override_is_neutralised(client, world):
    """A right-to-left override char must not silently reorder the displayed text ("exe.png" spoof); it is marked."""
    session = _hostile_session(world)
    page = login(client, world.alice).get(f"/memory/sessions/{session.pk}/").content.decode()
    raw = re.findall(r".{0,60}\u202e.{0,60}", page)
    assert "safe\u202egnp.exe" not in page, raw


def test_hostile_session_zero_width_chars_are_revealed(client, world):
    """Zero-width characters are shown (marked) instead of hiding inside a word."""
    session = _hostile_session(world)
    page = login(client, world.alice).get(f"/memory/sessions/{session.pk}/").content.decode()
    raw = re.findall(r".{0,60}\u200b.{0,60}", page)
    assert "pass\u200bword" not in page, raw


def test_huge_session_page_is_bounded(client, world):
    """A 20 000-event session page loads in reasonable time and does not render every event at once."""
    events = [{"type": "message", "role": "user", "content": f"line {i} " + "x" * 80} for i in range(20000)]
    with all_teams():
        session = SessionFactory(team=world.team_a, external_id="huge-1", events=events, event_count=len(events))
    started = time.monotonic()
    response = login(client, world.alice).get(f"/memory/sessions/{session.pk}/")
    elapsed = time.monotonic() - started
    size = len(response.content)
    assert response.status_code == 200 and elapsed < 5 and size < 3_000_000, (response.status_code, elapsed, size)


# ----------------------------------------------------------------------------------------------- members


def test_viewer_members_page_has_no_role_controls(client, world):
    """A viewer sees the members but no role selects, remove buttons or invitation forms."""
    page = login(client, world.victor).get(f"/teams/{world.team_a.slug}/members/").content.decode()
    assert "role-form" not in page and "/members/add/" not in page and "/members/invite/" not in page


def test_reviewer_cannot_change_roles_by_post(client, world):
    """A reviewer's POST promoting themselves to admin is refused."""
    with all_teams():
        membership = Membership.objects.get(team=world.team_a, user=world.alice)
    response = login(client, world.alice).post(
        f"/teams/{world.team_a.slug}/members/{membership.pk}/role/", {"role": "admin"}
    )
    with all_teams():
        role = Membership.objects.get(pk=membership.pk).role
    assert response.status_code in (403, 404) and role == Role.REVIEWER, (response.status_code, role)


def test_last_admin_cannot_demote_themselves(client, world):
    """The team's last admin demoting themselves is refused with words; the team keeps an admin."""
    with all_teams():
        membership = Membership.objects.get(team=world.team_a, user=world.adam)
    response = login(client, world.adam).post(
        f"/teams/{world.team_a.slug}/members/{membership.pk}/role/", {"role": "viewer"}, follow=True
    )
    with all_teams():
        role = Membership.objects.get(pk=membership.pk).role
    assert role == Role.ADMIN and response.status_code < 500, (role, response.status_code)


def test_adding_an_unknown_user_says_what_was_wrong(client, world):
    """Adding a member by a username that does not exist says so in words (and suggests an invitation)."""
    response = login(client, world.adam).post(
        f"/teams/{world.team_a.slug}/members/add/", {"identifier": "nobody-here", "role": "reviewer"}, follow=True
    )
    text = visible_text(response.content.decode()).lower()
    assert response.status_code < 500 and ("no user" in text or "not found" in text or "no account" in text), (
        response.status_code
    )


# ----------------------------------------------------------------------------------------------- skills


def test_viewer_sees_no_skill_revert_button(client, world):
    """A viewer sees a skill's versions but no Revert buttons."""
    with all_teams():
        from skills_registry.services import update_skill

        skill = make_skill(world.team_a)
        update_skill(skill, body="# Release v2\n", author=Author.system(), base_hash=skill.content_hash)
    page = login(client, world.victor).get(f"/skills/{world.team_a.slug}/release-process/versions/").content.decode()
    assert "Revert to v" not in page


def test_viewer_cannot_post_skill_revert(client, world):
    """A viewer's skill revert POST is refused."""
    with all_teams():
        make_skill(world.team_a)
    response = login(client, world.victor).post(f"/skills/{world.team_a.slug}/release-process/revert/1/")
    assert response.status_code in (403, 404), response.status_code


def test_skills_empty_state_says_what_to_do(client, world):
    """With no skill yet, the skills page explains how skills get there."""
    page = login(client, world.alice).get("/skills/").content.decode()
    text = visible_text(page[page.find("<main") :]).lower()
    assert any(w in text for w in ("publish", "create", "push", "add", "import", "dream")), text[:300]


def test_admin_skill_revert_brings_back_the_old_body(client, world):
    """Reverting a skill to v1 makes v1's body current again (as a new version): the way back for a skill."""
    from skills_registry.services import update_skill

    with all_teams():
        skill = make_skill(world.team_a, body="# Release\nOriginal steps.\n")
        update_skill(skill, body="# Release\nBroken steps.\n", author=Author.system(), base_hash=skill.content_hash)
    versions = login(client, world.adam).get(f"/skills/{world.team_a.slug}/release-process/versions/")
    form = next(f for f in forms_of(versions.content.decode()) if f["action"].endswith("/revert/1/"))
    client.post(form["action"], form["fields"])
    page = client.get(f"/skills/{world.team_a.slug}/release-process/").content.decode()
    assert "Original steps." in page and "Broken steps." not in page


# ----------------------------------------------------------------------------------------------- way back, isolation


def test_archive_then_restore_brings_the_entry_back(client, world):
    """Archiving an entry has a way back: restore makes it active and served again with its content."""
    with all_teams():
        entry = make_entry(world.store_a, key="flaky-tests", content="Retry flaky tests once.")
    login(client, world.alice).post(
        f"/memory/entries/{entry.pk}/archive/", {"base_version": entry.version, "reason": "outdated"}
    )
    with all_teams():
        archived = MemoryEntry.objects.get(pk=entry.pk)
    client.post(f"/memory/entries/{entry.pk}/restore/", {"base_version": archived.version, "reason": "still true"})
    page = client.get(f"/memory/stores/{world.store_a.pk}/").content.decode()
    assert archived.version > entry.version and "flaky-tests" in page, (entry.version, archived.version)


def test_run_page_links_each_proposal_it_made(client, world):
    """A run's page lists what it proposed, each linked to the proposal, with its status."""
    from tests.factories import make_proposal

    with all_teams():
        run = DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)
        proposals = [
            make_proposal(world.store_a, run=run, content="Tag before releasing.", key_hint="tag-first"),
            make_proposal(world.store_a, run=run, content="Use uv, not pip.", key_hint="use-uv"),
        ]
    page = login(client, world.alice).get(f"/reviews/runs/{run.pk}/").content.decode()
    missing = [p.pk for p in proposals if f'href="/reviews/proposals/{p.pk}/"' not in page]
    assert not missing, f"proposals not linked from the run page: {missing}"


def test_effectiveness_of_an_empty_store_says_what_to_do(client, world):
    """The effectiveness page of a store without entries says there is nothing to measure yet and how to get there,
    rather than an empty chart and table."""
    page = login(client, world.adam).get(f"/reviews/stores/{world.store_a.pk}/effectiveness/").content.decode()
    text = visible_text(page[page.find("<main") :]).lower()
    assert re.search(r"no entr|nothing|empty|not yet|no memory", text), text[:600]


@pytest.mark.parametrize("what", ["entry", "session", "policy", "effectiveness"])
def test_other_teams_pages_are_not_found(client, world, what):
    """bob (team B) gets a 404 for team A's entry, session, policy and effectiveness pages."""
    with all_teams():
        entry = make_entry(world.store_a, key="secret-a", content="Team A only.")
        session = SessionFactory(team=world.team_a, external_id="a-only")
    path = {
        "entry": f"/memory/entries/{entry.pk}/",
        "session": f"/memory/sessions/{session.pk}/",
        "policy": policy_url(world.store_a),
        "effectiveness": f"/reviews/stores/{world.store_a.pk}/effectiveness/",
    }[what]
    response = login(client, world.bob).get(path)
    assert response.status_code == 404, response.status_code


def test_runs_filter_by_another_teams_store_leaks_nothing(client, world):
    """Filtering the runs list by a store id of another team shows nothing of that store."""
    with all_teams():
        DreamRun.objects.create(team=world.team_b, store=world.store_b, status=RunStatus.SUCCEEDED)
    response = login(client, world.alice).get(f"/reviews/runs/?store={world.store_b.pk}")
    page = response.content.decode()
    assert response.status_code < 500 and not re.search(r"over\s+ops\b|>ops<", page)


def test_entries_next_page_keeps_the_search(client, world):
    """Page 2 of a search result is page 2 of the same search, not of the whole store."""
    with all_teams():
        for i in range(120):
            make_entry(world.store_a, key=f"deploy-{i:03d}", content=f"Deploy step {i}.")
        for i in range(30):
            make_entry(world.store_a, key=f"other-{i:03d}", content=f"Unrelated {i}.")
    login(client, world.alice)
    first = client.get(f"/memory/stores/{world.store_a.pk}/?q=deploy").content.decode()
    nxt = re.search(r'href="(\?[^"]*page=2[^"]*)"', first)
    assert nxt, "no link to page 2 of the search"
    second = client.get(f"/memory/stores/{world.store_a.pk}/" + htmllib.unescape(nxt.group(1))).content.decode()
    assert "other-0" not in second and "deploy-" in second


def test_sessions_next_page_keeps_the_agent_filter(client, world):
    """Page 2 of sessions filtered by agent still lists only that agent's sessions."""
    with all_teams():
        for i in range(120):
            SessionFactory(team=world.team_a, external_id=f"fe-{i:04d}", agent="frontend-bot")
        for i in range(120):
            SessionFactory(team=world.team_a, external_id=f"be-{i:04d}", agent="backend-bot")
    login(client, world.alice)
    first = client.get("/memory/sessions/?agent=frontend-bot").content.decode()
    nxt = re.search(r'href="(\?[^"]*page=2[^"]*)"', first)
    assert nxt, "no link to page 2"
    second = client.get("/memory/sessions/" + htmllib.unescape(nxt.group(1))).content.decode()
    assert "be-0" not in second and "fe-0" in second


# ----------------------------------------------------------------------------------------------- titles, errors


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/reviews/runs/", ["dream"]),
        ("/memory/sessions/", ["session"]),
        ("/teams/team-a/members/", ["member"]),
        ("/skills/", ["skill"]),
        ("/memory/", ["memory"]),
        ("POLICY", ["policy"]),
        ("EFFECT", ["effective"]),
    ],
)
def test_page_title_names_the_page(client, world, path, words):
    """The <title> of each page names it, so tabs and history are distinguishable."""
    path = {"POLICY": policy_url(world.store_a), "EFFECT": f"/reviews/stores/{world.store_a.pk}/effectiveness/"}.get(
        path, path
    )
    response = login(client, world.adam).get(path)
    title = title_of(response.content.decode()).lower()
    assert response.status_code == 200 and all(w in title for w in words), (response.status_code, title)


@pytest.mark.parametrize(
    "path",
    ["/reviews/runs/?store=abc", "/memory/stores/999999/", "/reviews/runs/999999/", "/memory/stores/1/?q=%00"],
)
def test_odd_urls_give_a_page_not_a_500(client, world, path):
    """Hand-edited URLs give a 404/400 page in words, never a 500 or trace."""
    response = login(client, world.alice).get(path)
    assert response.status_code < 500 and not any(m in response.content.decode() for m in TRACE_MARKERS), (
        response.status_code
    )


# ----------------------------------------------------------------------------------------------- browser

CHROMIUM = "/usr/bin/chromium"
browser_marks = [
    pytest.mark.all_teams,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium"),
]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"], headless=True
        )
        yield b
        b.close()


def _page(browser, live_server, username, width=1360):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return context, page


def _browser_data(world):
    make_entry(world.store_a, key="deploy-command", content="Deploy with `make deploy`.")
    make_entry(world.store_a, key="lint-rule", content="Ruff runs before every commit.")
    for i in range(3):
        SessionFactory(team=world.team_a, external_id=f"b-{i}")
    DreamRun.objects.create(team=world.team_a, store=world.store_a, status=RunStatus.SUCCEEDED)


@pytest.mark.parametrize(
    "which", ["runs", "policy", "session", "members", "entries", "effectiveness", "entry", "versions"]
)
@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_390px_pages_do_not_scroll_sideways(browser, live_server, world, which):
    """At 390 px (a phone) the page fits the width: everything reachable without horizontal scrolling."""
    _browser_data(world)
    session = _hostile_session(world)
    entry = MemoryEntry.objects.filter(store=world.store_a).first()
    make_skill(world.team_a)
    path = {
        "effectiveness": f"/reviews/stores/{world.store_a.pk}/effectiveness/",
        "entry": f"/memory/entries/{entry.pk}/",
        "versions": f"/skills/{world.team_a.slug}/release-process/versions/",
        "runs": "/reviews/runs/",
        "policy": policy_url(world.store_a),
        "session": f"/memory/sessions/{session.pk}/",
        "members": f"/teams/{world.team_a.slug}/members/",
        "entries": f"/memory/stores/{world.store_a.pk}/",
    }[which]
    context, page = _page(browser, live_server, "adam", width=390)
    try:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SHOTS / f"narrow-{which}.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{which} scrolls {overflow}px sideways at 390px"
    finally:
        context.close()


@pytest.mark.parametrize("which", ["policy", "runs", "members"])
@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_keyboard_focus_is_visible(browser, live_server, world, which):
    """Tabbing through an admin page, every focused control shows a visible focus indicator."""
    _browser_data(world)
    path = {"policy": policy_url(world.store_a), "runs": "/reviews/runs/", "members": "/teams/team-a/members/"}[which]
    context, page = _page(browser, live_server, "adam")
    try:
        page.goto(live_server.url + path)
        invisible = []
        for _ in range(25):
            page.keyboard.press("Tab")
            info = page.evaluate(
                """() => { const e = document.activeElement; if (!e || e === document.body) return null;
                const s = getComputedStyle(e);
                return {tag: e.tagName, name: e.name || e.textContent.trim().slice(0, 30),
                        outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0,
                        shadow: s.boxShadow !== 'none'}; }"""
            )
            if info and not (info["outline"] or info["shadow"]):
                invisible.append(f"{info['tag']}:{info['name']}")
        page.screenshot(path=str(SHOTS / f"{which}-focus.png"))
        assert not invisible, f"no visible focus on {invisible}"
    finally:
        context.close()


@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_double_click_dream_now_in_browser_starts_one_run(browser, live_server, world):
    """A double click on "Dream now" in the browser starts at most one dream of the store."""
    _browser_data(world)
    before = DreamRun.objects.filter(store=world.store_a).count()
    context, page = _page(browser, live_server, "adam")
    try:
        page.goto(live_server.url + "/reviews/runs/")
        page.get_by_role("button", name="Dream now").first.dblclick()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)
        page.screenshot(path=str(SHOTS / "after-dream-now.png"), full_page=True)
        started = DreamRun.objects.filter(store=world.store_a, dry_run=False).count() - before
        assert started == 1, f"{started} runs started by one double click"
    finally:
        context.close()


@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_back_after_htmx_search_restores_the_filtered_list(browser, live_server, world):
    """Search entries (htmx), open one, press Back: the list still shows the search and its filtered result."""
    _browser_data(world)
    context, page = _page(browser, live_server, "alice")
    try:
        page.goto(f"{live_server.url}/memory/stores/{world.store_a.pk}/")
        page.fill("input[name=q]", "ruff")
        page.wait_for_timeout(1200)
        page.wait_for_load_state("networkidle")
        page.get_by_role("link", name="lint-rule").first.click()
        page.wait_for_load_state()
        page.go_back()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "entries-after-back.png"), full_page=True)
        value = page.input_value("input[name=q]")
        rows = page.locator("#entry-rows").inner_text()
        assert value == "ruff" and "deploy-command" not in rows, (value, rows[:200])
    finally:
        context.close()


@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_hostile_session_runs_no_script_in_browser(browser, live_server, world):
    """In a real browser the hostile transcript executes nothing."""
    session = _hostile_session(world)
    context, page = _page(browser, live_server, "alice")
    try:
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{live_server.url}/memory/sessions/{session.pk}/")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SHOTS / "hostile-session.png"), full_page=True)
        pwned = page.evaluate("() => window.__pwned === 1")
        assert not pwned and not dialogs, (pwned, dialogs)
    finally:
        context.close()


@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_run_detail_and_effectiveness_screenshots_have_no_error(browser, live_server, world):
    """The run page and effectiveness page render in the browser without console errors (CSP, missing assets)."""
    _browser_data(world)
    run = DreamRun.objects.filter(store=world.store_a).first()
    context, page = _page(browser, live_server, "adam")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        for name, path in [
            ("run", f"/reviews/runs/{run.pk}/"),
            ("effectiveness", f"/reviews/stores/{world.store_a.pk}/effectiveness/"),
            ("members", f"/teams/{world.team_a.slug}/members/"),
            ("skills", "/skills/"),
        ]:
            page.goto(live_server.url + path)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(SHOTS / f"wide-{name}.png"), full_page=True)
        assert not errors, errors[:5]
    finally:
        context.close()


@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_390px_member_remove_buttons_are_on_screen(browser, live_server, world):
    """At 390 px an admin can see each member's Remove button without scrolling a table sideways."""
    context, page = _page(browser, live_server, "adam", width=390)
    try:
        page.goto(f"{live_server.url}/teams/{world.team_a.slug}/members/")
        page.wait_for_load_state("networkidle")
        boxes = [b.bounding_box() for b in page.get_by_role("button", name="Remove").all()]
        off = [round(b["x"] + b["width"]) for b in boxes if b and b["x"] + b["width"] > 390]
        assert boxes and not off, f"Remove buttons end at x={off} (viewport 390)"
    finally:
        context.close()


@pytest.mark.parametrize("which", ["runs", "effectiveness"])
@pytest.mark.all_teams
@pytest.mark.django_db(transaction=True)
def test_390px_short_labels_are_not_broken_mid_word(browser, live_server, world, which):
    """At 390 px a short label (a store's policy link, an entry key) fits on at most two lines; it is not chopped
    into letters ("auton / omy", "deplo / y- / comma / nd")."""
    _browser_data(world)
    path, selector = {
        "runs": ("/reviews/runs/", ".dream-launch a[href*='/policy/']"),
        "effectiveness": (f"/reviews/stores/{world.store_a.pk}/effectiveness/", "a[href*='/memory/entries/']"),
    }[which]
    context, page = _page(browser, live_server, "adam", width=390)
    try:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        lines = page.eval_on_selector_all(
            selector, "els => els.map(e => [e.textContent.trim(), e.getClientRects().length])"
        )
        broken = [(text, n) for text, n in lines if n > 2]
        assert lines and not broken, f"labels broken into lines: {broken}"
    finally:
        context.close()
