"""One JSON answer of a given schema from any OpenAI-compatible server, whatever it supports.

Servers differ in the ``response_format`` they take (docs/llm-servers.md has the sources):

* OpenAI, vLLM, LM Studio, Ollama (0.5 and later) and llama.cpp's ``llama-server`` take ``json_schema`` (strict);
* llama-cpp-python's server knows only ``text`` and ``json_object`` (with a ``schema`` beside it, which it turns into
  a grammar) and refuses ``json_schema`` with HTTP 422; older ``llama-server`` builds refuse it with HTTP 500;
  LM Studio refuses ``json_object`` with HTTP 400; a gateway that cannot route the parameter answers 404;
* some accept any ``response_format`` and ignore it (older Ollama, some gateway upstreams): prose or fenced JSON.

So a request walks down three modes:

==============  =============================================================================================
``json_schema``  ``response_format`` json_schema, strict
``json_object``  ``response_format`` json_object with the schema beside it; the schema also in the prompt
``prompt``       no ``response_format``; the schema in the prompt
==============  =============================================================================================

A server that *refuses* a mode (an HTTP error that names the response format) or *ignores* it (an enforcing mode
answered with no JSON at all) is asked again one mode down, at once. What an endpoint takes is remembered per base
URL and model in Django's cache (DREAMWEB_LLM_FORMAT_TTL seconds, a day by default; the default cache is the
process's memory), so the next sessions of a run, and the next runs of that worker process, start at the mode that
worked; after the TTL the endpoint is asked for the best mode again (servers get upgraded). The same goes for the
name of the output-token limit: ``max_tokens``, or ``max_completion_tokens`` for the OpenAI models that refuse the
older name.

Every answer is parsed (JSON inside a code fence or after prose is accepted) and validated. An answer that is JSON
but invalid, or cut off at the token limit, gets exactly one repair request (the answer and what is wrong with it);
then the call fails with ``MalformedAnswer`` naming the reason. Tokens are counted over every request; a server that
reports no usage is counted by estimate (four characters a token) so that token budgets still hold.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger("reviews.dreams")

MODES = ("json_schema", "json_object", "prompt")
TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")
CHARS_PER_TOKEN = 4  # for a server that reports no usage
REPAIR_ECHO_CHARS = 4000  # how much of an unusable answer goes back with the repair request


class AnalyzerError(Exception):
    """A session could not be analysed; the message is saved on its SessionAnalysis, the tokens on the run."""

    tokens_input = 0
    tokens_output = 0


class MalformedAnswer(AnalyzerError):
    """The answer is not JSON of the schema (or the model refused, or it was cut off), even after one repair."""


class ContextTooLong(AnalyzerError):
    """The server says the request does not fit the model's context window."""


# --- what an endpoint takes -------------------------------------------------------------------------------------


@dataclass
class Endpoint:
    mode: str = MODES[0]
    tokens_param: str = TOKEN_PARAMS[0]


def _cache_key(base_url: str, model: str) -> str:
    digest = hashlib.sha256(f"{base_url.rstrip('/')}|{model}".encode()).hexdigest()[:32]
    return f"dreamweb:llm-endpoint:{digest}"


def known(base_url: str, model: str) -> Endpoint:
    """What this endpoint was last seen to take (the best mode when nothing is known)."""
    raw = cache.get(_cache_key(base_url, model)) or {}
    mode = raw.get("mode") if raw.get("mode") in MODES else MODES[0]
    param = raw.get("tokens_param") if raw.get("tokens_param") in TOKEN_PARAMS else TOKEN_PARAMS[0]
    return Endpoint(mode, param)


def remember(base_url: str, model: str, endpoint: Endpoint) -> None:
    ttl = int(getattr(settings, "DREAMWEB_LLM_FORMAT_TTL", 86400))
    cache.set(_cache_key(base_url, model), {"mode": endpoint.mode, "tokens_param": endpoint.tokens_param}, ttl)


def forget(base_url: str, model: str) -> None:
    cache.delete(_cache_key(base_url, model))


# --- reading errors ---------------------------------------------------------------------------------------------

# An error that names the response format: the server or gateway does not take this mode.
_FORMAT_WORDS = re.compile(
    r"response_format|response format|json_schema|json_object|structured[ _]outputs?|requested parameters|grammar",
    re.I,
)
_CONTEXT_WORDS = re.compile(
    r"context[ _](?:length|window|size)|maximum context|too many tokens|exceeds? (?:the )?(?:context|max)|"
    r"prompt is too long|n_ctx",
    re.I,
)


