"""gunicorn hooks for bench/context_floor.py: a context request that carries ``X-Bench-Floor`` is served with part of
its work taken away, so that one run shows what each part costs and what context would cost without it:

- ``no_audit``: ranked and answered as usual, but no audit row is written and no entry marked served;
- ``fixed_body``: no ranking and nothing read beyond the key (not even the ranking's check, which the key's own
  statement otherwise reads): the worker answers, through the same view, the result it ranked for the first such
  request (a body of the same size and shape as a real one).

For measurement only: nothing here is loaded by the application. A sync worker serves one request at a time, so the
variant of the request in hand is a module global.
"""

_state = {"variant": "", "fixed": None}


def pre_request(worker, req):
    _state["variant"] = next((value for name, value in req.headers if name == "X-BENCH-FLOOR"), "")


def post_worker_init(worker):
    import memory.api.context as view
    import memory.context as context

    record_serve, build_context = context.record_serve, view.build_context
    check_with_key = view.ContextView.key_statement_extra

    def record_unless_floor(*args, **kwargs):
        return None if _state["variant"] in ("no_audit", "fixed_body") else record_serve(*args, **kwargs)

    def build_unless_fixed(*args, **kwargs):
        if _state["variant"] != "fixed_body":
            return build_context(*args, **kwargs)
        if _state["fixed"] is None:
            _state["fixed"] = build_context(*args, **kwargs)
        return _state["fixed"]

    def check_unless_fixed(self, request):
        # The first fixed_body request ranks for real (it makes the body), with its check.
        if _state["variant"] == "fixed_body" and _state["fixed"] is not None:
            return None
        return check_with_key(self, request)

    context.record_serve = record_unless_floor
    view.build_context = build_unless_fixed
    view.ContextView.key_statement_extra = check_unless_fixed
