"""Families found by blind scenarios 16 and 17 (a data-center network team, a game localization desk, a quant
research desk, a mainframe shop), each tested with wordings of its own: an instruction scoped to one occasion is
no standing rule, two entries about one specific path, address, range or time are one entry, a store asked for a
name it does not hold found nothing, and an entry that writes the failing command with placeholders is stale."""

from __future__ import annotations

import pytest

from reviews.analysis import aggregate as ag
from reviews.analysis import rules

from .dream_sessions import session_doc
from .test_analysis_families_blind14 import _calls  # a session of these tool calls, in order


@pytest.mark.parametrize(
    "text",
    [
        "For this deploy only, pass --no-verify; the hook server is down.",
        "This migration only: run it with --lock-timeout 0.",
        "Just this release: ship without the arm64 build.",
        "Only for tonight's cutover, point the app at the replica.",
        "For the Black Friday freeze only, skip the canary.",
        "Only for the 4.2.1 patch, bump the timeout to 90.",
        "Only for INC-4412 today: allow the old TLS ciphers.",
        "Keep --dry-run off this time. Regular deploys stay on the canary path.",
        "Use the staging bucket here, but don't keep that.",
        "Por esta migración solamente, desactiva los triggers.",
        "Nur für diesen Lauf: ohne Cache bauen.",
        "Uniquement pour cette release : sans les tests lents.",
    ],
)
def test_an_instruction_scoped_to_one_occasion_is_a_one_off(text):
    assert rules.ONE_OFF.search(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Use --sign only for the release branch.",
        "Only for the payments service, use the blue pool.",
        "Regular deploys use the canary path.",
        "Run the migration job before every deploy.",
        "The build only works on the self-hosted runners.",
        "Only the on-call engineer may approve this change.",
    ],
)
def test_a_standing_rule_with_the_same_words_is_not(text):
    assert not rules.ONE_OFF.search(text), text


def _session(sid: str, user: str) -> dict:
    events = [
        {"type": "message", "role": "user", "content": "Run the rollout."},
        {
            "type": "tool_call",
            "id": "c1",
            "name": "bash",
            "arguments": {"command": "kubectl rollout restart deploy/api"},
        },
        {"type": "tool_result", "call_id": "c1", "content": "error: hook check failed", "is_error": True},
        {"type": "message", "role": "user", "content": user},
        {
            "type": "tool_call",
            "id": "c2",
            "name": "bash",
            "arguments": {"command": "kubectl rollout restart deploy/api --skip-hooks"},
        },
        {"type": "tool_result", "call_id": "c2", "content": "deployment.apps/api restarted", "is_error": False},
    ]
    return session_doc(sid, events)


def _corrections(doc: dict) -> list[dict]:
    return [f for f in rules.analyze(doc).findings if f["kind"] in ("correction", "corrected_command")]


def test_a_correction_scoped_to_one_occasion_is_not_learned_and_the_same_one_unscoped_is():
    scoped = _session("s1", "For this rollout only, add --skip-hooks: the hook service is being moved tonight.")
    standing = _session("s2", "Add --skip-hooks: the hook service is gone for good.")
    assert not any("--skip-hooks" in (f.get("new") or "") for f in _corrections(scoped))
    assert any("--skip-hooks" in (f.get("new") or "") for f in _corrections(standing))


def _pair(a: str, b: str) -> tuple[ag.Entry, ag.Entry]:
    x, y = ag.MemoryIndex([{"key": "a", "content": a}, {"key": "b", "content": b}]).entries
    return x, y


@pytest.mark.parametrize(
    "a, b",
    [
        (
            "Build artifacts are published to /srv/artifacts/nightly.",
            "Never delete anything under /srv/artifacts/nightly.",
        ),
        ("Management addresses come from 172.31.8.0/22.", "Hand out OOB IPs only from 172.31.8.0/22, one per device."),
        ("The jump host is bastion-eu2.corp.example.", "Need a shell on prod? Go through bastion-eu2.corp.example."),
        ("Settlement files arrive at 06:45 UTC.", "Do not start the reconciliation before the 06:45 drop."),
        (
            "Console access for row 7 is through ts-row07 (ports from 2001).",
            "Locked out? Use ts-row07 and the rack's port.",
        ),
    ],
)
def test_two_entries_about_one_specific_path_address_range_host_or_time_are_one_entry(a, b):
    assert ag.entries_alike(*_pair(a, b))


