# ruff: noqa: F811 - the page_support and browser fixtures are imported by name
"""Round 3 of the reviewer's pages under keyboard, small screens and mistakes.

Families: accessible names and structure (labels, aria references that resolve, headings in order, one h1, tables
with header text, live regions); a way back from every action (undo, publish again, a revoked key said clearly);
stale and double actions said clearly; htmx partials versus full pages and plain POSTs that redirect back; filters
and pagination that keep each other; untrusted text in titles, options and attributes; bad input answered next to
the field with what was typed kept; 390 px screens and keyboard focus in a real browser (screenshots under
/tmp/ui-probe/). Documents: README.md ("approve / reject / edit with one click or the keyboard", "At 390 px every
section stays in reach"), docs/design.md (Undo, People curate, htmx errors), /work/shared/DESIGN.md.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from dreamweb.provenance import Author
from memory.models import AgentSession
from memory.services import update_entry
from reviews.models import Proposal
from skills_registry.models import Skill
from tests.factories import SessionFactory, make_entry, make_proposal, make_skill
from tests.page_support import PageClient, _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HTMX = {"HTTP_HX_REQUEST": "true"}
SHOTS = Path("/tmp/ui-probe")

# --- a small DOM over html.parser (no third-party parser in the environment) -------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def get(self, key, default=None):
        return self.attrs.get(key, default)

    def find_all(self, tag=None, **attrs):
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag) and all(n.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def __repr__(self):
        return f"<{self.tag} {self.attrs}>"


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        for node in [self.cur, *self.cur.ancestors()]:
            if node.tag == tag:
                self.cur = node.parent or self.root
                return

    def handle_data(self, data):
        self.cur.children.append(data)


def dom(response_or_text) -> Node:
    text = response_or_text if isinstance(response_or_text, str) else response_or_text.content.decode()
    builder = _Builder()
    builder.feed(text)
    builder.close()
    return builder.root


def label_of(root: Node, control: Node) -> str:
    """The accessible name of a form control, as far as markup tells it."""
    if control.get("aria-label"):
        return control.get("aria-label")
    if control.get("aria-labelledby"):
        by_id = {n.get("id"): n for n in root.iter() if n.get("id")}
        return " ".join(by_id[i].text() for i in control.get("aria-labelledby").split() if i in by_id)
    for ancestor in control.ancestors():
        if ancestor.tag == "label":
            return ancestor.text()
    if control.get("id"):
        for n in root.iter():
            if n.tag == "label" and n.get("for") == control.get("id"):
                return n.text()
    return control.get("title") or ""


def login(client, user):
    client.force_login(user)
    return client


def messages_of(response) -> list[str]:
    return [" ".join(li.text().split()) for li in dom(response).iter() if "msg" in (li.get("class") or "").split()]


# --- data ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def queue(world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make ship.")
    update = make_proposal(world.store_a, operation="update", targets=["deploy"], content="Deploy with make release.")
    add = make_proposal(world.store_a, content="Announce releases in #deploys first.", key_hint="announce")
    return {"entry": entry, "update": update, "add": add}


def pages(world, queue):
    session = SessionFactory(team=world.team_a, agent="deploy-bot")
    skill = make_skill(world.team_a, name="release-process", body="# Release\n\n## Steps\n\nRun it.\n")
    return {
        "queue": reverse("reviews:queue"),
        "proposal": reverse("reviews:proposal", args=[queue["update"].pk]),
        "edit": reverse("reviews:edit", args=[queue["update"].pk]),
        "decided": reverse("reviews:decided"),
        "policy": reverse("reviews:policy", args=[world.store_a.pk]),
        "stores": reverse("memory:stores"),
        "entries": reverse("memory:entries", args=[world.store_a.pk]),
        "entry": reverse("memory:entry", args=[queue["entry"].pk]),
        "entry-new": reverse("memory:entry-create", args=[world.store_a.pk]),
        "entry-edit": reverse("memory:entry-edit", args=[queue["entry"].pk]),
        "sessions": reverse("memory:sessions"),
        "session": reverse("memory:session", args=[session.pk]),
        "runs": reverse("reviews:runs"),
        "skills": reverse("skills_registry:list"),
        "skill": reverse("skills_registry:detail", args=["team-a", skill.name]),
        "skill-versions": reverse("skills_registry:versions", args=["team-a", skill.name]),
        "keys": reverse("agent-keys", args=["team-a"]),
        "members": reverse("members", args=["team-a"]),
    }


GROUPS = {
    "review": ["queue", "proposal", "edit", "decided", "policy", "runs"],
    "memory": ["stores", "entries", "entry", "entry-new", "entry-edit", "sessions", "session"],
    "team": ["skills", "skill", "skill-versions", "keys", "members"],
}


# --- (1) structure and accessible names ----------------------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
def test_page_has_lang_one_h1_and_headings_in_order(client, world, queue, group):
    """A screen-reader user navigates by headings: one h1 naming the page, no level skipped, the page's language set
    (WCAG 1.3.1, 2.4.6, 3.1.1). A skill's own markdown headings belong under the page's h1, not beside it."""
    urls = pages(world, queue)
    login(client, world.adam)
    problems = []
    for name in GROUPS[group]:
        root = dom(client.get(urls[name]))
        levels = [int(n.tag[1]) for n in root.iter() if re.fullmatch(r"h[1-6]", n.tag)]
        if not any(n.tag == "html" and n.get("lang") for n in root.iter()):
            problems.append((name, "no lang"))
        if levels.count(1) != 1 or levels[0] != 1 or any(b > a + 1 for a, b in zip(levels, levels[1:])):
            problems.append((name, levels))
    assert not problems, problems


@pytest.mark.parametrize("group", GROUPS)
def test_aria_references_resolve_and_ids_are_unique(client, world, queue, group):
    """aria-describedby / aria-labelledby must name elements that exist, or the help text the sighted person reads
    is never read out (WCAG 1.3.1, 4.1.2); ids are unique on a page."""
    urls = pages(world, queue)
    login(client, world.adam)
    problems = []
    for name in GROUPS[group]:
        root = dom(client.get(urls[name]))
        ids = [n.get("id") for n in root.iter() if n.get("id")]
        problems += [
            (name, n.get("name"), attr, ref)
            for n in root.iter()
            for attr in ("aria-describedby", "aria-labelledby", "aria-controls")
            for ref in (n.get(attr) or "").split()
            if ref not in ids
        ]
        problems += [(name, "duplicate id", i) for i in sorted({i for i in ids if ids.count(i) > 1})]
    assert not problems, problems


@pytest.mark.parametrize("group", GROUPS)
def test_every_control_has_a_name_and_buttons_are_buttons(client, world, queue, group):
    """Every visible form control has a label; every link, button and summary has a name; nothing acts on a click
    unless it is a button, a link, a summary or a form (no clickable div or span, no href="#")."""
    urls = pages(world, queue)
    login(client, world.adam)
    problems = []
    for url in (urls[name] for name in GROUPS[group]):
        problems += control_problems(dom(client.get(url)), url)
    assert not problems, problems


def control_problems(root, url):
    problems = []
    for n in root.iter():
        control = n.tag in ("input", "select", "textarea") and n.get("type") not in ("hidden", "submit", "button")
        if control and "hidden" not in n.attrs and not label_of(root, n).strip():
            problems.append(("unlabelled", n.tag, n.get("name")))
        named = n.text().strip() or n.get("aria-label") or n.get("aria-labelledby")
        if n.tag in ("a", "button", "summary") and n.get("aria-hidden") != "true" and not named:
            problems.append(("no name", n.tag, n.attrs))
        if n.tag == "a" and n.get("href") in ("#", "", "javascript:void(0)"):
            problems.append(("link that is not a link", n.attrs))
        clicked = n.get("hx-get") and "click" in (n.get("hx-trigger") or "click")
        acts = n.get("hx-post") or n.get("onclick") or clicked
        if acts and n.tag not in ("button", "form", "a", "input", "textarea", "select", "details"):
            problems.append(("acts without being a button", n.tag, n.attrs))
    return [(url, *p) for p in problems]


def test_table_header_cells_all_have_text(client, world, queue):
    """A data table has a header for every column, and each header cell says something (an empty <th> over the
    action column leaves a screen reader announcing nothing for it)."""
    urls = pages(world, queue)
    login(client, world.adam)
    client.post(urls["keys"], {"name": "ci-bot", "scopes": ["sessions:write"]})
    problems = []
    for name in ("keys", "members", "entries", "sessions", "runs", "decided", "skill-versions"):
        root = dom(client.get(urls[name]))
        problems += [name for t in root.iter() if t.tag == "th" and not t.text().strip() and not t.get("aria-label")]
    assert not problems, problems


def test_each_cards_checkbox_and_reason_box_name_their_card(client, world, queue):
    """With several cards on the page, a screen reader lists "Select, Select, Reason, Reason": each control's name
    must say which proposal it concerns (WCAG 2.4.6 labels descriptive)."""
    root = dom(login(client, world.alice).get(reverse("reviews:queue")))
    boxes = [n for n in root.iter() if n.tag == "input" and "data-select" in n.attrs]
    reasons = [n for n in root.iter() if n.tag == "input" and "data-reason" in n.attrs]
    assert len(boxes) == 2 and len(reasons) == 2
    box_names = {label_of(root, n).strip() for n in boxes}
    reason_names = {label_of(root, n).strip() for n in reasons}
    assert len(box_names) == 2, box_names
    assert len(reason_names) == 2, reason_names


def test_every_page_has_a_polite_live_region_for_messages(client, world, queue):
    """Status changes are announced: the flash area is a live region on full pages, and the htmx decision
    answer keeps it one (role=status on the message)."""
    login(client, world.alice)
    root = dom(client.get(reverse("reviews:queue")))
    flash = [n for n in root.iter() if n.get("id") == "flash"]
    assert flash and flash[0].get("aria-live") in ("polite", "assertive")
    answer = client.post(reverse("reviews:approve", args=[queue["add"].pk]), {"next": "/reviews/"}, **HTMX)
    root = dom(answer)
    flash = [n for n in root.iter() if n.get("id") == "flash"]
    assert flash and flash[0].get("aria-live") in ("polite", "assertive")
    assert any(n.get("role") in ("status", "alert") for n in flash[0].iter())


def test_form_error_is_tied_to_its_field_and_what_was_typed_is_kept(client, world):
    """An entry created with an empty key: the error sits next to the field, the field is aria-invalid and points at
    the error text (aria-describedby resolves), and the content typed is kept (docs/design.md, People curate)."""
    url = reverse("memory:entry-create", args=[world.store_a.pk])
    response = login(client, world.alice).post(url, {"key": "", "content": "What I typed, carefully."})
    root = dom(response)
    key = [n for n in root.iter() if n.tag == "input" and n.get("name") == "key"][0]
    assert key.get("aria-invalid") == "true"
    ids = {n.get("id"): n for n in root.iter() if n.get("id")}
    described = [ids[i].text() for i in (key.get("aria-describedby") or "").split() if i in ids]
    assert any("required" in text.lower() for text in described), (key.attrs, described)
    content = [n for n in root.iter() if n.tag == "textarea" and n.get("name") == "content"][0]
    assert content.text().strip() == "What I typed, carefully."


# --- (2) a way back, stale and double actions ---------------------------------------------------------------------


def test_reject_toast_names_what_was_rejected_and_offers_undo(client, world, queue):
    """After approve the toast names the entry ("deploy v2"); after reject the reviewer deciding many cards with the
    keyboard needs the same: which proposal was rejected, and an Undo (docs/design.md, Undo)."""
    login(client, world.alice)
    answer = client.post(
        reverse("reviews:reject", args=[queue["add"].pk]),
        {"next": "/reviews/", f"reason-{queue['add'].pk}": "noise"},
        **HTMX,
    )
    root = dom(answer)
    assert root.find_all("button", data_action="undo"), answer.content.decode()[:500]
    text = " ".join(messages_of(answer))
    assert "announce" in text or f"#{queue['add'].pk}" in text, text


def test_second_reviewer_on_a_decided_card_is_told_who_decided_it(client, world, queue):
    """Two reviewers on one card: the second one's click must say clearly what happened — that it was already
    decided, how, and by whom — not just "someone" (brief: a stale action says so clearly)."""
    login(client, world.alice).post(reverse("reviews:reject", args=[queue["add"].pk]), {"next": "/reviews/"})
    other = PageClient()
    login(other, world.adam)
    answer = other.post(reverse("reviews:approve", args=[queue["add"].pk]), {"next": "/reviews/"}, **HTMX)
    assert answer.status_code < 500
    text = " ".join(messages_of(answer))
    assert "rejected" in text.lower(), text
    assert "alice" in text, text
    assert Proposal.objects.get(pk=queue["add"].pk).status == "rejected"


def test_approve_when_the_entry_changed_returns_the_conflict_card_with_a_way_forward(client, world, queue):
    """The entry changed since the proposal: the htmx answer is the card itself, marked conflict, saying what changed,
    with a rebase (docs/design.md, Decisions; README: "a rebase instead of an Approve that would fail")."""
    entry = queue["entry"]
    entry.refresh_from_db()
    update_entry(entry, content="Deploy changed meanwhile.", base_hash=entry.content_hash, author=Author.system())
    answer = login(client, world.alice).post(
        reverse("reviews:approve", args=[queue["update"].pk]), {"next": "/reviews/"}, **HTMX
    )
    assert answer.status_code == 200
    root = dom(answer)
    card = [n for n in root.iter() if n.get("id") == f"card-{queue['update'].pk}"]
    assert card, answer.content.decode()[:300]
    text = " ".join(card[0].text().split())
    assert "changed" in text and "version 2" in text, text
    assert card[0].find_all("button", data_action="rebase")


def test_plain_post_approve_redirects_to_next_with_filters_and_undo_comes_on_that_page(client, world, queue):
    """With JavaScript off, Approve is a plain POST that comes back to the filtered page it was sent from, with the
    message and its Undo form there (docs/design.md, Undo: "without JavaScript the same form comes")."""
    login(client, world.alice)
    nxt = f"/reviews/?store={world.store_a.pk}&risk=low"
    response = client.post(reverse("reviews:approve", args=[queue["add"].pk]), {"next": nxt})
    assert response.status_code in (302, 303)
    assert response["Location"] == nxt
    page = client.get(response["Location"])
    assert dom(page).find_all("button", data_action="undo")
    undo = client.post(reverse("reviews:undo", args=[queue["add"].pk]), {"next": nxt})
    assert undo.status_code in (302, 303) and undo["Location"] == nxt
    assert Proposal.objects.get(pk=queue["add"].pk).status == "pending"


def test_plain_post_reject_from_the_proposal_page_returns_there(client, world, queue):
    """A card's URL opened directly is a full page whose Reject works without JavaScript and brings the reviewer
    back to that page (or the queue), saying it was rejected, with Undo."""
    login(client, world.alice)
    url = reverse("reviews:proposal", args=[queue["add"].pk])
    root = dom(client.get(url))
    nxt = [n for n in root.iter() if n.tag == "input" and n.get("name") == "next"][0].get("value")
    response = client.post(
        reverse("reviews:reject", args=[queue["add"].pk]), {"next": nxt, f"reason-{queue['add'].pk}": "dup"}
    )
    assert response.status_code in (302, 303)
    assert response["Location"] in (url, "/reviews/")
    page = client.get(response["Location"], follow=True)
    assert page.status_code == 200
    assert any("reject" in m.lower() for m in messages_of(page)), messages_of(page)
    assert Proposal.objects.get(pk=queue["add"].pk).decision_reason == "dup"


def test_proposal_url_is_a_full_page_and_its_htmx_answer_a_partial(client, world, queue):
    """Without HX-Request the proposal's URL is a whole page (navigation, title); with it, the card alone; both say
    they vary on HX-Request so a cache never serves one for the other (docs/design.md, htmx)."""
    login(client, world.alice)
    url = reverse("reviews:proposal", args=[queue["update"].pk])
    full = client.get(url)
    part = client.get(url, **HTMX)
    assert b"<html" in full.content and b'class="mainnav"' in full.content
    assert b"<html" not in part.content and f'id="card-{queue["update"].pk}"'.encode() in part.content
    for response in (full, part):
        assert "HX-Request" in response.get("Vary", ""), response.get("Vary")


def test_skill_unpublish_says_so_and_publish_brings_it_back(client, world):
    """Unpublishing a skill is reversible from the same page: a message says what happened, the page offers Publish,
    and publishing brings it back (docs/design.md, Roll back a run: "Publish brings it back")."""
    skill = make_skill(world.team_a, name="release-process")
    login(client, world.adam)
    url = reverse("skills_registry:status", args=["team-a", skill.name])
    response = client.post(url, {"action": "unpublish", "base_hash": skill.content_hash}, follow=True)
    assert response.status_code == 200
    assert any("unpublish" in m.lower() or "withdr" in m.lower() for m in messages_of(response)), messages_of(response)
    skill = Skill.objects.get(pk=skill.pk)
    assert skill.status != "published"
    root = dom(client.get(reverse("skills_registry:detail", args=["team-a", skill.name])))
    publish = [n for n in root.iter() if n.tag == "input" and n.get("name") == "action" and n.get("value") == "publish"]
    assert publish
    client.post(url, {"action": "publish", "base_hash": skill.content_hash})
    assert Skill.objects.get(pk=skill.pk).status == "published"


def test_stale_skill_unpublish_says_the_skill_changed(client, world):
    """Two admins: the second one's Unpublish against an old version is refused with a message, not a 500 and not
    silently applied."""
    skill = make_skill(world.team_a, name="release-process")
    login(client, world.adam)
    url = reverse("skills_registry:status", args=["team-a", skill.name])
    response = client.post(url, {"action": "unpublish", "base_hash": "0" * 64}, follow=True)
    assert response.status_code in (200, 409, 412)
    assert any("changed" in m.lower() for m in messages_of(response)), messages_of(response)
    assert Skill.objects.get(pk=skill.pk).status == "published"


def test_key_revocation_asks_first_names_the_key_and_says_what_now(client, world):
    """Revoking a key cannot be undone, so it asks first (data-confirm naming the key) and afterwards says clearly
    which key was revoked and the way forward (a new key for the agent)."""
    login(client, world.adam)
    url = reverse("agent-keys", args=["team-a"])
    client.post(url, {"name": "ci-bot", "scopes": ["sessions:write"]})
    root = dom(client.get(url))
    forms = [n for n in root.iter() if n.tag == "form" and "/revoke/" in (n.get("action") or "")]
    confirm = forms[0].get("data-confirm") or ""
    assert "ci-bot" in confirm
    response = client.post(forms[0].get("action"), follow=True)
    text = " ".join(messages_of(response))
    assert "ci-bot" in text, text
    said = confirm + " " + text
    assert re.search(r"new key|create (a|another) key|cannot be undone|can.t be undone|permanent", said, re.I), said


def test_revoke_buttons_say_which_key(client, world):
    """Two keys, two "Revoke" buttons: a screen reader's button list must tell them apart (WCAG 2.4.6)."""
    login(client, world.adam)
    url = reverse("agent-keys", args=["team-a"])
    for name in ("ci-bot", "nightly-bot"):
        client.post(url, {"name": name, "scopes": ["sessions:write"]})
    root = dom(client.get(url))
    buttons = [
        n
        for f in root.iter()
        if f.tag == "form" and "/revoke/" in (f.get("action") or "")
        for n in f.iter()
        if n.tag == "button"
    ]
    assert len(buttons) == 2
    names = {(b.get("aria-label") or b.text()).strip() for b in buttons}
    assert len(names) == 2, names


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_can_be_taken_back_after_the_toast_is_gone(client, world, queue, decision):
    """The toast's Undo lasts 15 s. Later (next morning, another tab) the proposal's page must still offer the way
    back: an Undo form, or for an approval at least a link to the version it wrote (whose page can revert it)."""
    login(client, world.alice)
    pk = queue["update"].pk
    client.post(reverse(f"reviews:{decision}", args=[pk]), {"next": "/reviews/"})
    root = dom(client.get(reverse("reviews:proposal", args=[pk])))
    undo = [n for n in root.iter() if n.tag == "form" and (n.get("action") or "").endswith(f"/proposals/{pk}/undo/")]
    written = [n for n in root.iter() if n.tag == "a" and "#version-" in (n.get("href") or "")]
    if decision == "reject":
        assert undo, "no way to reopen a rejected proposal once the toast has gone"
    else:
        assert undo or written


