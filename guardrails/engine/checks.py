"""The seven built-in zero-llm checks of evaluation.md: config schemas and semantics.

Each check is written as a `prepare` function: it compiles a guardrail's config once
(defaults applied, regular expressions compiled, values case-folded) and returns the
function evaluated over each trace. `registry.builtin_checks()` registers them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from guardrails.engine.types import PASSED, CheckOutcome, Config, Issue, PreparedFn, Trace, failed

# The citation marker of must-cite: `[`, one or more characters other than `]`, `]`.
# A fixed pattern of ours (linear on any input), so the standard library runs it.
CITATION_MARKER = re.compile(r"\[([^\]]+)\]")

_NON_EMPTY_STRING: dict[str, Any] = {"type": "string", "minLength": 1}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _output(trace: Trace) -> str | None:
    output = trace.get("output")
    return output if isinstance(output, str) else None


def _tool_names(trace: Trace) -> list[str]:
    return [str(call.get("name")) for call in trace.get("toolCalls") or ()]


# --- must-cite -------------------------------------------------------------------------

MUST_CITE_SCHEMA = _schema(
    {
        "min": {
            "type": "integer",
            "minimum": 1,
            "default": 1,
            "title": "Minimum citations",
            "description": "How many citations the response needs at least.",
        },
        "allowedSources": {
            "type": "array",
            "minItems": 1,
            "items": _NON_EMPTY_STRING,
            "title": "Allowed sources",
            "description": "When given, every citation's source must be one of these.",
        },
    }
)


def prepare_must_cite(config: Config) -> PreparedFn:
    minimum = int(config.get("min", 1))
    allowed = frozenset(config["allowedSources"]) if "allowedSources" in config else None

    def evaluate(trace: Trace) -> CheckOutcome:
        sources = _citation_sources(trace)
        if len(sources) < minimum:
            return failed(f"{len(sources)} citation(s), at least {minimum} required")
        if allowed is not None:
            for source in sources:
                if source not in allowed:
                    return failed(f"citation source '{source}' is not an allowed source")
        return PASSED

    return evaluate


def _citation_sources(trace: Trace) -> list[str]:
    """The trace's `citations` when present (even empty), else the markers in `output`."""
    citations = trace.get("citations")
    if citations is not None:
        return [str(citation.get("source")) for citation in citations]
    output = _output(trace)
    return CITATION_MARKER.findall(output) if output else []


# --- never-call-tool -------------------------------------------------------------------

NEVER_CALL_TOOL_SCHEMA = _schema(
    {
        "tools": {
            "type": "array",
            "minItems": 1,
            "uniqueItems": True,
            "items": _NON_EMPTY_STRING,
            "title": "Forbidden tools",
            "description": "Names of the tools the agent must never call.",
        }
    },
    ["tools"],
)


def prepare_never_call_tool(config: Config) -> PreparedFn:
    forbidden = frozenset(config["tools"])

    def evaluate(trace: Trace) -> CheckOutcome:
        names = _tool_names(trace)
        if forbidden.isdisjoint(names):
            return PASSED
        for position, name in enumerate(names, start=1):
            if name in forbidden:
                return failed(f"called forbidden tool '{name}' (tool call {position})")
        return PASSED

    return evaluate


# --- max-tool-calls --------------------------------------------------------------------

MAX_TOOL_CALLS_SCHEMA = _schema(
    {
        "max": {
            "type": "integer",
            "minimum": 0,
            "title": "Maximum calls",
            "description": "Most tool calls the turn may make.",
        },
        "tool": {
            **_NON_EMPTY_STRING,
            "title": "Tool",
            "description": "Count only the calls of this tool (all calls when absent).",
        },
    },
    ["max"],
)


def prepare_max_tool_calls(config: Config) -> PreparedFn:
    maximum = int(config["max"])
    tool: str | None = config.get("tool")

    def evaluate(trace: Trace) -> CheckOutcome:
        calls = trace.get("toolCalls") or ()
        if len(calls) <= maximum:  # no more calls of any one tool either
            return PASSED
        if tool is None:
            count = len(calls)
            what = "tool calls"
        else:
            count = [call.get("name") for call in calls].count(tool)
            what = f"calls of '{tool}'"
        if count > maximum:
            return failed(f"{count} {what}, more than the maximum of {maximum}")
        return PASSED

    return evaluate


# --- output-matches --------------------------------------------------------------------

