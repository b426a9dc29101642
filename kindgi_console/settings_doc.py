"""docs/settings.md, rendered from the console's declaration of its environment
(kindgi_console/env.py): one table per section, a row per variable with its type, default
and meaning. `manage.py settings_doc` writes the file; a test fails when the committed copy
differs from what this renders."""

from __future__ import annotations

from pathlib import Path

from guardrails.engine.environment import Variable
from kindgi_console.env import SECTIONS

PATH = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
_KINDS = {"text": "text", "bool": "boolean", "int": "integer", "list": "list (comma-separated)"}
_INTRO = """\
# Settings

The console reads its settings from the environment; this is every variable it reads, its
type, its default and what it does. A bad value (`DJANGO_DEBUG=maybe`, a number below its
least value) stops start-up with a message naming the variable. The variables the CI command
(`manage.py guardrail_ci`) shares with the console are declared in
`guardrails/engine/environment.py`, the rest in `kindgi_console/env.py`.

This file is generated from those declarations: do not edit it, run
`.venv/bin/python manage.py settings_doc` after adding or changing a setting.
"""


def _type(variable: Variable) -> str:
    kind = _KINDS[variable.kind]
    return kind if variable.minimum is None else f"{kind}, at least {variable.minimum:,}"


def _default(variable: Variable) -> str:
    if variable.shown is not None:
        return variable.shown
    value = variable.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, tuple):
        return ", ".join(f"`{item}`" for item in value) or "none"
    return f"`{value}`" if value else "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(variable: Variable) -> str:
    cells = [f"`{variable.name}`", _type(variable), _default(variable), variable.meaning]
    return "| " + " | ".join(map(_cell, cells)) + " |"


def render() -> str:
    """The whole of docs/settings.md."""
    parts = [_INTRO]
    for title, variables in SECTIONS.items():
        rows = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |", *map(_row, variables)]
        parts.append(f"## {title}\n\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)
