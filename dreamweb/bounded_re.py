"""Regular expressions with a time budget: the ``re`` names the screen uses, backed by the ``regex`` library, whose
searches take a timeout.

Why: the screen (dreamweb.screening) reads text an agent sends, and some of its line-wide patterns (`curl … | sh`)
cost time in the square of a line's length when the line repeats their first word (60 KB of `curl \\` continuations
took 11 s). No rewrite of one pattern bounds all of them, so every search made inside ``budget(seconds)`` shares one
deadline; past it a search raises ``OverBudget`` and the caller says the text could not be screened (it is refused,
never let through). Outside a budget the searches are unbounded, as ``re``'s are.

Only what the screen uses is here; ``regex`` reads the same syntax as ``re`` (its version 0 behaviour).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar

import regex

I = IGNORECASE = regex.IGNORECASE  # noqa: E741 - the name re gives it
M = MULTILINE = regex.MULTILINE
S = DOTALL = regex.DOTALL
X = VERBOSE = regex.VERBOSE
escape = regex.escape

_deadline: ContextVar[float | None] = ContextVar("bounded_re_deadline", default=None)


class OverBudget(TimeoutError):
    """The searches of one budget took longer than it allows."""


@contextmanager
def budget(seconds: float):
    """Every search in this block shares one deadline, ``seconds`` from now (a budget inside a budget keeps the
    nearer deadline)."""
    end = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _deadline.reset(token)


def _timeout() -> float | None:
    end = _deadline.get()
    if end is None:
        return None
    left = end - time.monotonic()
    if left <= 0:
        raise OverBudget("over the screening budget")
    return left


def _call(fn, *args, **kwargs):
    timeout = _timeout()
    try:
        return fn(*args, timeout=timeout, **kwargs) if timeout is not None else fn(*args, **kwargs)
    except TimeoutError as exc:
        raise OverBudget("over the screening budget") from exc


class Pattern:
    """A compiled pattern whose searches keep to the current budget."""

    __slots__ = ("_p",)

    def __init__(self, compiled):
        self._p = compiled

    @property
    def pattern(self) -> str:
        return self._p.pattern

    @property
    def flags(self) -> int:
        return self._p.flags

    def search(self, string, pos=0, endpos=None):
        return _call(self._p.search, string, pos, len(string) if endpos is None else endpos)

    def match(self, string, pos=0, endpos=None):
        return _call(self._p.match, string, pos, len(string) if endpos is None else endpos)

    def fullmatch(self, string, pos=0, endpos=None):
        return _call(self._p.fullmatch, string, pos, len(string) if endpos is None else endpos)

    def finditer(self, string):
        # The iterator's searches run as it is read: each one keeps to the budget left then.
        return _call(self._p.finditer, string)

    def findall(self, string):
        return _call(self._p.findall, string)

    def sub(self, repl, string, count=0):
        return _call(self._p.sub, repl, string, count)

    def subn(self, repl, string, count=0):
        return _call(self._p.subn, repl, string, count)

    def split(self, string, maxsplit=0):
        return _call(self._p.split, string, maxsplit)


_cache: dict[tuple[str, int], Pattern] = {}


def compile(pattern, flags: int = 0) -> Pattern:  # noqa: A001 - re's name
    if isinstance(pattern, Pattern):
        return pattern
    key = (pattern, flags)
    found = _cache.get(key)
    if found is None:
        found = _cache[key] = Pattern(regex.compile(pattern, flags))
    return found


def search(pattern, string, flags=0):
    return compile(pattern, flags).search(string)


def match(pattern, string, flags=0):
    return compile(pattern, flags).match(string)


def fullmatch(pattern, string, flags=0):
    return compile(pattern, flags).fullmatch(string)


def finditer(pattern, string, flags=0):
    return compile(pattern, flags).finditer(string)


def findall(pattern, string, flags=0):
    return compile(pattern, flags).findall(string)


def sub(pattern, repl, string, count=0, flags=0):
    return compile(pattern, flags).sub(repl, string, count)


def split(pattern, string, maxsplit=0, flags=0):
    return compile(pattern, flags).split(string, maxsplit)