@pytest.mark.parametrize(
    "a, b",
    [
        # one version, many facts
        ("Node 20.11 is the runtime of the web app.", "Pin the CI image to 20.11 for reproducible layers."),
        # the same path with different numbers: different facts
        ("Backups under /mnt/backup keep 7 days.", "Backups under /mnt/backup keep 30 days."),
        # the same range, another one beside it
        ("Loopbacks come from 10.255.0.0/24.", "Transit links come from 10.254.0.0/24 and 10.255.0.0/24."),
        # the same path and another one beside it
        ("Nightly exports land in /data/exports.", "Copy /data/exports to /mnt/archive/exports every Friday."),
    ],
)
def test_entries_sharing_a_version_or_naming_other_facts_beside_the_anchor_are_not(a, b):
    assert not ag.entries_alike(*_pair(a, b))


def _found(*steps) -> list[dict]:
    return [
        f for f in rules.analyze(session_doc("s", _calls(*steps))).findings if f["kind"] == "rediscovered_knowledge"
    ]


@pytest.mark.parametrize(
    "wrong, answer, output",
    [
        (
            ("kubectl get configmap payments-cfg -n prod", "Error from server (NotFound): configmaps not found"),
            "kubectl get configmaps -n prod | grep pay",
            "payments-config-v2   4   12d",
        ),
        (
            ("gh secret list --repo acme/web", "no secrets found"),
            "gh secret list --org acme",
            "DEPLOY_KEY  Updated 2026-10-01",
        ),
        (
            ('zowe zos-files list all-members "PROD.JCL" --pattern "PAY*"', "No members found matching PAY*"),
            'zowe zos-files view data-set "SYS3.PAY.JCLLIB(PAYROLL)"',
            "//PAYROLL JOB (ACCT),'PAY RUN'",
        ),
    ],
)
def test_a_store_asked_for_a_name_it_does_not_hold_found_nothing_and_the_next_look_is_the_answer(wrong, answer, output):
    found = _found(
        ("search", {"query": "payments config"}, "No matches found.", False),
        ("bash", {"command": wrong[0]}, wrong[1], False),
        ("bash", {"command": answer}, output, False),
    )
    assert [f["location"] for f in found] == [answer], found
    assert wrong[0] not in {f["location"] for f in found}


@pytest.mark.parametrize(
    "content, old, new, swap",
    [
        (
            "Roll back with `helm rollback api <revision> -n prod`.",
            "helm rollback api 41 -n prod",
            "helm rollback api 41 -n prod --wait",
            ("helm rollback api <revision> -n prod", "helm rollback api <revision> -n prod --wait"),
        ),
        (
            "Promote a build: deployctl promote --env {env} --build {build}.",
            "deployctl promote --env staging --build 8812",
            "deployctl release promote --to staging --build 8812",
            ("deployctl promote --env {env} --build {build}", "deployctl release promote --to {env} --build {build}"),
        ),
        (
            "Rebuild the partition with `dbt run-operation rebuild --args DATE` when a load fails.",
            "dbt run-operation rebuild --args 2026-11-02",
            "dbt run-operation rebuild_partition --args 2026-11-02",
            ("dbt run-operation rebuild --args DATE", "dbt run-operation rebuild_partition --args DATE"),
        ),
    ],
)
def test_an_entry_writing_the_failing_command_with_placeholders_is_stale(content, old, new, swap):
    index = ag.MemoryIndex([{"key": "k", "content": content}])
    hit = ag._template_stale({"old": old, "new": new}, index, None)
    assert hit is not None and hit[0].key == "k"
    assert hit[1] == swap


