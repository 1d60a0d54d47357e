"""The import's fast paths give what the full paths give: each line parsed once, a converted session checked for what
its lines may hold (no less), the quick event check and the quick depth check agreeing with the full ones, cleaning
that copies only what it changes."""

from __future__ import annotations

import io
import itertools
import json

import pytest

from dreamweb import input_guard
from memory import importers
from memory.importers import Options, Source
from memory.importers.base import _clean_walk, clean_value
from memory.importing import validated
from memory.sessions import _check_event, _valid_event
from tests.importer_support import jsonl
from tests.test_importers_claude_code import SID, assistant, result, text, tool_use, user


def claude_file(*extra) -> bytes:
    lines = [user("Fix the build please.")]
    for n in range(6):
        lines += [assistant(f"m{n}", tool_use(f"c{n}", "Bash", command=f"make {n}")), result(f"c{n}", f"ok {n}")]
    lines += [assistant("m9", text("Done."))]
    return jsonl(*lines, *extra)


def items(data: bytes, format: str = "auto"):
    found, parsed = importers.read(Source(io.BytesIO(data), "test"), format, Options())
    return found, list(parsed)


def test_each_line_of_a_claude_code_file_is_parsed_once(monkeypatch):
    """Detection reads the first lines and every sniffer looks at them; the reader then gets those same values
    instead of parsing the lines again."""
    calls = []
    parse = input_guard.parse
    monkeypatch.setattr(input_guard, "parse", lambda text: calls.append(text) or parse(text))
    data = claude_file()
    found, parsed = items(data)
    assert found.name == "claude-code" and [p.doc["external_id"] for p in parsed] == [SID]
    assert len(calls) == len(data.splitlines()) == 14
    assert len(set(calls)) == len(calls)


def test_a_line_refused_in_the_head_is_reported_as_before():
    data = claude_file() + b'{"type": "user", oops\n'
    data = b"not json at all\n" + data
    _, parsed = items(data, "claude-code")
    notices = {p.where: p.notice for p in parsed if p.notice}
    assert set(notices) == {"line 1", "line 16"}
    assert notices["line 1"].startswith("skipped, not valid JSON")


def test_a_converted_session_carries_the_checks_its_lines_call_for():
    _, [clean] = items(claude_file())
    assert clean.hints == input_guard.Hints(strings=False, numbers=False, depth=True)
    _, [escaped] = items(claude_file(result("c0", "binary \\u0000 output")))
    assert escaped.hints.strings and not escaped.hints.numbers


@pytest.mark.parametrize(
    "extra, expected",
    [
        # The converter cleans the text it writes, not the model's name: the walk still finds the NUL there.
        (assistant("m8", text("hi"), model="claude\u0000x"), "model: must not contain NUL characters"),
        # Two objects glued on one line go to the standard parser, which reads NaN: still refused.
        (
            json.dumps(assistant("m8", tool_use("c8", "Bash", command="ls")))
            + json.dumps(assistant("m8b", tool_use("c9", "Bash", limit=float("nan")))),
            "must be a finite number",
        ),
    ],
)
def test_what_the_lines_may_hold_is_still_refused(extra, expected):
    _, parsed = items(claude_file(extra))
    [session] = [p for p in parsed if p.doc is not None]
    message = validated(session, "claude-code")
    assert isinstance(message, str) and expected in message, message


def _events():
    """Events of every known type with right and wrong values for each field, and unknown types."""
    ts_values = ["2026-01-05T10:00:00Z", "2026-01-05 10:00:00+02:00", "yesterday", 5, None, ...]
    kinds = {
        "message": {"role": ["user", "system", "robot", None, 3, ...], "content": ["hi", None, 5, ...]},
        "tool_call": {"id": ["c1", 1, ...], "name": ["Bash", None, ...], "arguments": [{}, "x", [1], 5, None, ...]},
        "tool_result": {
            "call_id": ["c1", 2, ...],
            "content": ["ok", {}, ...],
            "is_error": [True, False, "no", None, ...],
            "exit_code": [0, -1, None, True, "1", 2.0, ...],
        },
        "memory_write": {"content": ["note", None, ...], "store": [None, "team", 7, ...]},
        "custom": {},
    }
    for kind, fields in kinds.items():
        names = list(fields) + ["ts"]
        for values in itertools.product(*fields.values(), ts_values):
            ev = {"type": kind}
            ev.update({name: value for name, value in zip(names, values, strict=True) if value is not ...})
            yield ev
    for kind in ("", None, 7, ["message"]):
        yield {"type": kind, "content": "x"}
    yield {"content": "no type"}


def test_the_quick_event_check_agrees_with_the_full_one():
    seen = 0
    for ev in _events():
        errors: list[str] = []
        _check_event(0, ev, errors)
        assert _valid_event(ev) is (not errors), (ev, errors)
        seen += 1
    assert seen > 1000


def _nested(depth: int, width: int) -> object:
    value: object = 1
    for level in range(depth):
        value = {"k": value, "n": level} if level % 2 else [level, value, "x"]
    return [value] * width


@pytest.mark.parametrize("depth", [1, 2, 5, 6, 7, 12])
def test_the_quick_depth_check_finds_what_the_walk_finds(settings, depth):
    settings.DREAMWEB_MAX_JSON_DEPTH = 6
    value = {"events": _nested(depth, 3), "flat": [1, 2]}
    quick = input_guard.find_problem(value, input_guard.Hints(strings=False, numbers=False, depth=True))
    walked = input_guard.find_problem(value, input_guard.Hints(strings=True, numbers=False, depth=True))
    assert (quick and (quick.code, quick.path)) == (walked and (walked.code, walked.path))
    assert (quick is None) is (depth + 2 <= 6)


@pytest.mark.parametrize(
    "value",
    [
        {"command": "ls", "args": ["-l", {"deep": [1, 2.5, None, True]}]},
        {"text": "nul \u0000 here"},
        {"key \u0000": "value"},
        ["lone \ud800 surrogate"],
        {"big": 2**70, "s": "a\u0000"},
        "plain \u0000 string",
        42,
    ],
)
def test_clean_value_cleans_as_the_walk_does_and_copies_only_what_it_changes(value):
    cleaned = clean_value(value)
    assert cleaned == _clean_walk(value)
    if cleaned == value and isinstance(value, dict | list):
        assert cleaned is value  # nothing to clean: no copy
