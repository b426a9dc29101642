"""A JSON renderer with orjson, for the hot API paths (`POST evaluate`, `POST traces`).

It writes what DRF's JSONRenderer writes under this project's settings (compact, UTF-8),
several times faster; what orjson cannot encode natively goes through DRF's encoder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_ENCODER = JSONEncoder()


class ORJSONRenderer(JSONRenderer):
    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data, default=_ENCODER.default)
