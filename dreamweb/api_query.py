"""The query string of an API request read without DRF's serializer machinery, when that gives the same answer.

A DRF serializer costs about a millisecond of CPU per request to build and run (its fields are deep-copied on every
instantiation), as much as the whole ranking of a context request (docs/benchmarks.md, issue 15). ``fast_plan``
reads a serializer's fields once per process and, for the kinds of fields a query string uses (text, slug, bounded
whole number, boolean), checks a value the way the field would. It only ever *accepts*: anything it is not sure of
(a number with spaces, underscores or a decimal point, a boolean spelt oddly, a value that breaks a rule) gives None,
and the caller runs the serializer, which answers (values or the 400 with its messages) exactly as before. So the
serializer stays the one definition of the parameters (and of the OpenAPI schema), and the error bodies cannot
change. A serializer with anything else (other field kinds, extra validators, ``validate`` methods, ``source``)
gets no plan.
"""

from __future__ import annotations

import re

from django.core import validators as dj
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.validators import ProhibitSurrogateCharactersValidator

_SLUG = re.compile(r"[-a-zA-Z0-9_]+", re.ASCII)
_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_VALIDATORS = (
    dj.MaxLengthValidator,
    dj.MinLengthValidator,
    dj.ProhibitNullCharactersValidator,
    ProhibitSurrogateCharactersValidator,
)
_NUMBER_VALIDATORS = (dj.MaxValueValidator, dj.MinValueValidator)
_NO_PLAN = object()
_plans: dict = {}


def _text(field: serializers.CharField, slug: bool):
    allow_blank, trim = field.allow_blank, field.trim_whitespace
    low, high = field.min_length, field.max_length

    def check(value: str):
        if trim:
            value = value.strip()
        if not value:
            return value if allow_blank else empty  # blank: DRF says why
        if (high is not None and len(value) > high) or (low is not None and len(value) < low) or "\x00" in value:
            return empty
        if not value.isascii() and _SURROGATE.search(value):
            return empty
        if slug and not _SLUG.fullmatch(value):
            return empty
        return value

    return check


def _integer(field: serializers.IntegerField):
    low, high = field.min_value, field.max_value

    def check(value: str):
        # Plain ASCII digits only; DRF's other spellings ("+5", " 5", "5.0", "1_000") go to the serializer.
        if not (value.isascii() and value.isdigit()) or len(value) > 18:
            return empty
        number = int(value)
        if (low is not None and number < low) or (high is not None and number > high):
            return empty
        return number

    return check


def _boolean(field: serializers.BooleanField):
    true = {v for v in field.TRUE_VALUES if isinstance(v, str)}
    false = {v for v in field.FALSE_VALUES if isinstance(v, str)}

    def check(value: str):
        lowered = value.lower()
        return True if lowered in true else False if lowered in false else empty

    return check


def _checker(field):
    kind = type(field)
    if field.source != field.field_name or field.read_only or field.allow_null:
        return None
    if kind in (serializers.CharField, serializers.SlugField):
        if kind is serializers.SlugField and field.allow_unicode:
            return None
        allowed = _TEXT_VALIDATORS + ((dj.RegexValidator,) if kind is serializers.SlugField else ())
        if all(type(v) in allowed for v in field.validators):
            return _text(field, slug=kind is serializers.SlugField)
    elif kind is serializers.IntegerField:
        if all(type(v) in _NUMBER_VALIDATORS for v in field.validators):
            return _integer(field)
    elif kind is serializers.BooleanField and not field.validators:
        return _boolean(field)
    return None


def _build(serializer_class):
    base = serializers.Serializer
    if any(
        getattr(serializer_class, m) is not getattr(base, m)
        for m in ("validate", "to_internal_value", "run_validation")
    ):
        return None
    serializer = serializer_class()
    if serializer.validators:
        return None
    plan = []
    for name, field in serializer.fields.items():
        check = _checker(field)
        if check is None or hasattr(serializer_class, f"validate_{name}"):
            return None
        plan.append((name, check, field.required, field.default))
    return plan


def fast_plan(serializer_class):
    """The per-process plan for this serializer (None when it has fields the fast path does not know)."""
    plan = _plans.get(serializer_class, _NO_PLAN)
    if plan is _NO_PLAN:
        plan = _plans[serializer_class] = _build(serializer_class)
    return plan


def fast_parameters(params: dict, serializer_class) -> dict | None:
    """What ``serializer_class(data=params)`` validates to, or None when only the serializer can say."""
    plan = fast_plan(serializer_class)
    if plan is None:
        return None
    out = {}
    for name, check, required, default in plan:
        value = params.get(name, empty)
        if value is empty:
            if required:
                return None
            if default is not empty:
                out[name] = default() if callable(default) else default
            continue
        if not isinstance(value, str):
            return None
        value = check(value)
        if value is empty:
            return None
        out[name] = value
    return out
