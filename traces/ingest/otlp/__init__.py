"""Run traces from OpenTelemetry: `POST /api/v1/otlp/v1/traces` (docs/otlp.md).

`wire` reads and answers OTLP/HTTP (protobuf or JSON, gzip or not) with the maintained
protobuf definitions; `spans` turns the decoded request into plain spans; `mapping` turns
the spans of one agent turn into a RunTrace; `turns` groups spans into turns, keeps the
unfinished ones in the database and stores the finished ones through `traces.ingest.documents`.
"""
