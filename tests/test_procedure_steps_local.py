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
