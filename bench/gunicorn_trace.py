"""gunicorn hooks for ``bench/api_context.py --trace DIR``: one line per request in DIR/server-<pid>.log, so that a
request's latency seen by the load generator splits into the generator's lateness, the wait for a worker, and the
worker's own time (wall, CPU, SQL, garbage collection). Joined to the client's records by the X-Bench-Id header.

Line: id, start (epoch s), wall ms, CPU ms (the worker process), SQL ms (statements, commit excluded), GC ms, the GC
generations that ran ("-" for none), the worker's request number.
"""

import gc
import os
import time

_state = {"n": 0, "gc_ms": 0.0, "gens": [], "sql_ms": 0.0, "gc_started": 0.0}
_log = None


def _on_gc(phase, info):
    if phase == "start":
        _state["gc_started"] = time.perf_counter()
    else:
        _state["gc_ms"] += (time.perf_counter() - _state["gc_started"]) * 1000
        _state["gens"].append(str(info["generation"]))


def _timed_sql(execute, sql, params, many, context):
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        _state["sql_ms"] += (time.perf_counter() - started) * 1000


def _on_connection(sender, connection, **kwargs):
    connection.execute_wrappers.append(_timed_sql)


def post_fork(server, worker):
    global _log
    _log = open(os.path.join(os.environ["BENCH_TRACE_DIR"], f"server-{os.getpid()}.log"), "a", buffering=1)  # noqa: SIM115
    gc.callbacks.append(_on_gc)
    # Before the application is loaded in this worker, so that its first connection is timed too.
    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection)


def pre_request(worker, req):
    _state.update(n=_state["n"] + 1, gc_ms=0.0, gens=[], sql_ms=0.0)
    _state["id"] = next((v for k, v in req.headers if k == "X-BENCH-ID"), "-")
    _state["t0"] = (time.time(), time.perf_counter(), time.process_time())


def post_request(worker, req, environ, resp):
    wall0, perf0, cpu0 = _state["t0"]
    _log.write(
        f"{_state['id']} {wall0:.6f} {(time.perf_counter() - perf0) * 1000:.3f}"
        f" {(time.process_time() - cpu0) * 1000:.3f} {_state['sql_ms']:.3f} {_state['gc_ms']:.3f}"
        f" {''.join(_state['gens']) or '-'} {_state['n']}\n"
    )
