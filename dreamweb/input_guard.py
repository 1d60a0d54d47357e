"""The input guard: what untrusted input may look like before any view, serializer or database sees it.

* JSON is parsed here (``parse`` / ``loads``), never with a bare ``json.loads``: nesting deeper than
  ``DREAMWEB_MAX_JSON_DEPTH`` (a ``RecursionError`` in the parser, or later in whatever walks the value),
  non-finite numbers (``NaN``, ``Infinity``, ``1e999``: PostgreSQL's jsonb refuses them) and text PostgreSQL cannot
  store (NUL, unpaired surrogates) are refused with the path of the first offending value.
* Ids and numbers from query strings and forms go through ``parse_id`` / ``parse_int``: ASCII digits only, within
  range (an id is 1 to 2**63 - 1, a bigint), else None; path ids are Django's int converter (out of range: 404).
* Bodies larger than ``DREAMWEB_MAX_REQUEST_BYTES`` are refused by ``dreamweb.middleware.InputGuardMiddleware``
  before anything reads them.
* A page's query string or form holding text PostgreSQL cannot store (``param_problem``) is refused by
  ``dreamweb.middleware.PageInputMiddleware`` before any view filters or saves with it.

Each caller turns a ``Refused`` into its own answer (a JSON 400 in the API, a rejected line in an import).
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass

import orjson
from django.conf import settings

MAX_ID = 2**63 - 1  # PostgreSQL bigint, the type of every primary key
MAX_NUMBER = sys.float_info.max  # about 1.8e308: beyond it a JSON reader that uses doubles (jsonb too) cannot go


def parse_int(value, *, minimum: int = 0, maximum: int = MAX_ID) -> int | None:
    """The whole number a parameter (str) names, within [minimum, maximum], or None: not ASCII digits, or out of
    range. Never raises, whatever the text (int() of a few thousand digits would)."""
    if not isinstance(value, str) or not 0 < len(value) <= 19 or not value.isascii() or not value.isdigit():
        return None
    number = int(value)
    return number if minimum <= number <= maximum else None


def parse_id(value) -> int | None:
    """The id a parameter names, or None when it is not one (not ASCII digits, 0, or beyond a bigint)."""
    return parse_int(value, minimum=1)


class Refused(ValueError):
    """Input the guard refuses: ``code`` (too_deep, not_finite, unstorable, not_json), the ``path`` of the value at
    fault (``events[3].arguments.x``; ``body`` for the whole document) and a ``message`` about it."""

    def __init__(self, code: str, path: str, message: str):
        self.code, self.path, self.message = code, path, message
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class Hints:
    """Which costly checks a parsed value still needs: a text without the escapes that could carry an unstorable
    character, or without a non-finite number, needs no walk over its strings or numbers. Depth is always checked
    (it costs one pass over the containers)."""

    strings: bool = True
    numbers: bool = True
    depth: bool = True

    @classmethod
    def of(cls, text: bytes | str) -> Hints:
        """Hints for a value parsed (by any JSON parser) from ``text``."""
        if isinstance(text, str):
            return cls(strings=bool(_UNSTORABLE_TEXT.search(text)), numbers=bool(_NON_FINITE_TEXT.search(text)))
        return cls(
            strings=bool(_UNSTORABLE_ESCAPE.search(text)),
            numbers=_number_hint(text, text.translate(_DIGITS_AS_ZERO)),
            depth=text.count(b"[") + text.count(b"{") > max_depth(),
        )


EVERYTHING = Hints()
CHECKED = Hints(strings=False, numbers=False, depth=False)
_PARSED_HINTS = {(s, d): Hints(strings=s, numbers=False, depth=d) for s in (False, True) for d in (False, True)}

# Characters PostgreSQL text and jsonb cannot hold (NUL), and lone UTF-16 surrogates, which UTF-8 cannot encode.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Strict JSON carries them only as escapes (raw ones are a decoding or syntax error), so a text without these
# escapes needs no walk over its strings. A str may hold raw ones too.
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_UNSTORABLE_TEXT = re.compile(r"\\u(?:0000|[dD][89a-fA-F])|[\x00\ud800-\udfff]")
# A number overflows a double only with an exponent of three digits or a couple of hundred integer digits (for bytes:
# _number_hint, the same test without a regular expression).
_NON_FINITE_TEXT = re.compile(r"NaN|Infinity|[eE]\+?0*[1-9]\d\d|\d{200}")

_NOT_FINITE = "must be a finite number (NaN, Infinity and numbers beyond 1.8e308 are not accepted)"


def _too_deep(limit: int) -> str:
    return f"nested deeper than {limit} levels (DREAMWEB_MAX_JSON_DEPTH)"


def _unstorable(char: str) -> str:
    if char == "\x00":
        return "must not contain NUL characters (\\u0000)"
    return f"must not contain an unpaired surrogate (\\u{ord(char):04x})"


class _NumberWatch:
    """Parser hooks that note a non-finite number (they run only for floats and NaN/Infinity, and for integers only
    on this fallback parser, which reads only texts with a long run of digits), so the walk over numbers is needed
    only when one was seen."""

    def __init__(self):
        self.seen = False

    def constant(self, name: str) -> float:
        self.seen = True
        return float(name)  # 'NaN', 'Infinity', '-Infinity'

    def number(self, literal: str) -> float:
        value = float(literal)
        if math.isinf(value):
            self.seen = True
        return value

    def integer(self, literal: str) -> int | float:
        # A whole number is as much beyond a double's range as 1e999 is: written with digits alone (309 of them or
        # more) Python would keep it exact, jsonb would store it, and any client reading it as a double gets
        # Infinity. Past 310 digits it is beyond the range whatever they are, and int() of thousands of digits is
        # refused by Python itself: infinity stands for it, so the walk names its path like 1e999's.
        if len(literal) < 309:
            return int(literal)
        value = int(literal) if len(literal) <= 310 else (-math.inf if literal[0] == "-" else math.inf)
        if not -MAX_NUMBER <= value <= MAX_NUMBER:
            self.seen = True
            return -math.inf if value < 0 else math.inf
        return value


# Bytes with every digit read as 0 and E as e: a few substring tests on it stand for regular expressions that cost
# ten times more on a long text (Hints.of, parse).
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789E", b"0000000000e")
_LONG_INTEGER = b"0" * 19  # an integer that may not fit in 64 bits


def _number_hint(text: bytes, folded: bytes) -> bool:
    """May the text hold a non-finite number? (NaN, Infinity, a three-digit exponent, two hundred digits.)"""
    return b"NaN" in text or b"Infinity" in text or b"e000" in folded or b"e+000" in folded or b"0" * 200 in folded


def parse(text: bytes | str) -> tuple[object, Hints]:
    """Parse JSON text; refuse what no parser can take (not JSON, nesting beyond the interpreter). Returns the value
    and the hints for ``check`` (the caller may check parts of the value separately, e.g. each session of a batch).

    orjson reads bytes when it can (several times faster). It is stricter than the standard parser (no NaN, no
    Infinity, no byte order mark, no nesting beyond 1024) and reads integers beyond 64 bits as floats, so whatever
    it refuses, and any text with a run of 19 digits, goes to the standard parser: the value, and every refusal and
    its message, are the same either way. A text with no more brackets than the depth limit needs no depth walk."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text)
        folded = text.translate(_DIGITS_AS_ZERO)
        if _LONG_INTEGER not in folded:
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                pass
            else:
                # numbers: False, orjson refuses every non-finite number. One shared Hints per answer (a frozen
                # dataclass costs more to build than the two tests).
                strings = b"\\u" in text and _UNSTORABLE_ESCAPE.search(text) is not None  # most lines hold no escape
                depth = text.count(b"[") + text.count(b"{") > max_depth()
                return value, _PARSED_HINTS[strings, depth]
    watch = _NumberWatch()
    try:
        if isinstance(text, bytes):
            # JSON text is UTF-8 (RFC 8259), a byte order mark allowed: the standard parser would guess UTF-16 or -32
            # from leading zero bytes (a line of NULs, as a crash leaves at a file's end) and fail in that codec.
            text = text.decode("utf-8-sig")
        value = json.loads(text, parse_constant=watch.constant, parse_float=watch.number, parse_int=watch.integer)
    except RecursionError as exc:  # no path: the parser gave up before it could say where
        raise Refused("too_deep", "", _too_deep(max_depth())) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused("not_json", "", f"not valid JSON: {exc}") from exc
    escapes = _UNSTORABLE_TEXT if isinstance(text, str) else _UNSTORABLE_ESCAPE
    return value, Hints(strings=bool(escapes.search(text)), numbers=watch.seen)