# --- (3) filters and pagination -------------------------------------------------------------------------------------


@pytest.fixture
def many(world):
    from tests.factories import StoreFactory

    other = StoreFactory(team=world.team_a, slug="ops-a")
    sessions = [SessionFactory(team=world.team_a)]
    for i in range(5):
        make_proposal(world.store_a, content=f"Eng lesson {i} about builds.", key_hint=f"eng-{i}", sessions=sessions)
        make_proposal(other, content=f"Ops lesson {i} about pagers.", key_hint=f"ops-{i}", sessions=sessions)
    return other


def test_queue_pager_keeps_the_filter_and_back_returns_to_page_one_of_it(client, world, many):
    """Filter by store, go to page 2, come back: every page link keeps the filter, and page 2 shows only that
    store's cards."""
    login(client, world.alice)
    first = client.get(f"/reviews/?store={world.store_a.pk}&per=2")
    root = dom(first)
    nxt = [n for n in root.iter() if n.tag == "a" and n.get("rel") == "next"]
    assert nxt
    query = parse_qs(urlsplit(nxt[0].get("href")).query)
    assert query.get("store") == [str(world.store_a.pk)] and query.get("page") == ["2"], nxt[0].get("href")
    second = client.get("/reviews/" + nxt[0].get("href"))
    text = second.content.decode()
    assert "Eng lesson" in text and "Ops lesson" not in text
    prev = [n for n in dom(second).iter() if n.tag == "a" and n.get("rel") == "prev"]
    assert parse_qs(urlsplit(prev[0].get("href")).query).get("store") == [str(world.store_a.pk)]


