"""OTLP/HTTP on the wire: reading a bounded request body and answering in its encoding.

Decoding and encoding use the maintained definitions (`opentelemetry-proto`, and Google's
`Status` for errors) and protobuf's own JSON mapping. The one difference of OTLP's JSON
from protobuf's (trace and span ids are hex, not base64) is undone before parsing.
"""

from __future__ import annotations

import base64
import math
import zlib
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc.code_pb2 import Code
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from kindgi_console.jsonbody import JsonBodyError, parse_json

PROTOBUF, JSON = "application/x-protobuf", "application/json"
ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
#: The gRPC code of each HTTP status the endpoint answers, for the Status body.
CODES = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    413: Code.RESOURCE_EXHAUSTED,
    415: Code.INVALID_ARGUMENT,
    429: Code.RESOURCE_EXHAUSTED,
    503: Code.UNAVAILABLE,
}


class OtlpError(Exception):
    """A request the endpoint refuses whole: its HTTP status, message and Retry-After."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def encoding_of(content_type: str) -> str:
    """The request's encoding from its Content-Type; 415 for any other than OTLP's two."""
    media = content_type.split(";")[0].strip().lower()
    if media in (PROTOBUF, JSON):
        return media
    raise OtlpError(415, f"Content-Type {media or '(none)'!r} is neither {PROTOBUF} nor {JSON}")


def read_body(request: HttpRequest, limit: int) -> bytes:
    """The body, decompressed, never holding more than `limit` bytes of either form: 413 past it."""
    declared = request.headers.get("Content-Length") or "0"
    if not declared.isdigit():
        raise OtlpError(400, "Content-Length is not a number")
    if int(declared) > limit:
        raise OtlpError(413, f"the body is {declared} bytes, over the limit of {limit}")
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise OtlpError(413, f"the body is over the limit of {limit} bytes")
    coding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
    if coding in WBITS:
        return inflate(raw, limit, coding)
    if coding != "identity":
        raise OtlpError(415, f"Content-Encoding {coding!r} is not supported: send gzip or none")
    return raw


#: zlib's window bits for each Content-Encoding it reads (the SDK's exporters offer both).
WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def inflate(raw: bytes, limit: int, coding: str) -> bytes:
    """A compressed body inflated to at most `limit` bytes: 413 past it, 400 when it is not `coding`."""
    inflater = zlib.decompressobj(wbits=WBITS[coding])
    try:
        body = inflater.decompress(raw, limit + 1)
    except zlib.error as error:
        raise OtlpError(400, f"the body is not valid {coding}: {error}") from None
    if len(body) > limit:
        raise OtlpError(413, f"the body inflates to over the limit of {limit} bytes")
    if not inflater.eof:
        raise OtlpError(400, f"the {coding} body is cut short")
    return body


def decode(body: bytes, encoding: str) -> ExportTraceServiceRequest:
    """The export request in either encoding; 400 naming what could not be read."""
    request = ExportTraceServiceRequest()
    if encoding == PROTOBUF:
        try:
            request.ParseFromString(body)
        except DecodeError as error:
            raise OtlpError(400, f"the body is not an ExportTraceServiceRequest: {error}") from None
        return request
    try:  # bounded depth, and a key twice in one object refused, as for every JSON body
        data = parse_json(body)
    except JsonBodyError as error:
        raise OtlpError(400, f"the body is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise OtlpError(400, "the body is not a JSON object")
    try:
        json_format.ParseDict(_ids_as_base64(data, depth=0), request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError) as error:
        raise OtlpError(400, f"the body is not an ExportTraceServiceRequest: {error}") from None
    return request


def _ids_as_base64(value: Any, depth: int) -> Any:
    """OTLP JSON's hex ids as protobuf JSON's base64, in place."""
    if depth > 64:
        raise OtlpError(400, "the body nests deeper than 64 levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ID_FIELDS and isinstance(item, str):
                value[key] = _hex_to_base64(key, item)
            elif isinstance(item, dict | list):
                _ids_as_base64(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _ids_as_base64(item, depth + 1)
    return value


def _hex_to_base64(key: str, text: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(text)).decode()
    except ValueError:
        raise OtlpError(400, f"{key} {text[:40]!r} is not hex") from None


def export_response(rejected: int, message: str, encoding: str) -> HttpResponse:
    """200 with an ExportTraceServiceResponse; `partial_success` when spans were refused."""
    answer = ExportTraceServiceResponse()
    if rejected or message:
        answer.partial_success.rejected_spans = rejected
        answer.partial_success.error_message = message
    return _respond(answer, 200, encoding)


def error_response(error: OtlpError, encoding: str, headers: dict[str, str] | None = None) -> HttpResponse:
    """An error status with a google.rpc.Status body, and Retry-After when it has one."""
    status = Status(code=CODES.get(error.status, Code.UNKNOWN), message=str(error))
    response = _respond(status, error.status, encoding)
    if error.retry_after is not None:
        response["Retry-After"] = str(max(1, math.ceil(error.retry_after)))
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _respond(message: Message, status: int, encoding: str) -> HttpResponse:
    if encoding == PROTOBUF:
        return HttpResponse(message.SerializeToString(), status=status, content_type=PROTOBUF)
    body = orjson.dumps(json_format.MessageToDict(message))
    return HttpResponse(body, status=status, content_type=JSON)
