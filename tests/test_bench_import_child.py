"""bench/import_child.py: the import benchmark's process times the command from inside, start-up excluded, and
leaves its output and exit status as they are."""

from __future__ import annotations

import json

import pytest

from tests.bench_support import load_bench
from tests.factories import TeamFactory
from tests.importer_support import jsonl


@pytest.mark.django_db
@pytest.mark.all_teams
def test_the_import_benchmark_times_the_command_from_inside(tmp_path, capsys):
    team = TeamFactory()
    path = tmp_path / "s.jsonl"
    path.write_bytes(jsonl({"external_id": "b-1", "agent": "a", "events": []}))
    times = tmp_path / "times.json"
    load_bench("import_child.py").run(str(times), ["import_sessions", str(path), "--team", team.slug])
    assert capsys.readouterr().out.strip() == "imported 1, unchanged 0, rejected 0"
    reported = json.loads(times.read_text())
    assert set(reported) == {"wall", "cpu", "workers_cpu"} and reported["wall"] > 0 and reported["cpu"] >= 0
    assert 0 <= reported["workers_cpu"] <= reported["cpu"]