def test_risk_counters_keep_the_store_filter(client, world, many):
    """The "Low risk" counter in a store-filtered queue narrows that store's queue; it must not drop the store
    filter the reviewer chose (filters keep each other)."""
    login(client, world.alice)
    root = dom(client.get(f"/reviews/?store={world.store_a.pk}"))
    low = [n for n in root.iter() if n.tag == "a" and "risk-low" in (n.get("class") or "")][0]
    query = parse_qs(urlsplit(low.get("href")).query)
    assert query.get("store") == [str(world.store_a.pk)], low.get("href")
    assert query.get("risk") == ["low"], low.get("href")


def test_queue_htmx_filter_answer_is_the_list_only_and_decision_next_keeps_the_filter(client, world, many):
    """A filter change with htmx swaps #queue-list only; the Approve buttons it brings post a "next" that keeps the
    filter, so a plain decision comes back to the same filtered page."""
    login(client, world.alice)
    response = client.get(f"/reviews/?store={many.pk}&risk=low", **HTMX)
    text = response.content.decode()
    assert "<html" not in text and 'id="queue-list"' in text
    assert "Ops lesson" in text and "Eng lesson" not in text
    nexts = [n.get("value") for n in dom(response).iter() if n.tag == "input" and n.get("name") == "next"]
    assert nexts and all(f"store={many.pk}" in v and "risk=low" in v for v in nexts), nexts