@pytest.mark.parametrize(
    "content",
    [
        "Roll back with `helm rollback web <revision> -n prod`.",  # another release
        "Roll back with `helm rollback api <revision> -n staging`.",  # another namespace
        "Use `helm history api` to find the revision.",  # names the tool, not the command
    ],
)
def test_a_template_of_another_command_is_not_stale(content):
    index = ag.MemoryIndex([{"key": "k", "content": content}])
    assert (
        ag._template_stale(
            {"old": "helm rollback api 41 -n prod", "new": "helm rollback api 41 -n prod --wait"}, index, None
        )
        is None
    )


# Blind scenarios 18 and 19 (a Flutter team, a .NET/Azure Functions team, a ROS 2 team, an accounting close desk).


@pytest.mark.parametrize(
    "text",
    [
        "For this invoice only, pay it without the match.",
        "For that shipment only: waive the customs hold.",
        "Just this one: skip the approval step.",
        "Skip the reconciliation, but never as a default.",
        "Solo esta nómina sin doble firma.",
    ],
)
def test_one_thing_named_this_with_only_is_a_one_off(text):
    assert rules.ONE_OFF.search(text), text


@pytest.mark.parametrize(
    "text",
    ["Use pnpm for this repo only.", "For this service only, deploy with Helm.", "For this cluster only: use Calico."],
)
def test_a_standing_scope_named_this_with_only_is_a_rule(text):
    assert not rules.ONE_OFF.search(text), text


@pytest.mark.parametrize(
    "wrong, answer, output, expected",
    [
        (
            ("search", {"query": "android app id"}, "No matches found."),
            ("bash", {"command": "firebase apps:list ANDROID --project shop-prod"}),
            "| Shop Android | 1:99:android:ab12cd34 | ANDROID |\n| Shop Staging | 1:99:android:ef56ab78 | ANDROID |",
            "1:99:android:ab12cd34",
        ),
        (
            ("read_file", {"path": "config/settings.local.json"}, "Error: No such file or directory"),
            ("bash", {"command": "az webapp config appsettings list -g rg-shop -n shop-api --query [].name -o tsv"}),
            "APPINSIGHTS_KEY\nPAYMENTS_QUEUE__namespace\nWEBSITE_RUN_FROM_PACKAGE",
            "PAYMENTS_QUEUE__namespace",
        ),
        (
            ("ledger_query", {"query": "accounts name='clearing account'"}, "No accounts found matching 'clearing'."),
            ("ledger_query", {"query": "accounts class=29 list"}),
            "2900 Accrued wages\n2950 Clearing - unmatched payments\n2 accounts.",
            "2950",
        ),
    ],
)
def test_a_listing_after_a_miss_is_where_the_answer_is_and_says_it(wrong, answer, output, expected):
    found = _found(
        (wrong[0], wrong[1], wrong[2], False),
        (answer[0], answer[1], output, False),
    )
    assert len(found) == 1 and expected in found[0]["summary"], found


def test_a_preference_swap_in_an_entry_that_holds_the_old_command_replaces_the_command():
    memory = [{"key": "release", "content": "Release builds: `gradle assembleRelease -PsplitAbi` for the store."}]
    old, new = "gradle assembleRelease -PsplitAbi", "gradle bundleRelease"
    finding = {
        "kind": "correction",
        "old": old,
        "new": new,
        "said_old": ["-PsplitAbi"],
        "said_new": ["bundleRelease"],
        "summary": f"Run `{new}` instead of `{old}`",
    }
    sessions = [
        ag.SessionFindings(i, f"s{i}", "release", None, [dict(finding, key="pref:-PsplitAbi=>bundleRelease")])
        for i in range(4)
    ]
    result = ag.aggregate(sessions, sessions_analysed=4, memory=memory, min_sessions=3)
    updates = [d for d in result.proposals if d.operation == "update"]
    assert updates and "`gradle bundleRelease`" in updates[0].content, [d.content for d in result.proposals]
    assert "assembleRelease bundleRelease" not in updates[0].content
