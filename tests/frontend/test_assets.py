"""The committed front-end: built bundles present, templates that the CSP lets run as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
DIST = ROOT / "static" / "kindgi" / "dist"
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))

INLINE_SCRIPT = re.compile(
    r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.IGNORECASE
)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b|\sstyle\s*=", re.IGNORECASE)
EXTERNAL_URL = re.compile(r"(?:src|href)=\"(?:https?:)?//", re.IGNORECASE)


@pytest.mark.parametrize("name", ["authoring.js", "authoring.css", "charts.js", "console.js"])
def test_it_ships_each_built_bundle(name: str) -> None:
    bundle = DIST / name
    assert bundle.is_file(), f"{bundle} is missing: run `cd frontend && npm ci && npm run build`"
    assert bundle.stat().st_size > 1000


def test_the_bundles_are_minified() -> None:
    for name in ("authoring.js", "charts.js", "console.js"):
        text = (DIST / name).read_text(encoding="utf-8")
        lines = text.count("\n") + 1
        assert len(text) / lines > 2000, f"{name} does not look minified"


def test_the_authoring_bundle_does_not_evaluate_strings_as_code() -> None:
    # The CSP has no 'unsafe-eval': the editor validates with an interpreting validator.
    text = (DIST / "authoring.js").read_text(encoding="utf-8")
    assert "cfworker" in text or "does not match exactly one subschema" in text


def test_the_package_versions_are_pinned_exactly() -> None:
    package = json.loads((ROOT / "frontend" / "package.json").read_text(encoding="utf-8"))
    for section in ("dependencies", "devDependencies"):
        for name, version in package[section].items():
            assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is not pinned: {version}"
    assert (ROOT / "frontend" / "package-lock.json").is_file()


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: str(path.relative_to(ROOT)))
def test_templates_have_no_inline_script_style_or_outside_asset(template: Path) -> None:
    text = template.read_text(encoding="utf-8")
    assert not INLINE_SCRIPT.search(text), "inline <script> (the CSP forbids it)"
    assert not EVENT_HANDLER.search(text), "inline event handler (the CSP forbids it)"
    assert not INLINE_STYLE.search(text), "inline style (style-src 'self')"
    assert not EXTERNAL_URL.search(text), "asset from outside the console"


def test_the_base_template_loads_only_static_files() -> None:
    text = (ROOT / "templates" / "base.html").read_text(encoding="utf-8")
    assert "{% static 'kindgi/console.css' %}" in text
    assert "{% static 'kindgi/dist/console.js' %}" in text
    for block in ("title", "content", "scripts"):
        assert f"{{% block {block} %}}" in text
