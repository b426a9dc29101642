"""The check registry: `define_check`, the registry itself, and the built-in checks."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from guardrails.engine import checks
from guardrails.engine.schema import CompiledSchema, SchemaCompileError, compile_schema
from guardrails.engine.stages import DEFAULT_STAGES, TOOL_STAGES, validate_stages
from guardrails.engine.types import (
    Check,
    CheckConfigValidator,
    CheckOutcome,
    Config,
    ConfigValidator,
    EvaluateFn,
    Issue,
    PrepareFn,
    Trace,
)

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$")
_KIND = re.compile(r"^\S(.*\S)?$")


class InvalidCheckDefinition(ValueError):
    """A check that cannot be defined: a bad id or kind, a config schema that does not
    compile, no way to validate its config, or no evaluate function where one is needed."""


class DuplicateCheck(InvalidCheckDefinition):
    """A check id that is already registered."""


def define_check(
    id: str,
    kind: str,
    evaluate: EvaluateFn | None = None,
    *,
    config_schema: Mapping[str, Any] | None = None,
    validate_config: ConfigValidator | None = None,
    description: str = "",
    pack: str | None = None,
    pack_version: str | None = None,
    prepare: PrepareFn | None = None,
    stages: Sequence[str] = DEFAULT_STAGES,
) -> Check:
    """Define a check; its config validation is derived from `config_schema` and/or the
    hand-written `validate_config` (both run when both are given). `stages`: where its
    guardrails apply by default (guardrails.engine.stages; `output` unless declared)."""
    _check_identity(id, kind)
    stage_issues = validate_stages(list(stages))
    if stage_issues:
        raise InvalidCheckDefinition(f"check '{id}': stages: {stage_issues[0].message}")
    if config_schema is None and validate_config is None:
        raise InvalidCheckDefinition(f"check '{id}': give a config_schema or a validate_config function")
    if kind == "zero-llm" and evaluate is None and prepare is None:
        raise InvalidCheckDefinition(f"check '{id}': a zero-llm check needs an evaluate function")
    # module and function name a handler another process can import: the author's own.
    module = getattr(evaluate, "__module__", None)
    function = getattr(evaluate, "__qualname__", None)
    if evaluate is None and prepare is not None:
        evaluate = _evaluate_from_prepare(prepare)
    validator = _config_validator(id, config_schema, validate_config)
    return Check(
        id=id,
        kind=kind,
        evaluate=evaluate,
        validate_config=validator,
        config_schema=config_schema,
        description=description,
        pack=pack,
        pack_version=pack_version,
        module=module,
        function=function,
        prepare=prepare,
        validates_in_code=validate_config is not None,
        stages=tuple(stages),
    )


def _check_identity(id: object, kind: object) -> None:
    if not isinstance(id, str) or not _ID.match(id):
        raise InvalidCheckDefinition(
            f"check id {id!r} must be 1 to 200 letters, digits or . _ : / - starting with a letter or digit"
        )
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise InvalidCheckDefinition(f"check '{id}': kind must be a non-empty string")


def _evaluate_from_prepare(prepare: PrepareFn) -> EvaluateFn:
    def evaluate(config: Config, trace: Trace) -> CheckOutcome:
        return prepare(config)(trace)

    return evaluate


def _config_validator(
    id: str, config_schema: Mapping[str, Any] | None, validate_config: ConfigValidator | None
) -> CheckConfigValidator:
    if config_schema is None:
        assert validate_config is not None
        return _ConfigValidation(None, validate_config)
    try:
        compiled = compile_schema(config_schema)
    except SchemaCompileError as exc:
        raise InvalidCheckDefinition(f"check '{id}': config schema does not compile: {exc}") from exc
    return _ConfigValidation(compiled, validate_config)


class _ConfigValidation:
    """A check's config validation: its compiled config schema, then its hand-written code
    for a config the schema finds valid."""

    def __init__(self, compiled: CompiledSchema | None, code: ConfigValidator | None) -> None:
        self.compiled = compiled
        self.code = code

    def __call__(self, config: Config, *, json_values: bool = False) -> list[Issue]:
        issues = [] if self.compiled is None else self.compiled.issues(config, json_values=json_values)
        if not issues and self.code is not None:
            issues = self.code(config)
        return issues


class CheckRegistry:
    """The checks a deployment knows, by id, and the config schemas guardrails declared
    for pack checks (applied to every guardrail naming that check)."""

    def __init__(self, checks: list[Check] | None = None) -> None:
        self._checks: dict[str, Check] = {}
        self._declared_schemas: dict[str, Mapping[str, Any]] = {}
        self._lazy: dict[str, Callable[[], list[Check]]] = {}
        for check in checks or ():
            self.register(check)

    def register_lazily(self, ids: list[str], load: Callable[[], list[Check]]) -> None:
        """Checks of these ids that `load` defines when one of them is first needed (the
        built-in llm-judge checks: a run without them never imports the judge)."""
        for id in ids:
            self._lazy[id] = load

    def _load(self, id: str) -> None:
        load = self._lazy.get(id)
        if load is None:
            return
        for check in load():
            self._lazy.pop(check.id, None)
            if check.id not in self._checks:
                self._checks[check.id] = check
        self._lazy.pop(id, None)

    def _load_all(self) -> None:
        while self._lazy:
            self._load(next(iter(self._lazy)))

    def register(self, check: Check, *, replace: bool = False) -> Check:
        """Add `check`. A duplicate id is refused unless `replace`; a built-in is never
        replaced by a pack check (the seed: the built-in replaces it)."""
        self._load(check.id)
        existing = self._checks.get(check.id)
        if existing is not None:
            if existing.builtin and not check.builtin:
                raise DuplicateCheck(
                    f"check '{check.id}' of pack '{check.pack}' has the id of a built-in check, which replaces it"
                )
            if not replace:
                raise DuplicateCheck(f"check '{check.id}' is already registered")
        self._checks[check.id] = check
        return check

    def get(self, id: str) -> Check | None:
        check = self._checks.get(id)
        if check is None and id in self._lazy:
            self._load(id)
            check = self._checks.get(id)
        return check

    def __iter__(self) -> Iterator[Check]:
        self._load_all()
        return iter(list(self._checks.values()))

    def __contains__(self, id: object) -> bool:
        return id in self._checks or id in self._lazy

    def __len__(self) -> int:
        self._load_all()
        return len(self._checks)

    def copy(self) -> CheckRegistry:
        other = CheckRegistry()
        other._checks = dict(self._checks)
        other._declared_schemas = dict(self._declared_schemas)
        other._lazy = dict(self._lazy)
        return other

    def keep_config_schema(self, check_id: str, schema: Mapping[str, Any]) -> None:
        """Keep a guardrail's `configSchema` with the pack check it names."""
        self._declared_schemas[check_id] = schema

    def declared_config_schema(self, check_id: str) -> Mapping[str, Any] | None:
        return self._declared_schemas.get(check_id)