def loads(text: bytes | str, *, root: str = "body") -> object:
    """Parse JSON text and check all of it (depth, numbers, text); raise Refused for the first problem."""
    value, hints = parse(text)
    check(value, hints, root=root)
    return value


def max_depth() -> int:
    return settings.DREAMWEB_MAX_JSON_DEPTH


def check(value, hints: Hints = EVERYTHING, *, root: str = "body") -> None:
    problem = find_problem(value, hints, root=root)
    if problem is not None:
        raise problem


def find_problem(value, hints: Hints = EVERYTHING, *, root: str = "body") -> Refused | None:
    """The first problem of a parsed value (as a Refused, not raised), or None. Paths read like ``a.b[2].c``; the
    value itself is ``root``. One pass over the containers (no recursion: any depth is safe to walk); strings and
    numbers are looked at only when the hints say they may hold a problem."""
    if not (hints.depth or hints.strings or hints.numbers):
        return None
    strings, numbers = hints.strings, hints.numbers
    limit = max_depth() if hints.depth else math.inf
    if not isinstance(value, dict | list):
        return _scalar_problem(value, root, strings, numbers)
    if not (strings or numbers) and not _deeper_than(value, limit):
        return None  # depth alone, and within the limit: no path needed
    stack: list[tuple[object, str, int]] = [(value, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > limit:
            return Refused("too_deep", path or root, _too_deep(max_depth()))
        children = []
        if type(node) is dict:
            for name, child in node.items():
                if strings and type(name) is str and (bad := _UNSTORABLE.search(name)):
                    return Refused("unstorable", f"{path or root} (a key)", _unstorable(bad.group()))
                kind = type(child)
                if kind is dict or kind is list:
                    children.append((child, f"{path}.{name}" if path else str(name), depth + 1))
                elif ((strings and kind is str) or (numbers and (kind is float or kind is int))) and (
                    found := _scalar_problem(child, f"{path}.{name}" if path else str(name), strings, numbers)
                ):
                    return found
        else:
            for index, child in enumerate(node):
                kind = type(child)
                if kind is dict or kind is list:
                    children.append((child, f"{path}[{index}]", depth + 1))
                elif ((strings and kind is str) or (numbers and (kind is float or kind is int))) and (
                    found := _scalar_problem(child, f"{path}[{index}]", strings, numbers)
                ):
                    return found
        stack.extend(reversed(children))  # in document order
    return None


def param_problem(params) -> Refused | None:
    """The first name or value of a query string or form (a QueryDict) holding text the database cannot store (NUL;
    decoding replaces what is not UTF-8, so no lone surrogate comes this way), as a Refused, or None. Its ``path`` is
    the parameter's name, or "a parameter name" when the name itself is at fault (it is shown on the page)."""
    for name, values in params.lists():
        if bad := _UNSTORABLE.search(name):
            return Refused("unstorable", "a parameter name", _unstorable(bad.group()))
        for value in values:
            if isinstance(value, str) and (bad := _UNSTORABLE.search(value)):
                return Refused("unstorable", name, _unstorable(bad.group()))
    return None


def _deeper_than(value: dict | list, limit: int) -> bool:
    """Does the value nest containers deeper than ``limit``? find_problem's walk without the paths it names (the
    common case, nothing too deep, at a fraction of its cost)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        depth += 1
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth))
    return False


def _scalar_problem(value, path: str, strings: bool, numbers: bool) -> Refused | None:
    if numbers and type(value) is float and not math.isfinite(value):
        return Refused("not_finite", path, _NOT_FINITE)
    # An integer parsed by another reader (the standard one keeps every digit): beyond a double's range, refused as
    # the same number written 1e999 is.
    if numbers and type(value) is int and not -MAX_NUMBER <= value <= MAX_NUMBER:
        return Refused("not_finite", path, _NOT_FINITE)
    if strings and type(value) is str and (bad := _UNSTORABLE.search(value)):
        return Refused("unstorable", path, _unstorable(bad.group()))
    return None