def test_session_list_pager_keeps_the_agent_filter(client, world):
    """Sessions filtered by agent, many pages: the Older link keeps the agent filter and its page shows only that
    agent's sessions."""
    from tests.scoping import all_teams

    with all_teams():
        rows = [
            SessionFactory.build(team=world.team_a, external_id=f"bulk-{i:04d}", agent="a" if i % 2 else "b")
            for i in range(220)
        ]
        AgentSession.objects.bulk_create(rows)
    login(client, world.alice)
    root = dom(client.get("/memory/sessions/?agent=a"))
    older = [n for n in root.iter() if n.tag == "a" and "Older" in n.text()]
    assert older, "no pager for 110 sessions of agent a"
    href = older[0].get("href")
    assert parse_qs(urlsplit(href).query).get("agent") == ["a"], href
    page2 = dom(client.get("/memory/sessions/" + href))
    agents = {
        " ".join(td.text().split())
        for tr in page2.iter()
        if tr.tag == "tr"
        for td in tr.iter()
        if td.tag == "td" and td.text().strip() in ("a", "b")
    }
    assert agents <= {"a"}, agents


def test_pagers_are_named_navigation_landmarks(client, world):
    """A page with the main navigation and a pager has two <nav> landmarks; each needs a name, or a screen reader's
    landmark list shows two "navigation" entries (the queue's pager has aria-label="Pages"; the others must too)."""
    from tests.scoping import all_teams

    with all_teams():
        rows = [SessionFactory.build(team=world.team_a, external_id=f"nav-{i:04d}") for i in range(120)]
        AgentSession.objects.bulk_create(rows)
        for i in range(3):
            make_proposal(world.store_a, content=f"Lesson {i}.", key_hint=f"lesson-{i}")
    login(client, world.alice)
    unnamed = []
    for url in ("/memory/sessions/", "/reviews/?per=1"):
        root = dom(client.get(url))
        navs = [n for n in root.iter() if n.tag == "nav"]
        assert len(navs) >= 2, (url, navs)
        unnamed += [(url, n.get("class")) for n in navs if not (n.get("aria-label") or n.get("aria-labelledby"))]
    assert not unnamed, unnamed


