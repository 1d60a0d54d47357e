"""Spellings of one fact read as one (reviews.analysis.normalize): a correction of a command whatever its operands,
times of day however written; and what must stay apart."""

from __future__ import annotations

import pytest

from reviews.analysis import normalize as nz
from reviews.analysis.tools import SHELL_TOOLS


@pytest.mark.parametrize(
    "old,new,edit",
    [
        ("docker-compose up -d redis", "docker compose up -d redis", ("docker-compose", "docker compose")),
        (
            "docker-compose -f dev.yml logs api",
            "docker compose -f dev.yml logs api",
            ("docker-compose", "docker compose"),
        ),
        ("pip install requests", "poetry add requests", ("pip install", "poetry add")),
        ("git push origin feat-123", "git push -u origin feat-123", ("git push", "git push -u")),
        ("pytest", "python -m pytest", ("pytest", "python -m pytest")),  # each side keeps a word
        ("make deploy", "make release", ("make deploy", "make release")),  # nothing shared at the end
        ("npm test", "npm run test", ("npm", "npm run")),
    ],
)
def test_a_correction_is_what_changed_without_the_operands_both_end_with(old, new, edit):
    assert nz.command_edit(old, new) == edit


def test_the_same_correction_on_other_operands_is_one_key():
    keys = {nz.command_edit(f"docker-compose up -d {s}", f"docker compose up -d {s}") for s in ("redis", "db", "minio")}
    assert len(keys) == 1


@pytest.mark.parametrize(
    "text,time",
    [
        ("cut at 15:00 CET", "15:00"),
        ("cut at 3pm CET", "15:00"),
        ("cut at 3 p.m.", "15:00"),
        ("cut at 3 PM", "15:00"),
        ("la release à 15h00", "15:00"),
        ("backups at 9:30am", "09:30"),
        ("backups at 09:30", "09:30"),
        ("restored at 12am", "00:00"),
        ("lunch at 12pm", "12:00"),
    ],
)
def test_a_time_of_day_is_one_anchor_however_written(text, time):
    assert time in nz.anchors(text)


@pytest.mark.parametrize("text", ["file.py:12:34: error", "ratio 3:2", "version 1.2:30", "took 24h"])
def test_what_only_looks_like_a_time_is_not_one(text):
    assert not any(":" in a and len(a) == 5 and a[2] == ":" for a in nz.anchors(text)), nz.anchors(text)


@pytest.mark.parametrize(
    "name",
    [
        "Bash",
        "shell",
        "exec_command",
        "run_terminal_cmd",
        "execute_command",
        "run_in_terminal",
        "shell_exec",
        "bash_run",
    ],
)
def test_other_agents_names_for_the_shell_are_the_shell(name):
    assert SHELL_TOOLS.match(name)


@pytest.mark.parametrize("name", ["read_file", "Read", "grep", "web_fetch", "edit_file", "terminal_title"])
def test_other_tools_are_not(name):
    assert not SHELL_TOOLS.match(name)


@pytest.mark.parametrize(
    "spelt",
    [
        "export APP_ENV=test && pytest -q",
        "export APP_ENV=test; pytest -q",
        "env APP_ENV=test pytest -q",
        "set APP_ENV=test && pytest -q",
        "APP_ENV=test pytest -q",
    ],
)
def test_a_variable_set_for_one_command_is_one_command_however_spelt(spelt):
    assert nz.normalize_command(spelt) == "app_env=test pytest -q"


def test_an_export_alone_is_not_rewritten():
    assert nz.normalize_command("export PATH") == "export path"


@pytest.mark.parametrize(
    ("flagged", "from_there"),
    [
        ("npm --prefix web test", "cd web && npm test"),
        ("npm --prefix=web run build", "cd web && npm run build"),
        ("yarn --cwd app run lint", "cd app && yarn run lint"),
        ("pnpm -C web test", "cd web && pnpm test"),
        ("pnpm --dir web install", "cd web && pnpm install"),
        ("make -C services/api build", "cd services/api && make build"),
        ("git -C vendor/lib status", "cd vendor/lib && git status"),
        ("go -C tools build ./...", "cd tools && go build ./..."),
        ("uv --directory backend run pytest", "cd backend && uv run pytest"),
        ("terraform -chdir=infra plan", "cd infra && terraform plan"),
        ("make lint && npm --prefix web test", "make lint && cd web && npm test"),
    ],
)
def test_a_tool_told_where_to_run_is_the_tool_run_from_there(flagged, from_there):
    assert nz.normalize_command(flagged) == nz.normalize_command(from_there)


@pytest.mark.parametrize(
    "command",
    [
        "git -c user.name=bot commit -m x",  # a setting, not a directory
        "ls -C src",  # not a tool that takes a directory this way
        "npm test --prefix web",  # the flag after the script goes to the script
        "tar -C out -xf a.tar",  # tar's -C is not in the list: left as written
    ],
)
def test_other_flags_are_left_as_they_are(command):
    assert not nz.normalize_command(command).startswith("cd ")
