"""Plain spans from a decoded `ExportTraceServiceRequest`: ids in hex, attributes as JSON values.

The mapping reads these, and unfinished turns keep them in `PendingSpan.span`, so the
form is JSON through and through. Of the resource, only the attributes the mapping reads
are kept on each span (the service's name, the tenant's and the flow's attribute).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags, Status

from kindgi_console import deadline

STATUS_ERROR = Status.STATUS_CODE_ERROR
#: Span flags: the exporter knows whether the parent is remote (0x100), and it is (0x200).
REMOTE_PARENT = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


@dataclass
class Span:
    """One span, as the mapping reads it."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # the status's message when the span failed ('' if it gave none)
    resource: dict[str, Any] = field(default_factory=dict)
    remote_parent: bool = False  # its parent is in another process: it is this process's root

    @property
    def is_root(self) -> bool:
        return not self.parent_id or self.remote_parent

    def as_json(self) -> dict[str, Any]:
        return {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "parentId": self.parent_id,
            "name": self.name,
            "start": self.start_ns,
            "end": self.end_ns,
            "attributes": self.attributes,
            "events": self.events,
            "error": self.error,
            "resource": self.resource,
            "remoteParent": self.remote_parent,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Span:
        return cls(
            trace_id=data["traceId"],
            span_id=data["spanId"],
            parent_id=data["parentId"],
            name=data["name"],
            start_ns=data["start"],
            end_ns=data["end"],
            attributes=data["attributes"],
            events=data["events"],
            error=data["error"],
            resource=data["resource"],
            remote_parent=data.get("remoteParent", False),
        )


def spans_of(request: ExportTraceServiceRequest) -> tuple[list[Span], int]:
    """The request's spans, and how many were refused for ids of the wrong length."""
    kept = {"service.name", settings.KINDGI_OTLP_TENANT_ATTRIBUTE, settings.KINDGI_OTLP_FLOW_ATTRIBUTE}
    spans: list[Span] = []
    refused = 0
    for resource_spans in request.resource_spans:
        resource = {pair.key: value_of(pair.value) for pair in resource_spans.resource.attributes if pair.key in kept}
        for scope_spans in resource_spans.scope_spans:
            for proto in scope_spans.spans:
                deadline.check("reading the spans")
                span = span_of(proto, resource)
                if span is None:
                    refused += 1
                else:
                    spans.append(span)
    return spans, refused


def span_of(proto: ProtoSpan, resource: dict[str, Any]) -> Span | None:
    """One span, or None when its trace or span id is not of the OTLP length."""
    if len(proto.trace_id) != 16 or len(proto.span_id) != 8 or len(proto.parent_span_id) not in (0, 8):
        return None
    error = proto.status.message if proto.status.code == STATUS_ERROR else None
    return Span(
        trace_id=proto.trace_id.hex(),
        span_id=proto.span_id.hex(),
        parent_id=proto.parent_span_id.hex(),
        name=proto.name,
        start_ns=proto.start_time_unix_nano,
        end_ns=proto.end_time_unix_nano,
        attributes=attributes_of(proto.attributes),
        events=[
            {"name": event.name, "time": event.time_unix_nano, "attributes": attributes_of(event.attributes)}
            for event in proto.events
        ],
        error=error,
        resource=resource,
        remote_parent=proto.flags & REMOTE_PARENT == REMOTE_PARENT,
    )


def attributes_of(pairs: Any) -> dict[str, Any]:
    """Key-value pairs as a dict (a repeated key: the last one counts)."""
    return {pair.key: value_of(pair.value) for pair in pairs}


def value_of(value: AnyValue) -> Any:
    """An AnyValue as a JSON value (bytes as base64 text, a double JSON cannot hold as text)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "double_value" and not math.isfinite(value.double_value):
        return str(value.double_value)  # JSON has no NaN or infinity: 'nan', 'inf', '-inf'
    return getattr(value, kind)
