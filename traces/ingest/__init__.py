"""Ingestion: traces coming in and the runtime's verdict.

`documents` validates and stores RunTraces (`POST /api/v1/traces`); `verdicts` stores a
runtime verdict (`POST /api/v1/evaluate`); `evaluate` evaluates what was stored in runtime
mode; `outbox` keeps the batches whose evaluation is still to be sent; `uploads` reads uploaded
files in pieces; `otlp` takes OpenTelemetry exports. `api`, `views`, `urls` and `tasks` are its
endpoints, pages, routes and background work.
"""
