"""The README stays a guide, and the guides' links lead somewhere.

The README is what a newcomer reads first: at most 400 lines, detail in docs/. A relative link
must name a file of the repository (and, for a Markdown file, one of its headings), so that a
moved or renamed page breaks a test rather than a reader's click.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def relative_links(page: Path) -> list[str]:
    """The page's link targets outside fenced code, absolute URLs left out."""
    text = FENCE.sub("", page.read_text())
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as -."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def has_anchor(page: Path, anchor: str) -> bool:
    """Whether `anchor` names a heading of `page`; only Markdown pages are read for one."""
    return page.suffix != ".md" or anchor in anchors(page)


def test_the_readme_is_a_guide_of_at_most_400_lines() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 400, f"README.md has {lines} lines: move detail to docs/"


@pytest.mark.parametrize("page", GUIDES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_that_exists(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists() or (anchor and not has_anchor(destination, anchor)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_link_checker_sees_links_and_headings() -> None:
    readme = ROOT / "README.md"
    assert "docs/benchmarks.md" in relative_links(readme)
    assert "CONTRIBUTING.md" in relative_links(readme)
    assert "deploying-postgresql-redis-gunicorn-celery-behind-a-tls-proxy" in anchors(readme)
    assert "guardrail_cipy" in anchors(ROOT / "docs" / "benchmarks.md")


def test_every_bench_has_its_latest_figures_in_docs_benchmarks() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    benches = [path.name for path in sorted((ROOT / "bench").glob("*.py")) if "__main__" in path.read_text()]
    assert benches
    missing = [name for name in benches if f"## `{name}`" not in page]
    assert not missing, f"docs/benchmarks.md has no section for {missing}"