def test_the_proposal_page_shows_the_whole_rationale(client, world):
    """The rationale is the reviewer's reason to approve: on the proposal's own page it is readable in full (or one
    click away), not cut with an ellipsis and no way to read the rest (README: "the diff, rationale, ...")."""
    rationale = "Agents ran the wrong command. " + "Details follow. " * 25 + "THE-LAST-WORDS."
    proposal = make_proposal(world.store_a, content="Lesson.", key_hint="lesson", rationale=rationale)
    text = login(client, world.alice).get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    assert "THE-LAST-WORDS." in text


def test_undo_after_the_entry_changed_again_says_who_changed_what(client, world, queue):
    """Undo of an approval whose entry changed since is refused, "with who changed what" (docs/design.md, Undo):
    the message names the entry and the person, and nothing is overwritten."""
    login(client, world.alice)
    client.post(reverse("reviews:approve", args=[queue["update"].pk]), {"next": "/reviews/"})
    edit = reverse("memory:entry-edit", args=[queue["entry"].pk])
    adam = PageClient()
    login(adam, world.adam)
    root = dom(adam.get(edit))
    data = {
        n.get("name"): (n.text() if n.tag == "textarea" else n.get("value") or "")
        for n in root.iter()
        if n.tag in ("input", "textarea") and n.get("name") and n.get("type") not in ("checkbox", "submit")
    }
    data.update(content="Deploy with make release --fast.", reason="faster")
    adam.post(edit, data)
    entry = queue["entry"]
    entry.refresh_from_db()
    assert entry.content == "Deploy with make release --fast."
    response = client.post(reverse("reviews:undo", args=[queue["update"].pk]), {"next": "/reviews/"}, follow=True)
    assert response.status_code == 200
    text = " ".join(messages_of(response))
    assert "deploy" in text and "adam" in text, text
    entry.refresh_from_db()
    assert entry.content == "Deploy with make release --fast."


def test_bulk_with_nothing_selected_says_so(client, world, queue):
    """Approve selected with no card selected: a message says to select some, nothing changes, no error page."""
    login(client, world.alice)
    response = client.post(reverse("reviews:bulk"), {"action": "approve", "next": "/reviews/"}, follow=True)
    assert response.status_code == 200
    assert re.search(r"select|nothing|no proposal|none", " ".join(messages_of(response)), re.I), messages_of(response)
    assert Proposal.objects.filter(status="pending").count() == 2


def test_edit_url_without_javascript_is_a_page_whose_form_approves_and_returns(client, world, queue):
    """ "Edit, then approve" is a link: opened without JavaScript it is a whole page with the edit form; posting it
    applies the edited text and comes back to the page named in next, with the message there."""
    login(client, world.alice)
    pk = queue["update"].pk
    url = reverse("reviews:edit", args=[pk]) + "?next=/reviews/%3Frisk%3Dlow"
    page = client.get(url)
    assert page.status_code == 200 and b"<html" in page.content
    form = [n for n in dom(page).iter() if n.tag == "form" and "edit-form" in (n.get("class") or "")][0]
    data = {n.get("name"): n.get("value") or "" for n in form.iter() if n.tag == "input" and n.get("name")}
    data.update(content="Deploy with make release, then smoke-test.", reason="add the check")
    response = client.post(form.get("action"), data)
    assert response.status_code in (302, 303), response.status_code
    assert response["Location"] == "/reviews/?risk=low", response["Location"]
    queue["entry"].refresh_from_db()
    assert queue["entry"].content == "Deploy with make release, then smoke-test."
    assert any("deploy" in m for m in messages_of(client.get(response["Location"])))


def test_entry_content_over_the_size_limit_is_an_error_by_the_field_and_kept(client, world, settings):
    """An entry longer than the store accepts: the error sits next to the content box (not a 413 page, not a
    500) and the text typed is still in the box."""
    settings.DREAMWEB_MAX_ENTRY_BYTES = 2000
    typed = "Keep this lesson. " + "x" * 2500
    url = reverse("memory:entry-create", args=[world.store_a.pk])
    response = login(client, world.alice).post(url, {"key": "huge", "content": typed, "reason": "r"})
    assert response.status_code in (200, 400), response.status_code
    root = dom(response)
    content = [n for n in root.iter() if n.tag == "textarea" and n.get("name") == "content"][0]
    assert content.text().strip() == typed
    near = re.sub(r"x{20,}", "x…", content.parent.text())
    errors = [
        " ".join(n.text().split())[:200]
        for n in root.iter()
        if {"errorlist", "form-error"} & set((n.get("class") or "").split())
    ]
    assert re.search(r"bytes|long|limit|at most", near, re.I), (response.status_code, near[:200], errors)
    assert content.get("aria-invalid") == "true", content.attrs