OUTPUT_MATCHES_SCHEMA = _schema(
    {
        "pattern": {
            **_NON_EMPTY_STRING,
            "title": "Pattern",
            "description": "A regular expression in RE2 syntax (no backreferences, no lookaround).",
        },
        "flags": {
            "type": "string",
            "pattern": "^[ims]*$",
            "title": "Flags",
            "description": ("i = ignore case, m = ^ and $ match at line ends, s = . matches newlines."),
        },
        "fullMatch": {
            "type": "boolean",
            "default": False,
            "title": "Full match",
            "description": "The pattern must match the whole output, not only a part of it.",
        },
    },
    ["pattern"],
)


#: The most RE2 instructions a pattern may compile to. Matching time and memory grow with
#: the program: `(.*){1000}!` is 9,004 instructions, `\pL{100}` (Unicode classes are large)
#: about 120,000 and 0.4 s over a 1 MB output; real guardrail patterns stay under 1,000.
MAX_PROGRAM_SIZE = 50_000


def compile_re2(pattern: str, flags: str = "") -> Any:
    """Compile a user's pattern with RE2 (linear-time matching); raises re2.error.

    The checks need a yes or no, never a group: compiling without capture lets RE2 answer
    with its DFA alone, where groups force its slower engines (`(.*a){100}` over 1 MB takes
    1.7 s with groups and 0.01 s without).

    re2 is imported here, not with the module: a run without output-matches guardrails
    does not load it (with the C++ runtime it needs, about 3 MB of the CI command's memory).
    """
    import re2

    options = re2.Options()
    options.log_errors = False  # an invalid pattern is reported to the author, not logged
    options.never_capture = True
    prefix = f"(?{''.join(sorted(set(flags)))})" if flags else ""
    return re2.compile(prefix + without_named_groups(pattern), options)


# What the scanner of without_named_groups steps over: an escape (\Q...\E included), a
# character class (with POSIX classes and a leading `]`), a named group's opening, any other
# character.
_PATTERN_PIECE = re.compile(r"\\Q.*?(?:\\E|\Z)|\\.|\[\^?\]?(?:\[:[^\]]*:\]|\\.|[^\]])*\]?|\(\?P?<\w+>|.", re.DOTALL)


def without_named_groups(pattern: str) -> str:
    """The pattern with each named group made a plain group.

    RE2's never_capture leaves named groups capturing, and with them its slow engines, so
    `(?P<x>.*a){100}` is written `(?:.*a){100}`: the same language, nothing captured.
    """
    if "<" not in pattern:
        return pattern
    return "".join(
        "(?:" if piece.startswith("(?") and piece.endswith(">") else piece for piece in _PATTERN_PIECE.findall(pattern)
    )


def validate_output_matches(config: Config) -> list[Issue]:
    """The pattern must compile as RE2 (with its flags), to at most MAX_PROGRAM_SIZE instructions."""
    pattern, flags = config.get("pattern"), config.get("flags", "")
    if not isinstance(pattern, str) or not pattern or not isinstance(flags, str):
        return []  # the config schema has already said what is wrong
    import re2  # compile_re2 has imported it: this names its error

    try:
        size = int(compile_re2(pattern, flags).programsize)
    except re2.error as exc:
        return [Issue("/pattern", f"is not a valid RE2 regular expression: {_re2_reason(exc)}")]
    if size > MAX_PROGRAM_SIZE:
        return [
            Issue(
                "/pattern",
                f"compiles to {size} RE2 instructions, more than the limit of {MAX_PROGRAM_SIZE}: "
                "use fewer or smaller repetitions, or narrower character classes",
            )
        ]
    return []


def re2_matcher(regex: Any, *, whole: bool) -> Callable[[str], bool]:
    """Whether compile_re2's `regex` occurs in a text (or, `whole`, matches all of it).

    A check needs a yes or no: this asks RE2 itself, on the text's UTF-8 bytes as pyre2
    encodes it, without what pyre2's search builds around the answer (a generator, the
    spans decoded back to characters, a Match object): a third of the check's time. Where
    pyre2's internals are not the ones expected, its public search or fullmatch answers.
    """
    import re2

    inner, engine = getattr(regex, "_regexp", None), getattr(getattr(re2, "_re2", None), "RE2", None)
    anchors = getattr(engine, "Anchor", None)
    if inner is None or anchors is None or not hasattr(inner, "Match"):
        public = regex.fullmatch if whole else regex.search
        return lambda text: public(text) is not None
    match, anchor = inner.Match, anchors.ANCHOR_BOTH if whole else anchors.UNANCHORED

    def matches(text: str) -> bool:
        data = text.encode("utf-8")
        return bool(match(anchor, data, 0, len(data))[0][0] != -1)

    return matches


