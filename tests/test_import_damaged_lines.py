"""Lines a crash or another program leaves in a file (NUL padding, bytes that look like another encoding's marks)
are each one rejected line with its number; the valid lines around them are imported (contracts/README.md). The
standard JSON parser guesses UTF-16/32 from leading zero bytes, and the repair of bytes that are not UTF-8 must
never loop on text that is UTF-8 already."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory.models import AgentSession
from tests.scoping import all_teams

pytestmark = pytest.mark.django_db

DAMAGED = {
    "nul-padding": b"\x00" * 64,
    "nul-then-json": b"\x00\x00\x00" + b'{"external_id": "x"}',
    "json-then-nul": b'{"external_id": "y", "agent": "a", "events": []}' + b"\x00" * 8,
    "utf16-bom": b"\xff\xfe" + '{"a": 1}'.encode("utf-16-le"),
    "utf32-marks": b"\x00\x00\xfe\xff\x00\x00\x00{",
    "lone-continuation-bytes": b"\x80\x81\x82",
}


def _session(eid: str) -> bytes:
    doc = {"external_id": eid, "agent": "a", "events": [{"type": "message", "role": "user", "content": "hi"}]}
    return json.dumps(doc).encode()


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_a_damaged_line_is_one_rejected_line_and_the_rest_is_imported(world, tmp_path, name):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join([_session("before"), DAMAGED[name], _session("after")]) + b"\n")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises((SystemExit, CommandError)) as exit_:
        call_command("import_sessions", str(path), "--team", world.team_a.slug, stdout=out, stderr=err)
    assert getattr(exit_.value, "code", 1) == 1
    assert "imported 2, unchanged 0, rejected 1" in out.getvalue(), (out.getvalue(), err.getvalue())
    assert "line 2" in err.getvalue(), err.getvalue()
    with all_teams():
        assert set(AgentSession.objects.filter(team=world.team_a).values_list("external_id", flat=True)) == {
            "before",
            "after",
        }