# --- (4) untrusted text in titles, options and attributes --------------------------------------------------------


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def test_hostile_key_hint_is_literal_in_title_heading_and_card(client, world):
    """An add proposal whose key hint is hostile: the proposal page's <title>, h1 and card show it as text."""
    proposal = make_proposal(world.store_a, content="Some lesson.", key_hint=HOSTILE[:60])
    response = login(client, world.alice).get(reverse("reviews:proposal", args=[proposal.pk]))
    text = response.content.decode()
    assert "<script>alert(1)" not in text and "<img src=x" not in text
    title = re.search(r"<title>(.*?)</title>", text, re.S).group(1)
    assert "<" not in title


def test_hostile_agent_names_in_filter_options_are_text(client, world):
    """Agent names come from pushed sessions: in the session list's and the queue's <option>s they stay text, and
    the option's value attribute is quoted (no attribute break-out)."""
    SessionFactory(team=world.team_a, agent=HOSTILE[:90])
    make_proposal(world.store_a, content="Scoped lesson.", key_hint="scoped", scope_agent=HOSTILE[:90])
    login(client, world.alice)
    for url in ("/memory/sessions/", "/reviews/"):
        text = client.get(url).content.decode()
        assert "<script>alert(1)" not in text and "<img src=x" not in text, url
        options = [n for n in dom(text).iter() if n.tag == "option" and "script" in (n.get("value") or "")]
        assert options, url
        assert all(o.get("value") == HOSTILE[:90] for o in options), url


def test_hostile_skill_description_and_markdown_links_stay_text(client, world):
    """A skill's description with <script> and a javascript: markdown link: shown literally on the list and the skill
    page, and no href or attribute anywhere carries javascript:."""
    make_skill(
        world.team_a,
        name="evil-skill",
        description="<script>alert(1)</script> [x](javascript:alert(1))",
        body="# Evil\n\n[click me](javascript:alert(1))\n\n[ok](JaVaScRiPt:alert(2))\n\n<a href='javascript:x'>a</a>\n",
    )
    login(client, world.alice)
    for url in ("/skills/", reverse("skills_registry:detail", args=["team-a", "evil-skill"])):
        text = client.get(url).content.decode()
        assert "<script>alert(1)" not in text, url
        for n in dom(text).iter():
            for key, value in n.attrs.items():
                assert not (value or "").strip().lower().startswith("javascript:"), (url, n.tag, key, value)


def test_hostile_session_id_is_literal_in_the_session_title_and_list(client, world):
    """A session's external id is chosen by whoever pushed it: the session page's <title>, heading and the list's
    link show it as text, and no attribute breaks out."""
    session = SessionFactory(team=world.team_a, external_id=HOSTILE[:80])
    login(client, world.alice)
    for url in (reverse("memory:session", args=[session.pk]), "/memory/sessions/"):
        text = client.get(url).content.decode()
        assert "<script>alert(1)" not in text and "<img src=x" not in text, url
        title = re.search(r"<title>(.*?)</title>", text, re.S).group(1)
        assert "<" not in title, title
        assert not any(k.startswith("onerror") for n in dom(text).iter() for k in n.attrs), url


def test_hostile_name_typed_into_member_add_is_literal_in_the_toast(client, world):
    """The "no account is named ..." toast repeats what was typed: it shows it as text, not markup."""
    login(client, world.adam)
    response = client.post(
        reverse("member-add", args=["team-a"]), {"identifier": HOSTILE[:80], "role": "reviewer"}, follow=True
    )
    text = response.content.decode()
    assert "<script>alert(1)" not in text and "<img src=x" not in text
    assert any("<script>alert(1)</script>" in m for m in messages_of(response)), messages_of(response)


# --- (5) bad input next to the field ----------------------------------------------------------------------------


def test_key_form_too_long_name_is_an_error_next_to_the_field_and_kept(client, world):
    """A key name over the limit: the error is inside the name's field box and what was typed is still there."""
    login(client, world.adam)
    long_name = "n" * 150
    response = client.post(reverse("agent-keys", args=["team-a"]), {"name": long_name, "scopes": ["sessions:write"]})
    assert response.status_code in (200, 400)
    root = dom(response)
    name = [n for n in root.iter() if n.tag == "input" and n.get("name") == "name"][0]
    assert name.get("value") == long_name
    box = name.parent
    assert re.search(r"at most|too long|characters", box.text(), re.I), box.text()


def test_member_add_with_an_unknown_account_says_so_next_to_the_field(client, world):
    """Adding a member by a name that matches no account: the message sits by the field and the name typed stays."""
    login(client, world.adam)
    response = client.post(
        reverse("member-add", args=["team-a"]), {"identifier": "nobody-like-this", "role": "reviewer"}, follow=True
    )
    assert response.status_code in (200, 400)
    text = response.content.decode()
    assert re.search(r"no account|not found|does not exist|no such|unknown", text, re.I)
    field = [n for n in dom(text).iter() if n.tag == "input" and n.get("name") == "identifier"][0]
    assert field.get("value") == "nobody-like-this", (messages_of(response), field.attrs)


def test_policy_max_sessions_input_says_at_least_one(client, world):
    """The page says the session budget is "at least 1" and the server refuses 0; the input's own min must agree,
    so the browser's spinner and validation do not offer 0 (docs/design.md: "at least 1, a rule of the model field
    that the page and the admin both apply")."""
    root = dom(login(client, world.adam).get(reverse("reviews:policy", args=[world.store_a.pk])))
    field = [n for n in root.iter() if n.tag == "input" and n.get("name") == "max_sessions"][0]
    assert field.get("min") == "1", field.attrs