def _re2_reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else str(exc)
    text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    if "perl operator" in text or "escape sequence" in text:
        text += " (RE2 has no backreferences or lookaround)"
    return text


def prepare_output_matches(config: Config) -> PreparedFn:
    regex = compile_re2(str(config["pattern"]), str(config.get("flags", "")))
    matches = re2_matcher(regex, whole=bool(config.get("fullMatch", False)))
    pattern = config["pattern"]
    how = "match all of" if config.get("fullMatch", False) else "occur in"

    def evaluate(trace: Trace) -> CheckOutcome:
        output = _output(trace)
        if output is None:
            return failed("there is no output")
        if not matches(output):
            return failed(f"pattern '{pattern}' does not {how} the output")
        return PASSED

    return evaluate


# --- tool-order ------------------------------------------------------------------------

TOOL_ORDER_SCHEMA = _schema(
    {
        "order": {
            "type": "array",
            "minItems": 2,
            "uniqueItems": True,
            "items": _NON_EMPTY_STRING,
            "title": "Order",
            "description": "Tools in the order their first calls must come.",
        }
    },
    ["order"],
)


def prepare_tool_order(config: Config) -> PreparedFn:
    order: list[str] = list(config["order"])
    ordered = frozenset(order)

    def evaluate(trace: Trace) -> CheckOutcome:
        names = _tool_names(trace)
        if ordered.isdisjoint(names):
            return PASSED
        first: dict[str, int] = {}
        for position, name in enumerate(names):
            if name in ordered and name not in first:
                first[name] = position
        if not first:
            return PASSED
        return _first_out_of_order(order, first)

    return evaluate


def _first_out_of_order(order: list[str], first: Mapping[str, int]) -> CheckOutcome:
    for j, later in enumerate(order):
        if later not in first:
            continue
        for earlier in order[:j]:
            if earlier not in first:
                return failed(f"'{later}' was called but '{earlier}', which must come first, never was")
            if first[earlier] > first[later]:
                return failed(f"'{later}' was called before '{earlier}'")
    return PASSED


# --- required-substring / forbidden-substring ------------------------------------------

_SUBSTRING_PROPERTIES: dict[str, Any] = {
    "values": {
        "type": "array",
        "minItems": 1,
        "items": _NON_EMPTY_STRING,
        "title": "Values",
        "description": "The substrings to look for in the output.",
    },
    "caseSensitive": {
        "type": "boolean",
        "default": True,
        "title": "Case sensitive",
        "description": "Compare case exactly; otherwise compare with Unicode case folding.",
    },
}
REQUIRED_SUBSTRING_SCHEMA = _schema(_SUBSTRING_PROPERTIES, ["values"])
FORBIDDEN_SUBSTRING_SCHEMA = _schema(_SUBSTRING_PROPERTIES, ["values"])


def _needles(config: Config) -> tuple[bool, list[tuple[str, str]]]:
    """Whether to fold case, and each value with the form searched for."""
    case_sensitive = bool(config.get("caseSensitive", True))
    values = [str(value) for value in config["values"]]
    return case_sensitive, [(v, v if case_sensitive else v.casefold()) for v in values]


def prepare_required_substring(config: Config) -> PreparedFn:
    case_sensitive, needles = _needles(config)

    def evaluate(trace: Trace) -> CheckOutcome:
        output = _output(trace)
        if output is None:
            return failed("there is no output")
        haystack = output if case_sensitive else output.casefold()
        for value, needle in needles:
            if needle not in haystack:
                return failed(f"output does not contain '{value}'")
        return PASSED

    return evaluate


def prepare_forbidden_substring(config: Config) -> PreparedFn:
    case_sensitive, needles = _needles(config)

    def evaluate(trace: Trace) -> CheckOutcome:
        output = _output(trace)
        if output is None:
            return PASSED
        haystack = output if case_sensitive else output.casefold()
        for value, needle in needles:
            if needle in haystack:
                return failed(f"output contains forbidden '{value}'")
        return PASSED

    return evaluate
