"""The agents' API's JSON renderer: DRF's JSONRenderer, written by orjson when orjson writes the same values.

A context response carries some 20 entries and their rendered text twice (items and ``text``): the standard
encoder took about a tenth of a millisecond of it, orjson a fifth of that. The values are DRF's in every case:
compact, UTF-8, U+2028 and U+2029 escaped; dates, times, decimals, UUIDs, lazy text and anything else orjson does not
write natively go through DRF's own encoder (``default``); what orjson refuses (keys that are not strings, integers
past 64 bits, text that is not valid Unicode), and any indented rendering, is left to DRF's renderer unchanged.
Two differences of spelling, not of value: a float under 1e-4 may be written in another form (``1e-6`` for
``1e-06``, ``0.00001`` for ``1e-05``: the same number to any JSON reader), and a non-finite float, which DRF refuses
and the API never holds (the input guard refuses them), would be written as null.
"""

from __future__ import annotations

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_default = JSONEncoder().default


class APIJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None or self.get_indent(accepted_media_type, renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            out = orjson.dumps(data, default=_default, option=_OPTIONS)
        except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
            return super().render(data, accepted_media_type, renderer_context)
        if b"\xe2\x80\xa8" in out or b"\xe2\x80\xa9" in out:
            # DRF's output is a strict JavaScript subset (the two line separators escaped).
            out = out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
        return out