def test_policy_bad_values_keep_every_typed_value(client, world):
    """Several bad values at once: each field shows its error and keeps exactly what was typed, the others too."""
    login(client, world.adam)
    data = {
        "mode": "autonomous",
        "min_sessions": "three",
        "min_share": "1.5",
        "min_confidence_auto": "0.7",
        "min_sources": "2",
        "max_sessions": "0",
        "token_budget": "5000",
        "analyzer": "rules",
        "agents": "bot-1, bot-2",
        "forget_after_days": "12",
        "removal_risk": "medium",
        "schedule_minutes": "90",
    }
    response = client.post(reverse("reviews:policy", args=[world.store_a.pk]), data)
    root = dom(response)
    for name, value in data.items():
        if name == "mode":
            checked = [n for n in root.iter() if n.get("name") == "mode" and "checked" in n.attrs]
            assert checked and checked[0].get("value") == value
            continue
        if name in ("analyzer", "removal_risk"):
            sel = [n for n in root.iter() if n.tag == "select" and n.get("name") == name][0]
            chosen = [o.get("value") for o in sel.iter() if o.tag == "option" and "selected" in o.attrs]
            assert chosen == [value], (name, chosen)
            continue
        field = [n for n in root.iter() if n.tag == "input" and n.get("name") == name][0]
        assert field.get("value") == value, (name, field.get("value"))
    for bad in ("min_sessions", "min_share", "max_sessions"):
        field = [n for n in root.iter() if n.tag == "input" and n.get("name") == bad][0]
        assert field.get("aria-invalid") == "true", bad
        assert "errorlist" in (field.parent.find_all("ul")[0].get("class") or ""), bad


# --- (6) in a real browser: 390 px and the keyboard ---------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
LONG_COMMAND = "deploy --target=" + "production-cluster-eu-west-1" * 11  # about 320 characters, no space
LONG_URL = "https://artifacts.example.com/" + "/".join(f"segment{i:03d}" for i in range(30))

WIDER = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter(e => !e.closest('.sr-only'))
  .slice(0, 5)
  .map(e => e.tagName.toLowerCase() + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""

FOCUS_STYLE = """() => { const e = document.activeElement; const s = getComputedStyle(e);
  return {tag: e.tagName.toLowerCase(), text: (e.innerText || e.value || e.getAttribute('aria-label') || '').trim()
    .slice(0, 40), action: e.getAttribute('data-action'), id: e.id, card: e.closest('[data-card]')?.id || null,
    outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0, shadow: s.boxShadow !== 'none'}; }"""


@pytest.fixture(scope="module")
def chromium():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"], headless=True
        )
        yield browser
        browser.close()


def open_page(chromium, live_server, username, width=1280, height=900):
    context = chromium.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


def close(page):
    page.wait_for_load_state("networkidle")
    page.context.close()


def shoot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


