"""A procedure's steps are written as the project sees them (normalize.localizer): paths under the session's
checkout relative to it, other home directories as `~`, the account name never left in: a skill drafted from them
names no person's home or user name."""

from __future__ import annotations

import pytest

from reviews.analysis.procedures import procedure_steps


def call(i, command):
    return [
        {"type": "tool_call", "id": f"c{i}", "name": "bash", "arguments": {"command": command}},
        {"type": "tool_result", "call_id": f"c{i}", "content": "ok", "exit_code": 0},
    ]


@pytest.mark.parametrize(
    "cwd, command, expected",
    [
        ("/home/dana/src/infra", "cp /home/dana/certs/fullchain.pem live/", "cp ~/certs/fullchain.pem live/"),
        ("/Users/ana.lopez/work/app", "/Users/ana.lopez/work/app/scripts/rotate.sh", "scripts/rotate.sh"),
        ("/home/dana/src/infra", "chown dana:dana live/cert.pem", "chown <user>:<user> live/cert.pem"),
        ("C:\\Users\\kim\\repo", "copy C:\\Users\\kim\\keys\\a.pem certs", "copy ~\\keys\\a.pem certs"),
    ],
)
def test_steps_name_no_home_or_account(cwd, command, expected):
    (step,) = procedure_steps(call(0, command), {"cwd": cwd})
    assert step["text"] == expected


def test_without_metadata_other_homes_still_become_tilde():
    (step,) = procedure_steps(call(0, "cp /home/omar/.ssh/config backup/"))
    assert "/home/omar" not in step["text"] and "~/.ssh/config" in step["text"]


RUN = [
    "git fetch origin",
    "npm ci",
    "npm run build",
    "npm run lint",
    "npm test",
    "docker build -t app .",
    "docker push registry/app",
    "kubectl apply -f k8s/",
    "kubectl rollout status deploy/app",
    "helm upgrade app chart/",
    "terraform plan",
    "terraform apply -auto-approve",
]


def session_of(sid, commands):
    events = []
    for i, command in enumerate(commands):
        events += call(f"{sid}-{i}", command)
    return {"session_id": sid, "external_id": f"s-{sid}", "agent": "bot", "task": "t", "events": events}


def test_a_run_longer_than_the_longest_procedure_is_one_procedure_not_one_per_window():
    """12 steps repeated in 3 sessions: the first 8-step window is the procedure; the windows shifted by a step
    or more are the same run, not 4 more skills."""
    from reviews.analysis.procedures import MAX_STEPS, recurring_procedures

    found = recurring_procedures([session_of(i, RUN) for i in range(3)], min_sessions=3)
    # the first 8 steps, then the rest of the run where it no longer repeats one of them: never a shifted window
    assert [len(f["steps"]) for f in found] == [MAX_STEPS, 12 - MAX_STEPS], [f["texts"] for f in found]
    assert [f["texts"][0] for f in found] == ["git fetch origin", "kubectl rollout status deploy/app"]


def test_two_different_runs_of_the_same_sessions_stay_two():
    """Two runs the same sessions make, apart (other work between them, different in each session): two."""
    from reviews.analysis.procedures import recurring_procedures

    first, second = RUN[:4], RUN[8:]
    sessions = [
        session_of(
            i, [*first, *(["cargo build", "go vet ./...", "mvn -q verify"][(i + j) % 3] for j in range(i + 1)), *second]
        )
        for i in range(3)
    ]
    found = recurring_procedures(sessions, min_sessions=3)
    assert sorted(f["texts"][0] for f in found) == ["git fetch origin", "kubectl rollout status deploy/app"], [
        f["texts"] for f in found
    ]
    assert sorted(len(f["steps"]) for f in found) == [4, 4]
