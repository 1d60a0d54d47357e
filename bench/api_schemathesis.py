#!/usr/bin/env python
"""Bench: schemathesis with every check on (`--checks all`) against a real server, and its figures.

    .venv/bin/python bench/api_schemathesis.py [--max-examples 50] [--seed 1] [--port 8871] [--write-docs]
    .venv/bin/python bench/api_schemathesis.py --from-report [--report-dir DIR] [--write-docs]  (the last report)

Creates a scratch PostgreSQL database (owner role; dropped at the end), seeds a small team (a store agents may write,
entries, a skill, sessions, a dream run and a proposal; a second team for the authorization check), starts gunicorn
on 127.0.0.1 as the application role with DEBUG off (row-level security in force, as in production), and runs the
schemathesis CLI over the schema the server serves at /api/schema/: every phase (examples, coverage, fuzzing,
stateful) and every check, with an API key that has every scope. Path parameters are pointed at the seeded objects
(store `eng`, entry `deploy-command`, skill `release`, the run and proposal ids) so that the success paths are
exercised, not only 404s. Prints the cases and the failures by check (and writes them into docs/api.md with
--write-docs); the full report is in --report-dir (JSON, and a pytest file reproducing each failure).

Environment: DATABASE_URL (app role) and DATABASE_OWNER_URL (owner role) of the PostgreSQL server.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
from _scratch import ScratchDatabase

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Schemathesis, every check (`bench/api_schemathesis.py`)"


def seed(db: ScratchDatabase) -> dict:
    """The data the run aims at; returns the raw key and the ids of the seeded objects."""
    os.environ["DATABASE_URL"] = db.app_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from dreamweb import rls
    from dreamweb.models import AgentKey, Scope
    from dreamweb.provenance import Author
    from dreamweb.services import create_team
    from memory.models import AgentSession, MemoryStore
    from memory.services import create_entry
    from reviews.models import DreamRun, Proposal, ProposalEvidence
    from skills_registry.services import create_skill

    # The app role sees no other team: each team is written inside its own scope.
    team, _ = create_team("st", "Schemathesis")
    other, _ = create_team("st-other", "Another team")
    with rls.team_scope(other):
        MemoryStore.objects.create(team=other, slug="ops", agents_may_write=True)
        scopes = [s.value for s in Scope]
        _, other_raw = AgentKey.generate(team=other, name="other", scopes=scopes, writable_stores=["*"])
    with rls.team_scope(team):
        store = MemoryStore.objects.create(team=team, slug="eng", agents_may_write=True)
        create_entry(store, key="deploy-command", content="Deploy with `make release`.", author=Author.system())
        create_entry(store, key="tests", content="Run `make test` before pushing.", author=Author.system())
        create_skill(team, name="release", description="How to release.", body="# Release\n", author=Author.system())
        events = [{"type": "message", "role": "user", "content": "hi"}]
        session = AgentSession.objects.create(team=team, external_id="seed-1", agent="deploy-bot", events=events)
        run = DreamRun.objects.create(team=team, store=store, status="succeeded")
        proposal = Proposal.objects.create(
            team=team, store=store, run=run, operation="add", content="Tag first.", signature="s1"
        )
        ProposalEvidence.objects.create(team=team, proposal=proposal, session=session, event_index=0, excerpt="hi")
        _, raw = AgentKey.generate(team=team, name="schemathesis", scopes=scopes, writable_stores=["*"])
    from django.db import connections

    connections.close_all()
    return {"key": raw, "other_key": other_raw, "run": run.pk, "proposal": proposal.pk}


def start_server(db: ScratchDatabase, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": db.app_url,
        "DEBUG": "0",
        "DREAMWEB_API_KEY_RATE": "100000000/min",
        "REDIS_URL": "",  # a dream started by the run runs in the server process, on the scratch database
    }
    cmd = [str(ROOT / ".venv" / "bin" / "gunicorn"), "dreamweb.wsgi:application", "-w", "2", "-b", f"127.0.0.1:{port}"]
    proc = subprocess.Popen([*cmd, "--log-level", "warning", "--timeout", "120"], cwd=ROOT, env=env)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("gunicorn did not start")


def config_file(path: Path, ids: dict) -> None:
    """The project's schemathesis.toml (the answers it adds to what the checks expect, and why), plus path parameters
    aimed at the seeded objects."""
    path.write_text(
        (ROOT / "schemathesis.toml").read_text()
        + textwrap.dedent(
            f"""
            [parameters]
            slug = "eng"
            key = "deploy-command"
            name = "release"

            [[operations]]
            include-path-regex = "^/api/v1/proposals/"
            parameters = {{ id = {ids["proposal"]} }}

            [[operations]]
            include-path-regex = "^/api/v1/dream-runs/"
            parameters = {{ id = {ids["run"]} }}
            """
        )
    )


def auth_file(path: Path, ids: dict) -> None:
    """Web Fuzzing Commons auth: the key of the seeded team and a key of another team, so that the
    object_level_authorization check replays each read of team A's objects with team B's key."""
    path.write_text(
        json.dumps(
            {
                "auth": [
                    {"name": "team-st", "fixedHeaders": [{"name": "Authorization", "value": f"Api-Key {ids['key']}"}]},
                    {
                        "name": "team-other",
                        "fixedHeaders": [{"name": "Authorization", "value": f"Api-Key {ids['other_key']}"}],
                    },
                ]
            }
        )
    )


def run_schemathesis(args, ids: dict, report_dir: Path) -> int:
    report_dir.mkdir(parents=True, exist_ok=True)
    config = report_dir / "schemathesis.toml"
    config_file(config, ids)
    auth = report_dir / "auth.json"
    auth_file(auth, ids)
    cmd = [
        str(ROOT / ".venv" / "bin" / "schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"http://127.0.0.1:{args.port}/api/schema/",
        "--checks",
        "all",
        "--auth-wfc",
        str(auth),
        "--max-examples",
        str(args.max_examples),
        "--seed",
        str(args.seed),
        "--workers",
        "1",
        "--continue-on-failure",
        "--report",
        "json,ndjson,pytest",
        "--report-dir",
        str(report_dir),
        "--generation-database",
        "none",
        "--no-color",
    ]
    return subprocess.run(cmd, cwd=ROOT, check=False).returncode


# The check behind each failure type of the JSON report (schemathesis names failures by type and code).
CHECK_OF = {
    "ServerError": "not_a_server_error",
    "UndefinedStatusCode": "status_code_conformance",
    "UndefinedContentType": "content_type_conformance",
    "MalformedMediaType": "content_type_conformance",
    "MissingContentType": "content_type_conformance",
    "MissingHeaders": "response_headers_conformance",
    "JsonSchemaError": "response_schema_conformance",
    "AcceptedNegativeData": "negative_data_rejection",
    "RejectedPositiveData": "positive_data_acceptance",
    "MissingHeaderNotRejected": "missing_required_header",
    "UnsupportedMethodResponse": "unsupported_method",
    "AllowHeaderMismatch": "allow_header_conformance",
    "UseAfterFree": "use_after_free",
    "EnsureResourceAvailability": "ensure_resource_availability",
    "IgnoredAuth": "ignored_auth",
}


def figures(report_dir: Path) -> dict:
    """Cases, operations, phases and failures by check, from the run's JSON report."""
    report = json.loads(max(report_dir.glob("json-*.json")).read_text())
    failures: dict[str, dict] = {}
    for failure in report["failures"]:
        check = CHECK_OF.get(failure["type"], failure["type"])
        entry = failures.setdefault(check, {"count": 0, "operations": set(), "titles": set()})
        entry["count"] += failure["count"]
        entry["operations"].update(failure["operations"])
        entry["titles"].add(f"{failure['code']} {failure['title']}")
    command = report["command"].split()
    return {
        "version": report["schemathesis_version"],
        "seed": report["seed"],
        "max_examples": command[command.index("--max-examples") + 1],
        "seconds": report["running_time"],
        "date": report["started_at"][:10],
        "cases": report["test_cases"]["generated"],
        "failing_cases": report["test_cases"]["with_failures"],
        "operations": report["operations"]["tested"],
        "phases": {name: p["status"] for name, p in report["phases"].items()},
        "errors": len(report["errors"]),
        "failures": failures,
    }