def _error_text(exc) -> str:
    body = getattr(exc, "body", None)
    try:
        text = json.dumps(body) if body is not None else ""
    except (TypeError, ValueError):
        text = str(body)
    return f"{exc} {text}"


def refuses_format(exc) -> bool:
    return getattr(exc, "status_code", 0) in (400, 404, 415, 422, 500, 501) and bool(
        _FORMAT_WORDS.search(_error_text(exc))
    )


def refuses_tokens_param(exc, param: str) -> bool:
    if getattr(exc, "status_code", 0) not in (400, 422):
        return False
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and body.get("param") == param:
        return True
    refused = rf"(?:unsupported|unrecognized|unknown|not supported)[^.]{{0,40}}'?{param}\b"
    return bool(re.search(refused, str(exc), re.I))


def context_too_long(exc) -> bool:
    return getattr(exc, "status_code", 0) in (400, 413, 422, 500) and bool(_CONTEXT_WORDS.search(_error_text(exc)))


# --- reading answers --------------------------------------------------------------------------------------------


class NoJSON(ValueError):
    pass


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def parse_json(content: str):
    """The JSON value of an answer: the whole text, else a fenced block, else the first object in it."""
    text = (content or "").strip()
    if not text:
        raise NoJSON("the answer is empty")
    # strict=False: a raw newline or tab inside a string is read as itself (llama-cpp-python's JSON grammar lets a
    # model write them).
    try:
        return json.loads(text, strict=False)
    except ValueError as exc:
        first_error = exc
    for block in _FENCE.findall(text):
        try:
            return json.loads(block.strip(), strict=False)
        except ValueError:
            continue
    decoder = json.JSONDecoder(strict=False)
    for m in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    if "{" in text:
        raise ValueError(f"the answer is not JSON: {first_error}")
    raise NoJSON("the answer holds no JSON")


@dataclass
class Usage:
    input: int = 0
    output: int = 0
    estimated: bool = False
    requests: int = 0

    def add(self, response, messages: list[dict], content: str) -> None:
        self.requests += 1
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if prompt is None or completion is None:
            self.estimated = True
        if prompt is None:
            prompt = math.ceil(sum(len(str(m.get("content") or "")) for m in messages) / CHARS_PER_TOKEN)
        if completion is None:
            completion = math.ceil(len(content or "") / CHARS_PER_TOKEN)
        self.input += int(prompt)
        self.output += int(completion)


@dataclass
class Answer:
    value: object
    mode: str
    usage: Usage
    notes: list[str] = field(default_factory=list)


def _create_within(client, **kwargs):
    """client.chat.completions.create, whole within the client's timeout (DREAMWEB_LLM_TIMEOUT, "seconds a request
    may take"): the SDK's timeout bounds each read, and a server trickling its body a byte at a time never trips it.
    Past the limit the client is closed, which ends the read it is blocked in, and the SDK's own timeout error is
    raised (the analyzer makes a new client for the next request: OpenAIAnalyzer.client)."""
    import httpx
    import openai

    limit = getattr(client, "timeout", None)
    limit = limit if isinstance(limit, int | float) and limit > 0 else None
    if limit is None:
        return client.chat.completions.create(**kwargs)
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        client.close()

    timer = threading.Timer(limit, stop)
    timer.daemon = True
    timer.start()
    try:
        return client.chat.completions.create(**kwargs)
    except Exception as exc:
        if fired.is_set():
            url = f"{str(client.base_url).rstrip('/')}/chat/completions"
            raise openai.APITimeoutError(request=httpx.Request("POST", url)) from exc
        raise
    finally:
        timer.cancel()


def _fail(error: AnalyzerError, usage: Usage) -> AnalyzerError:
    error.tokens_input, error.tokens_output = usage.input, usage.output
    return error


# --- the request ------------------------------------------------------------------------------------------------


def schema_instructions(schema: dict) -> str:
    return (
        "Answer with exactly one JSON object and nothing else: no prose before or after it, no code fence. "
        "It must match this JSON Schema:\n" + json.dumps(schema, separators=(",", ":"))
    )


def _messages_for(mode: str, messages: list[dict], schema: dict) -> list[dict]:
    """The schema goes into the system message where the server does not enforce it itself."""
    if mode == "json_schema":
        return messages
    out = [dict(m) for m in messages]
    system = next((m for m in out if m.get("role") == "system"), None)
    if system is None:
        out.insert(0, {"role": "system", "content": schema_instructions(schema)})
    else:
        system["content"] = f"{system['content']}\n\n{schema_instructions(schema)}"
    return out


def _response_format(mode: str, name: str, schema: dict, grammar_schema: dict | None) -> dict | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
    if mode == "json_object":
        # `schema` beside the type is llama-cpp-python's form (a grammar); servers that do not know it ignore it.
        return {"type": "json_object", "schema": grammar_schema or schema}
    return None


