"""What every agents' API view shares: key authentication, per-key throttling, JSON only, and errors that are
always JSON with a clear message (``{"detail": ..., "code": ...}``, plus ``errors`` for invalid input)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.validators import RegexValidator
from django.http import Http404
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, generics, serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from . import input_guard
from .api_auth import ApiKeyAuthentication
from .api_query import fast_parameters
from .api_render import APIJSONRenderer
from .api_throttling import AgentKeyRateThrottle


class ApiError(exceptions.APIException):
    """An API refusal with a status, a message, a code and optional extra fields for the body."""

    def __init__(self, detail: str, *, code: str | None = None, extra: dict | None = None, headers=None):
        super().__init__(detail, code or self.default_code)
        self.extra = extra or {}
        self.headers = headers or {}


class Conflict(ApiError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class PreconditionFailed(ApiError):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_code = "stale"


class PayloadTooLarge(ApiError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class PreconditionRequired(ApiError):
    status_code = status.HTTP_428_PRECONDITION_REQUIRED
    default_code = "precondition_required"


class InvalidInput(ApiError):
    """400 with field-precise ``errors`` (a dict of field path to messages, or per batch item)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"


def _message(data) -> str:
    if isinstance(data, list) and data:
        return _message(data[0])
    if isinstance(data, dict) and data:
        field, value = next(iter(data.items()))
        return f"{field}: {_message(value)}"
    return str(data)