def _builtin(
    id: str,
    prepare: PrepareFn,
    schema: Mapping[str, Any],
    description: str,
    validate_config: ConfigValidator | None = None,
    stages: Sequence[str] = DEFAULT_STAGES,
) -> Check:
    return define_check(
        id,
        "zero-llm",
        config_schema=schema,
        validate_config=validate_config,
        description=description,
        prepare=prepare,
        stages=stages,
    )


def builtin_checks() -> list[Check]:
    """The seven zero-llm checks of evaluation.md."""
    return [
        _builtin(
            "must-cite",
            checks.prepare_must_cite,
            checks.MUST_CITE_SCHEMA,
            "The response cites at least `min` sources, each allowed when a list is given.",
        ),
        _builtin(
            "never-call-tool",
            checks.prepare_never_call_tool,
            checks.NEVER_CALL_TOOL_SCHEMA,
            "The agent never calls any of the listed tools.",
            stages=TOOL_STAGES,
        ),
        _builtin(
            "max-tool-calls",
            checks.prepare_max_tool_calls,
            checks.MAX_TOOL_CALLS_SCHEMA,
            "The turn makes at most `max` tool calls (of one tool, or of all).",
            stages=TOOL_STAGES,
        ),
        _builtin(
            "output-matches",
            checks.prepare_output_matches,
            checks.OUTPUT_MATCHES_SCHEMA,
            "The response matches an RE2 regular expression.",
            checks.validate_output_matches,
        ),
        _builtin(
            "tool-order",
            checks.prepare_tool_order,
            checks.TOOL_ORDER_SCHEMA,
            "Tools are first called in the given order.",
            stages=TOOL_STAGES,
        ),
        _builtin(
            "required-substring",
            checks.prepare_required_substring,
            checks.REQUIRED_SUBSTRING_SCHEMA,
            "The response contains every one of the values.",
        ),
        _builtin(
            "forbidden-substring",
            checks.prepare_forbidden_substring,
            checks.FORBIDDEN_SUBSTRING_SCHEMA,
            "The response contains none of the values.",
        ),
    ]


def builtin_judge_checks() -> list[Check]:
    """The built-in llm-judge checks (guardrails.engine.judge): `rubric`."""
    # Imported here, not at the top: the judge defines its checks with define_check from this
    # module, so a top-level import would be circular.
    from guardrails.engine.judge import judge_checks

    return judge_checks()


#: The ids of builtin_judge_checks(), known without importing the judge.
JUDGE_CHECK_IDS = ["rubric"]


def default_registry() -> CheckRegistry:
    """A fresh registry holding the built-in checks, zero-llm and llm-judge (the judge's
    imported when one of its checks is first needed)."""
    registry = CheckRegistry(builtin_checks())
    registry.register_lazily(JUDGE_CHECK_IDS, builtin_judge_checks)
    return registry
