"""The OpenAPI declarations of the bodies and answers of runs, estimates, Try it and
comparisons, which the views shape by hand."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse

from guardrails.engine.evaluate import SKIP_PARTS
from traces.models import Evaluation, RunComparison
from traces.runs import run_ends, run_results

ESTIMATE_SCHEMA = {
    "type": "object",
    "required": ["calls", "cached", "costUsd", "traces", "sampled", "extrapolated", "models", "errors"],
    "properties": {
        "tenant": {"type": "string"},
        "calls": {"type": "integer", "description": "Judge calls to pay (cache hits left out)."},
        "cached": {"type": "integer", "description": "Judgements the cache will answer."},
        "costUsd": {"type": "string", "description": "Upper estimate, exact decimal string."},
        "traces": {"type": "integer"},
        "sampled": {"type": "integer", "description": "Traces read to estimate."},
        "extrapolated": {"type": "boolean", "description": "True when the selection was larger than the sample."},
        "models": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Guardrail id -> the judge model it routes to.",
        },
        "errors": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Guardrail id -> why no judge model fits.",
        },
    },
}


# Guardrails' endpoints that read or evaluate traces (guardrails/try, guardrails/{id}/quality).
TRY_BODY = {
    "application/json": {
        "type": "object",
        "required": ["guardrail"],
        "properties": {
            "guardrail": {"type": "object", "description": "The guardrail document being authored."},
            "trace": {"type": "object", "description": "A RunTrace to evaluate it against."},
            "traceId": {
                "type": "string",
                "description": "Or the runtime id of a stored trace of one of the caller's tenants.",
            },
            "mode": {"type": "string", "enum": ["runtime", "ci"], "default": "ci"},
        },
    }
}
TRY_RESPONSE = OpenApiResponse(
    {"type": "object", "properties": {"result": {"type": "object"}}},
    description="The engine's result: guardrail, revision, status (pass, fail, error, "
    "skipped), reason, action, severity, durationMs, details.",
)

RUN_SCHEMA = {
    "type": "object",
    "required": ["id", "tenant", "status", "mode", "guardrails", "filters", "progress", "summary"],
    "properties": {
        "id": {"type": "integer"},
        "url": {"type": "string"},
        "tenant": {"type": "string"},
        "status": {"type": "string", "enum": [s.value for s in Evaluation.Status]},
        "mode": {"type": "string", "enum": ["ci", "runtime"]},
        "guardrails": {
            "type": "array",
            "items": {"type": "object", "properties": {"id": {"type": "string"}, "revision": {"type": "integer"}}},
        },
        "filters": {"type": "object"},
        "progress": {
            "type": "object",
            "properties": {"done": {"type": "integer"}, "total": {"type": "integer"}, "percent": {"type": "integer"}},
        },
        "summary": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {name: {"type": "integer"} for name in run_ends.STATUSES},
            },
        },
        "startedBy": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "startedAt": {"type": "string", "format": "date-time", "nullable": True},
        "finishedAt": {"type": "string", "format": "date-time", "nullable": True},
        "error": {"type": "string"},
    },
}


RUN_PAGE_SCHEMA = {
    "type": "object",
    "required": ["next", "results"],
    "properties": {
        "next": {"type": "string", "format": "uri", "nullable": True},
        "results": {"type": "array", "items": RUN_SCHEMA},
    },
}


START_BODY = {
    "application/json": {
        "type": "object",
        "properties": {
            "tenant": {"type": "string", "description": "The tenant (a tenant-bound key's by default)."},
            "guardrails": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Guardrail ids; absent or empty: every enabled guardrail.",
            },
            "zeroLlmOnly": {
                "type": "boolean",
                "default": False,
                "description": "Only the zero-llm guardrails of the selection (of every enabled one when "
                "`guardrails` is empty): a run that calls no judge, under any reviewer's limit.",
            },
            "filters": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string"},
                    "flow": {"type": "string"},
                    # Empty (or null) is no bound, as the run form sends an unset date.
                    "since": {"type": "string", "anyOf": [{"format": "date-time"}, {"maxLength": 0}], "nullable": True},
                    "until": {"type": "string", "anyOf": [{"format": "date-time"}, {"maxLength": 0}], "nullable": True},
                    "upload": {"type": "integer"},
                },
            },
            "mode": {"type": "string", "enum": ["ci", "runtime"], "default": "ci"},
        },
        "additionalProperties": False,
    }
}


RESULT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "trace": {"type": "string"},
        "traceUrl": {"type": "string"},
        "guardrail": {"type": "string"},
        "revision": {"type": "integer"},
        "status": {"type": "string", "enum": list(run_results.STATUSES)},
        "reason": {"type": "string"},
        "skipReason": {
            "type": "string",
            "nullable": True,
            "enum": [*SKIP_PARTS, None],
            "description": "Of a skipped result: the part of the scope that did not select the trace.",
        },
        "action": {"type": "string"},
        "severity": {"type": "string", "nullable": True},
        "violation": {"type": "integer", "nullable": True},
        "reviewState": {"type": "string", "nullable": True},
    },
}


RESULT_PAGE_SCHEMA = {
    "type": "object",
    "required": ["next", "results"],
    "properties": {"next": {"type": "string", "nullable": True}, "results": {"type": "array", "items": RESULT_SCHEMA}},
}


COMPARED_TRACES = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "trace": {"type": "string"},
            "traceUrl": {"type": "string"},
            "reason": {"type": "string", "description": "The failure's reason: the run's, or the earlier one's."},
            "earlierRun": {
                "type": "integer",
                "nullable": True,
                "description": "The run of the earlier result compared with; null: the runtime.",
            },
            "earlierRevision": {"type": "integer", "nullable": True},
        },
    },
}

_COUNT = {"type": "integer"}
_CURSOR = {"type": "string", "nullable": True, "description": "The next page's cursor for compare/traces."}

COMPARE_SCHEMA = {
    "type": "object",
    "required": ["evaluation", "with", "status", "progress", "guardrails"],
    "properties": {
        "evaluation": {"type": "integer"},
        "with": {
            "type": "integer",
            "nullable": True,
            "description": "The run compared with; null: each guardrail's latest earlier results.",
        },
        "status": {
            "type": "string",
            "enum": ["waiting", *[s.value for s in RunComparison.Status]],
            "description": "`succeeded`: the figures are complete. `waiting`: a run has not "
            "finished. `queued`, `running`: being computed (answered 202).",
        },
        "progress": {
            "type": "object",
            "properties": {"done": _COUNT, "total": _COUNT, "percent": _COUNT},
            "description": "Results of the run compared so far, of those to compare.",
        },
        "error": {"type": "string"},
        "guardrails": {
            "type": "array",
            "description": "Per revision the run evaluated (by guardrail id, then revision); compared with "
            "one run, also the guardrails only that run evaluated (`revision` null, nothing compared).",
            "items": {
                "type": "object",
                "properties": {
                    "guardrail": {"type": "string"},
                    "revision": {"type": "integer", "nullable": True},
                    "shadow": {"type": "boolean", "description": "The revision ran in shadow in this run."},
                    "failing": _COUNT,
                    "passing": _COUNT,
                    "skipped": _COUNT,
                    "errors": _COUNT,
                    "compared": {"type": "integer", "description": "Traces with a verdict now and earlier."},
                    "newlyFailing": _COUNT,
                    "noLongerFailing": _COUNT,
                    "stillFailing": _COUNT,
                    "stillPassing": _COUNT,
                    "withoutEarlier": {"type": "integer", "description": "Traces with no earlier result."},
                    "notCompared": {"type": "integer", "description": "withoutEarlier + skipped + errors."},
                    "why": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Why traces were not compared, with how many.",
                    },
                    "notes": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Earlier results of another revision; a revision in shadow.",
                    },
                    "earlier": {
                        "type": "array",
                        "description": "What the traces were compared with, most first: a run (null: the runtime) "
                        "at a revision, and how many results.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "run": {"type": "integer", "nullable": True},
                                "revision": {"type": "integer", "nullable": True},
                                "results": _COUNT,
                            },
                        },
                    },
                    "newlyFailingTraces": COMPARED_TRACES,
                    "noLongerFailingTraces": COMPARED_TRACES,
                    "stillFailingTraces": COMPARED_TRACES,
                    "newlyFailingCursor": _CURSOR,
                    "noLongerFailingCursor": _CURSOR,
                    "stillFailingCursor": _CURSOR,
                },
            },
        },
    },
}


CHANGES_SCHEMA = {
    "type": "object",
    "required": ["next", "results"],
    "properties": {"next": {"type": "string", "nullable": True}, "results": COMPARED_TRACES},
}