def exception_handler(exc, context):
    """DRF's handler, reshaped so that every error body has ``detail`` and ``code`` (and ``errors`` if any)."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found (or not in this key's team).")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        body = {"detail": str(exc.detail), "code": exc.detail.code, **exc.extra}
        for name, value in exc.headers.items():
            response[name] = value
    elif isinstance(exc, exceptions.ValidationError):
        errors = exc.detail
        body = {"detail": f"Invalid input: {_message(errors)}", "code": "invalid", "errors": errors}
    else:
        detail = getattr(exc, "detail", None)
        code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
        body = {"detail": str(detail) if detail is not None else str(exc), "code": code}
    response.data = body
    return response


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in a sentence.")
    code = serializers.CharField(help_text="Machine-readable reason, e.g. `not_authenticated`, `stale`.")
    errors = serializers.JSONField(
        required=False, help_text="For invalid input: field path (or batch index) to messages."
    )


_DESCRIPTIONS = {
    400: "Invalid input (field-precise `errors`).",
    401: "No key, or an invalid, revoked or expired key.",
    403: "The key lacks the scope, or the store does not let agents (or this key) write.",
    404: "No such object in the key's team.",
    409: "Conflict: an entry with this key already exists (create), the entry is archived (write), or a dream is "
    "already running.",
    412: "The entry changed since you read it (`If-Match` is stale); nothing was written.",
    413: "The request body is too large.",
    415: "The body must be JSON (`Content-Type: application/json`).",
    428: "`If-Match` is required (the entry's ETag).",
    429: "Too many requests for this key; see `Retry-After`.",
}


def error_responses(*codes: int) -> dict:
    """OpenAPI responses for error statuses; 400 (a malformed query string, e.g. with NUL characters), 401, 403 and
    429 can be the answer to any authenticated operation."""
    wanted = sorted({400, 401, 403, 429, *codes})
    return {code: OpenApiResponse(ErrorSerializer, description=_DESCRIPTIONS[code]) for code in wanted}


def refused(exc: input_guard.Refused, *, index: int | None = None) -> exceptions.APIException:
    """The API's answer to input the guard refused: 400, ``too_deep`` or ``invalid`` with the path in ``errors``
    (under the item's index for a batch), or a parse error for text that is not JSON."""
    if exc.code == "not_json":
        return exceptions.ParseError(f"The body is {exc.message}.")
    path = exc.path or "body"
    errors = {path: [exc.message]}
    where = f"[{index}] {path}" if index is not None else path
    return InvalidInput(
        f"Invalid input: {where}: {exc.message}",
        code="too_deep" if exc.code == "too_deep" else "invalid",
        extra={"errors": {str(index): errors} if index is not None else errors},
    )


class StrictJSONParser(JSONParser):
    """Every JSON body of the API goes through the input guard: depth, non-finite numbers, unstorable text."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            return input_guard.loads(raw)
        except input_guard.Refused as exc:
            raise refused(exc) from exc


class JSONString(serializers.CharField):
    """A string in a JSON body: a number or a boolean is refused, not turned into text (DRF's CharField would)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class JSONChoice(serializers.ChoiceField):
    """One of the choices, as a string in a JSON body: DRF's ChoiceField compares ``str(value)``, so 1 would be the
    choice "1"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class JSONBoolean(serializers.BooleanField):
    """true or false in a JSON body: not 0, 1, "yes" or "on" (DRF's BooleanField takes those from forms)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class JSONInteger(serializers.IntegerField):
    """A whole number in a JSON body: not a string of digits, a float or a boolean."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class AgentPagination(LimitOffsetPagination):
    """limit / offset as the schema says: whole numbers in range, else 400 (DRF would fall back to the default)."""

    default_limit = 50
    max_limit = 500

    def get_limit(self, request):
        return self._number(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request):
        return self._number(request, self.offset_query_param, 0, 0, input_guard.MAX_ID)

    @staticmethod
    def _number(request, name: str, default: int, minimum: int, maximum: int) -> int:
        if name not in request.query_params:
            return default
        value = input_guard.parse_int(request.query_params[name], minimum=minimum, maximum=maximum)
        if value is None:
            raise exceptions.ValidationError({name: [f"must be a whole number from {minimum} to {maximum}"]})
        return value

    def get_schema_operation_parameters(self, view):
        bounds = {self.limit_query_param: (1, self.max_limit), self.offset_query_param: (0, input_guard.MAX_ID)}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"].update(minimum=low, maximum=high)
        return parameters


def query_parameters(request, serializer_class) -> dict:
    """The query string, validated as the schema says: an empty value (``?store=``) is a value, refused where the
    field does not allow blanks (400), not read as absent the way DRF reads form data. Common, valid query strings
    are read without the serializer (dreamweb.api_query: the same values; anything else goes to the serializer)."""
    data = request.query_params.dict()
    fast = fast_parameters(data, serializer_class)
    if fast is not None:
        return fast
    params = serializer_class(data=data)
    params.is_valid(raise_exception=True)
    return params.validated_data


class AgentSchema(AutoSchema):
    """drf-spectacular's schema, plus ``body_required`` on a view whose request body is given as a raw schema (which
    drf-spectacular never marks as required): a request without a body is then not a valid request."""

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body is not None and getattr(self.view, "body_required", False):
            body["required"] = True
        return body

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        """A string DRF refuses when blank is described so: at least one character that is not whitespace (DRF
        trims whitespace, or the field's own rule refuses a blank text), unless the field has a pattern of its own."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and not field.allow_blank
            and schema.get("type") == "string"
            and not {"pattern", "enum", "format"} & set(schema)
            and not any(isinstance(v, RegexValidator) for v in field.validators)  # mapped to a pattern later
        ):
            schema.update(minLength=max(schema.get("minLength", 0), 1), pattern=r"\S")
        return schema


class AgentViewMixin:
    """Key authentication, per-key throttling, JSON in and out. Views add ``permission_classes``."""

    authentication_classes = [ApiKeyAuthentication]
    throttle_classes = [AgentKeyRateThrottle]
    parser_classes = [StrictJSONParser]
    renderer_classes = [APIJSONRenderer]
    pagination_class = AgentPagination
    schema = AgentSchema()

    @property
    def key(self):
        return self.request.auth

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # After authentication and permissions (so 401/403 come first): no NUL in the URL or the query.
        if any("\x00" in str(v) for v in kwargs.values()):
            raise exceptions.NotFound("No such object (the URL contains a NUL character).")
        for name, values in request.query_params.lists():
            if "\x00" in name or any("\x00" in v for v in values):
                raise exceptions.ValidationError({name: ["must not contain NUL characters"]})


class AgentAPIView(AgentViewMixin, APIView):
    pass


class AgentListView(AgentViewMixin, generics.ListAPIView):
    pass


class AgentRetrieveView(AgentViewMixin, generics.RetrieveAPIView):
    pass