@pytest.fixture
def long_strings(world):
    entry = make_entry(world.store_a, key="long-command", content=f"Run `{LONG_COMMAND}` then check {LONG_URL}")
    session = SessionFactory(
        team=world.team_a,
        external_id="long-" + "x" * 120,
        agent="deploy-bot",
        events=[
            {"type": "message", "role": "user", "content": f"Fetch {LONG_URL} and run it."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": LONG_COMMAND}},
            {"type": "tool_result", "call_id": "c1", "content": LONG_URL, "is_error": False, "exit_code": 0},
        ],
        event_count=3,
    )
    proposal = make_proposal(
        world.store_a,
        content=f"Deploy with `{LONG_COMMAND}`; artifacts at {LONG_URL}",
        key_hint="deploy-" + "k" * 90,
        rationale=f"Agents ran {LONG_COMMAND} after reading {LONG_URL}.",
        sessions=[session],
    )
    return {"session": session, "proposal": proposal, "entry": entry}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium")
def test_390px_queue_session_store_and_policy_do_not_scroll_sideways(chromium, live_server, world, long_strings):
    """README: "At 390 px every section stays in reach". A 320-character command and a long URL in a card, a
    session and an entry wrap or scroll inside their box; the page itself never scrolls sideways."""
    page = open_page(chromium, live_server, "adam", width=390, height=844)
    urls = {
        "queue": "/reviews/",
        "session": reverse("memory:session", args=[long_strings["session"].pk]),
        "store": reverse("memory:entries", args=[world.store_a.pk]),
        "policy": reverse("reviews:policy", args=[world.store_a.pk]),
        "proposal": reverse("reviews:proposal", args=[long_strings["proposal"].pk]),
        "entry": reverse("memory:entry", args=[long_strings["entry"].pk]),
        "runs": "/reviews/runs/",
        "decided": "/reviews/decided/",
        "keys": reverse("agent-keys", args=["team-a"]),
        "members": reverse("members", args=["team-a"]),
        "skills": "/skills/",
        "sessions": "/memory/sessions/",
    }
    wide = {}
    try:
        for name, url in urls.items():
            page.goto(live_server.url + url)
            page.wait_for_load_state("networkidle")
            shoot(page, f"r3-390-{name}.png")
            sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if sideways > 0:
                wide[name] = (sideways, page.evaluate(WIDER))
    finally:
        close(page)
    assert not wide, wide


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium")
def test_tab_reaches_every_action_of_a_card_with_visible_focus(chromium, live_server, world, queue):
    """Keyboard alone: Tab walks a card's select box, title link, Approve, Edit and Reject in reading order, each
    with a visible focus ring; Enter on Reject opens the reason box, typing and Enter rejects (README: "approve /
    reject / edit with one click or the keyboard")."""
    page = open_page(chromium, live_server, "alice")
    pk = queue["add"].pk
    try:
        page.locator(f"#card-{pk} [data-select]").focus()
        seen = [page.evaluate(FOCUS_STYLE)]
        for _ in range(6):
            page.keyboard.press("Tab")
            seen.append(page.evaluate(FOCUS_STYLE))
        in_card = [s for s in seen if s["card"] == f"card-{pk}"]
        actions = [s["action"] for s in in_card if s["action"]]
        assert actions[:3] == ["approve", "edit", "reject"], seen
        invisible = [s for s in in_card if not (s["outline"] or s["shadow"])]
        assert not invisible, invisible
        page.locator(f"#card-{pk} summary[data-action=reject]").focus()
        page.keyboard.press("Enter")
        reason = page.locator(f"#card-{pk} [data-reason]")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.hasAttribute('data-reason')"), page.evaluate(FOCUS_STYLE)
        reason.type("duplicate of an older lesson")
        page.keyboard.press("Enter")
        page.locator(f"#card-{pk}").wait_for(state="detached")
        page.wait_for_load_state("networkidle")
        shoot(page, "r3-keyboard-rejected.png")
    finally:
        close(page)
    assert Proposal.objects.get(pk=pk).status == "rejected"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium")
def test_focus_after_keyboard_approve_and_undo_lands_somewhere_sensible(chromium, live_server, world, queue):
    """After Enter on a card's Approve the card leaves: focus must not fall to <body> (a keyboard user would have to
    Tab from the top again) but land on the next card or the toast; after Undo (Enter on the toast's button) focus
    lands on the card that came back, not on <body>."""
    page = open_page(chromium, live_server, "alice")
    first, second = queue["add"].pk, queue["update"].pk
    order = page.evaluate("[...document.querySelectorAll('[data-card]')].map(c => c.id)")
    approved = int(order[0].split("-")[1])
    try:
        page.locator(f"#{order[0]} [data-action=approve]").focus()
        page.keyboard.press("Enter")
        page.locator(f"#{order[0]}").wait_for(state="detached")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(400)
        after_approve = page.evaluate(FOCUS_STYLE)
        page.locator("#flash [data-action=undo]").focus()
        page.keyboard.press("Enter")
        page.locator(f"#{order[0]}").wait_for()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(400)
        after_undo = page.evaluate(FOCUS_STYLE)
        shoot(page, "r3-after-undo.png")
    finally:
        close(page)
    assert {first, second} >= {approved}
    assert after_approve["tag"] != "body", after_approve
    assert after_undo["tag"] != "body", after_undo
    assert after_undo["card"] == order[0] or after_undo["id"] == order[0], after_undo


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium")
def test_filter_then_page_two_then_back_keeps_the_filter(chromium, live_server, world):
    """With JavaScript: choose a store (htmx swap, URL pushed), go to page 2, press Back: the URL, the select and the
    cards all still say that store (filters and pagination keep each other)."""
    from tests.factories import StoreFactory

    other = StoreFactory(team=world.team_a, slug="ops-a")
    sessions = [SessionFactory(team=world.team_a)]
    for i in range(30):
        make_proposal(world.store_a, content=f"Eng lesson {i} about builds.", key_hint=f"eng-{i}", sessions=sessions)
        make_proposal(other, content=f"Ops lesson {i} about pagers.", key_hint=f"ops-{i}", sessions=sessions)
    page = open_page(chromium, live_server, "alice")
    store = str(world.store_a.pk)
    try:
        page.goto(f"{live_server.url}/reviews/")
        page.select_option("#id_store", store)
        page.wait_for_url(re.compile(rf"store={store}"))
        page.wait_for_load_state("networkidle")
        page.locator("#queue-list a[rel=next]").click()
        page.wait_for_url(re.compile(r"page=2"))
        page.wait_for_load_state("networkidle")
        on_two = page.locator("[data-card] .card-title").all_inner_texts()
        url_two = page.url
        page.go_back()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(300)
        back_url = page.url
        back_select = page.locator("#id_store").input_value()
        back_cards = page.locator("[data-card] .card-title").all_inner_texts()
        shoot(page, "r3-filter-back.png")
    finally:
        close(page)
    assert f"store={store}" in url_two and on_two and all(t.startswith("eng-") for t in on_two), (url_two, on_two)
    assert f"store={store}" in back_url and "page=2" not in back_url, back_url
    assert back_select == store
    assert back_cards and all(t.startswith("eng-") for t in back_cards), back_cards


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium")
def test_skip_link_is_first_visible_on_focus_and_moves_focus_to_main(chromium, live_server, world, queue):
    """The first Tab on a page shows "Skip to content" on screen; Enter on it moves the keyboard past the navigation,
    so the next Tab lands inside main, not back in the top bar."""
    page = open_page(chromium, live_server, "alice")
    try:
        page.goto(f"{live_server.url}/reviews/")
        page.wait_for_load_state("networkidle")
        page.locator("body").press("Tab")
        first = page.evaluate(FOCUS_STYLE)
        box = page.locator("a.skip").bounding_box()
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        inside = page.evaluate("!!document.activeElement.closest('main')")
        shoot(page, "r3-skip.png")
    finally:
        close(page)
    assert first["text"].startswith("Skip"), first
    assert box and box["x"] >= 0 and box["y"] >= 0 and box["width"] > 0, box
    assert inside


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium")
def test_rebase_by_keyboard_keeps_focus_in_the_card(chromium, live_server, world, queue):
    """The entry changed since the dream: the card offers "Rebase onto the current text" instead of Approve
    (README). Enter on it swaps the card; the keyboard user is still in that card afterwards (focus not dropped to
    <body>), and Enter on the rebased card's Approve applies it."""
    entry = queue["entry"]
    update_entry(entry, content="Deploy with make ship --now.", base_hash=entry.content_hash, author=Author.system())
    pk = queue["update"].pk
    page = open_page(chromium, live_server, "alice")
    try:
        page.locator(f"#card-{pk} [data-action=rebase]").focus()
        page.keyboard.press("Enter")
        page.locator(f"#card-{pk} [data-action=approve]").wait_for()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)
        after_rebase = page.evaluate(FOCUS_STYLE)
        shoot(page, "r3-rebased.png")
        page.locator(f"#card-{pk} [data-action=approve]").focus()
        page.keyboard.press("Enter")
        page.locator(f"#card-{pk}").wait_for(state="detached")
        page.wait_for_load_state("networkidle")
    finally:
        close(page)
    assert after_rebase["card"] == f"card-{pk}" or after_rebase["id"] == f"card-{pk}", after_rebase
    entry.refresh_from_db()
    assert entry.content == "Deploy with make release."
