"""The wheel's contents, mapped from the engine's own tree (no copy of the sources here).

Hatchling adds `force-include` paths to editable wheels too, where they would shadow the
sources with copies; this hook adds them to the standard wheel alone. The editable install is
the repository's root as a path entry (`dev-mode-dirs` in pyproject.toml).
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: The engine's files in the repository -> where they go in the wheel.
SOURCES = {
    "../../guardrails/__init__.py": "guardrails/__init__.py",
    "../../guardrails/engine": "guardrails/engine",
    "../../guardrails/spec": "guardrails/spec",
}


class EngineSources(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            build_data["force_include"].update(SOURCES)