def _repair_request(problem: str, cut_off: bool) -> str:
    if cut_off:
        return (
            "Your answer was cut off at the output token limit. Answer again, shorter: at most 3 findings, "
            "one-sentence summaries, short excerpts. Only the JSON object."
        )
    return f"That answer cannot be used: {problem}. Answer again with only the JSON object, exactly as the schema says."


def complete_json(
    client,
    *,
    model: str,
    messages: list[dict],
    schema: dict,
    name: str,
    validate: Callable[[object], object],
    max_tokens: int,
    grammar_schema: dict | None = None,
    extra: dict | None = None,
) -> Answer:
    """Ask for one JSON answer matching ``schema`` (see the module's docstring for the protocol); ``validate``
    raises MalformedAnswer for a value it cannot use. Transport errors (rate limit, timeout, connection) propagate
    as the SDK raises them; ContextTooLong when the server says the prompt does not fit."""
    import openai

    base_url = str(client.base_url)
    endpoint = known(base_url, model)
    start = endpoint.mode
    usage = Usage()
    notes: list[str] = []
    convo = list(messages)
    repaired = switched_param = False
    while True:
        mode = endpoint.mode
        kwargs = {endpoint.tokens_param: max_tokens, **(extra or {})}
        fmt = _response_format(mode, name, schema, grammar_schema)
        if fmt is not None:
            kwargs["response_format"] = fmt
        sent = _messages_for(mode, convo, schema)
        try:
            response = _create_within(client, model=model, messages=sent, **kwargs)
        except openai.APIStatusError as exc:
            if not switched_param and refuses_tokens_param(exc, endpoint.tokens_param):
                switched_param = True
                endpoint.tokens_param = next(p for p in TOKEN_PARAMS if p != endpoint.tokens_param)
                remember(base_url, model, endpoint)
                continue
            if context_too_long(exc):
                error = ContextTooLong(f"the request does not fit the model's context: {exc}"[:500])
                raise _fail(error, usage) from exc
            if mode != MODES[-1] and refuses_format(exc):
                endpoint.mode = MODES[MODES.index(mode) + 1]
                notes.append(f"{mode} refused (HTTP {exc.status_code})")
                log.info("%s %s: %s refused (HTTP %s); using %s", base_url, model, mode, exc.status_code, endpoint.mode)
                remember(base_url, model, endpoint)
                continue
            raise
        content, finish, refusal = _read(response)
        usage.add(response, sent, content)
        if refusal:
            raise _fail(MalformedAnswer(f"the model refused: {refusal[:200]}"), usage)
        if finish == "content_filter":
            raise _fail(MalformedAnswer("the server's content filter withheld the answer"), usage)
        # Cut off only when the text stops short: llama.cpp's grammar lets a small model pad a complete answer with
        # whitespace up to the token limit, and that answer is whole ("length" with the JSON closed).
        cut_off = finish == "length" and not content.rstrip().endswith(("}", "```"))
        problem = "it was cut off at the output token limit" if cut_off else ""
        if not cut_off:
            try:
                value = parse_json(content)
            except NoJSON as exc:
                if mode != MODES[-1] and content.strip():
                    # An enforcing mode answered with no JSON at all: the server ignores response_format.
                    endpoint.mode = MODES[MODES.index(mode) + 1]
                    notes.append(f"{mode} ignored")
                    log.info("%s %s: %s ignored (no JSON); using %s", base_url, model, mode, endpoint.mode)
                    remember(base_url, model, endpoint)
                    convo = list(messages)
                    continue
                problem = str(exc)
            except ValueError as exc:
                problem = str(exc)
            else:
                try:
                    checked = validate(value)
                except MalformedAnswer as exc:
                    problem = str(exc)
                else:
                    if endpoint.mode != start:
                        remember(base_url, model, endpoint)
                    if usage.estimated:
                        notes.append("usage estimated")
                    return Answer(checked, mode, usage, notes)
        if repaired:
            raise _fail(MalformedAnswer(f"{problem} (also after a repair request)"), usage)
        repaired = True
        convo = [
            *messages,
            {"role": "assistant", "content": (content or "")[:REPAIR_ECHO_CHARS]},
            {"role": "user", "content": _repair_request(problem, cut_off)},
        ]


def _read(response) -> tuple[str, str | None, str | None]:
    """(content, finish_reason, refusal) of the first choice."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        return "", None, None
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None) or ""
    return str(content), getattr(choice, "finish_reason", None), getattr(message, "refusal", None)