def write_docs(result: dict, args) -> None:
    docs = ROOT / "docs" / "api.md"
    failures = result["failures"]
    phases = ", ".join(f"{name} {status}" for name, status in result["phases"].items())
    lines = [
        SECTION,
        "",
        f"`bench/api_schemathesis.py` runs the schemathesis CLI ({result['version']}) with `--checks all` and every "
        f"phase against gunicorn on PostgreSQL as the application role, DEBUG off, with the key of a team that has "
        f"every scope (and another team's key for `object_level_authorization`), path parameters aimed at seeded "
        f"objects, at most {result['max_examples']} generated cases per operation, seed {result['seed']}. The check "
        f"configuration is `schemathesis.toml`, which says why it adds 412, 428 and 413 to the expected answers. "
        f"Measured {result['date']}: {result['cases']:,} cases over {result['operations']} operations in "
        f"{result['seconds']:.0f} s on a 2-core machine shared with other test runs ({phases}); "
        f"{result['errors']} errors.",
        "",
        f"| check | distinct failures ({result['failing_cases']} failing cases in all) | operations |",
        "|---|---|---|",
    ]
    for name in result["checks"]:
        found = failures.get(name)
        where = ", ".join(f"`{op}`" for op in sorted(found["operations"])) if found else ""
        lines.append(f"| `{name}` | {found['count'] if found else 0} | {where} |")
    lines += ["", KNOWN]
    text = docs.read_text()
    section = "\n".join(line if line.startswith("|") else textwrap.fill(line, 120) for line in lines) + "\n"
    if SECTION in text:
        head, rest = text.split(SECTION, 1)
        nxt = rest.find("\n## ")
        text = head + section + ("\n" + rest[nxt + 1 :] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    docs.write_text(text)
    print(f"wrote {docs.relative_to(ROOT)}")


# What the figures hold that is not a defect, said with them in the docs.
KNOWN = (
    "No status code or content type is undocumented (`status_code_conformance`, `content_type_conformance`), no "
    "response leaves its schema and no request gets a 5xx. What `positive_data_acceptance` and "
    "`negative_data_rejection` find on `POST /api/v1/sessions/` are transcript files: with `?format=` a JSON body is "
    "a file of that format, not the canonical session the JSON body's schema describes, and a file body "
    "(`application/x-ndjson`, `application/octet-stream`) is described only as bytes, so any bytes fit the schema "
    "and a file in no known format is refused (400). OpenAPI cannot tie a body's shape to a query parameter; the "
    "in-suite run (`tests/test_api_schemathesis.py`, every check, 25 cases an operation) skips those cases and "
    "`tests/test_api_session_files.py` tests file bodies."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=8871)
    parser.add_argument("--db", default="dreamweb_bench_schemathesis")
    parser.add_argument("--report-dir", type=Path, default=Path("/tmp/dreamweb-schemathesis"))
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument(
        "--from-report",
        action="store_true",
        help="Read the last report in --report-dir.",
    )
    args = parser.parse_args()

    code = None
    if not args.from_report:
        db = ScratchDatabase(args.db).create()
        server = None
        try:
            ids = seed(db)
            server = start_server(db, args.port)
            code = run_schemathesis(args, ids, args.report_dir)
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=30)
            db.drop()
    result = figures(args.report_dir)
    from schemathesis.checks import CHECKS, load_all_checks

    load_all_checks()
    result["checks"] = [c.__name__ for c in CHECKS.get_all()]
    print(
        f"schemathesis exit {code}; {result['cases']} cases, {result['operations']} operations, "
        f"{result['seconds']:.0f} s"
    )
    for name in result["checks"]:
        found = result["failures"].get(name)
        print(f"  {name}: {found['count'] if found else 0}")
        for op in sorted(found["operations"]) if found else ():
            print(f"      {op}")
    if args.write_docs:
        write_docs(result, args)


if __name__ == "__main__":
    main()
