"""dreamweb-mcp reads a request whose JSON strings hold a lone surrogate (a client that cut an emoji in half) as the
same request with U+FFFD there, instead of dropping it unanswered; every other line passes untouched."""

from __future__ import annotations

import json

import pytest
from dreamweb_mcp.stdio import repair_line


@pytest.mark.parametrize(
    "escaped, expected",
    [
        (r"cut \ud83d x", "cut \ufffd x"),  # a high surrogate alone
        (r"cut \ude00 x", "cut \ufffd x"),  # a low one alone
        (r"\ude00\ud83d", "\ufffd\ufffd"),  # in the wrong order
        (r"whole \ud83d\ude00 emoji", "whole \U0001f600 emoji"),  # a pair is the character it encodes
        (r"end \uD83D", "end \ufffd"),  # upper-case hex
    ],
)
def test_lone_surrogates_become_replacement_characters(escaped, expected):
    line = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"content":"%s"}}}'
    repaired = json.loads(repair_line(line % escaped))
    assert repaired["params"]["arguments"]["content"] == expected
    assert repaired["id"] == 1 and repaired["method"] == "tools/call"
    repaired["params"]["arguments"]["content"].encode("utf-8")  # now encodable


def test_keys_and_nested_lists_are_repaired_too():
    line = r'{"a":[{"k\ud83d":["x\udc00",1,true,null]}]}'
    assert json.loads(repair_line(line)) == {"a": [{"k\ufffd": ["x\ufffd", 1, True, None]}]}


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n',
        '{"content":"emoji as is: \U0001f600"}\n',
        r'{"broken": "\ud83d' + "\n",  # not JSON: left for the SDK to refuse as it does
        "not json at all\n",
    ],
)
def test_other_lines_pass_untouched(line):
    assert repair_line(line) == line
