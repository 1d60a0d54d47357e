"""bench/api_context.py's load generator: its own garbage collector never runs inside a measured phase (a full pass
stops every client thread at once, and the pause was counted as the server's latency), and it says how late it sent."""

from __future__ import annotations

import gc
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.bench_support import load_bench


class _Ok(BaseHTTPRequestHandler):
    ids: list[str] = []

    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.ids.append(self.headers.get("X-Bench-Id"))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Ok.ids = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("rate", [None, 400.0])
def test_the_load_generator_does_not_collect_during_a_phase(server, rate):
    bench = load_bench("api_context.py")
    passes_in_phase = []

    def on_gc(phase, info):
        # A pass started by a client thread is one inside the phase (the collection before it, and the one that may
        # follow it, run in this thread).
        if phase == "start" and threading.current_thread() is not threading.main_thread():
            passes_in_phase.append(info["generation"])

    def make_request(rng):
        for _ in range(200):  # reference cycles: enough to start several collections if the collector ran
            a: list = []
            a.append(a)
        return "GET", "/", {}

    gc.callbacks.append(on_gc)
    try:
        result = bench.load(server, {}, make_request, 60, 3, rate=rate)
    finally:
        gc.callbacks.remove(on_gc)
    assert result["requests"] == 60 and result["errors"] == 0
    assert passes_in_phase == []
    assert gc.isenabled()  # given back once the phase is over
    assert ("late_p99_ms" in result) == (rate is not None)


def test_a_traced_phase_splits_each_requests_latency(server, tmp_path):
    bench = load_bench("api_context.py")
    result = bench.load(server, {}, lambda rng: ("GET", "/", {}), 40, 4, rate=400.0, trace=(str(tmp_path), "ping@400"))
    assert result["requests"] == 40
    assert sorted(_Ok.ids) == sorted(f"ping@400-{i}" for i in range(40))  # every request named
    # What bench/gunicorn_trace.py writes for each: id, start, wall, CPU, SQL, GC ms, generations, request number.
    sent = {c["id"]: c["sent"] for c in map(json.loads, (tmp_path / "client.jsonl").read_text().splitlines())}
    lines = [f"{i} {t + 0.002:.6f} 3.0 1.0 0.5 0.0 {'2' if i.endswith('-7') else '-'} 1" for i, t in sent.items()]
    (tmp_path / "server-1.log").write_text("\n".join([*lines, "- 0 1 1 0 0 - 1"]) + "\n")
    split = bench.trace_split(str(tmp_path))["ping@400"]
    assert split["requests"] == 40 and split["gc_passes_2"] == 1
    assert split["server_wall"] == 3.0 and split["server_cpu"] == 1.0 and split["server_sql"] == 0.5
    assert split["queue"] == pytest.approx(2.0, abs=0.1)
    assert 0 <= split["late"] <= split["latency"]
