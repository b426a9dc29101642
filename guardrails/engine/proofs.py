"""Writing schema_proofs.py, the generated code of the console's own schemas (`make proofs`):
the RunTrace, the guardrail, the console's limits and each built-in check's config. Run after
changing a schema, a built-in check's config schema or the generator (schema_code.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from guardrails.engine import schema_code
from guardrails.engine.registry import builtin_checks, builtin_judge_checks
from guardrails.engine.schema import CONSOLE_LIMITS_SCHEMA, GUARDRAIL_SCHEMA, RUNTRACE_SCHEMA

#: The generated code of the console's own schemas (schema_code.generate), written ahead.
PROOFS_PATH = os.path.join(os.path.dirname(os.path.realpath(__file__)), "schema_proofs.py")


def own_schemas() -> list[Mapping[str, Any]]:
    """The schemas whose proofs are written ahead into schema_proofs.py."""
    checks = [*builtin_checks(), *builtin_judge_checks()]
    configs = [check.config_schema for check in checks if check.config_schema is not None]
    return [RUNTRACE_SCHEMA, GUARDRAIL_SCHEMA, CONSOLE_LIMITS_SCHEMA, *configs]


def write_proofs() -> None:
    """Write schema_proofs.py from the schemas and the generator of today (made before the
    file is opened: compiling the checks' schemas reads the proofs written last time)."""
    source = schema_code.module_source(own_schemas())
    with open(PROOFS_PATH, "w", encoding="utf-8") as handle:
        handle.write(source)
