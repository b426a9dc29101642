"""Every page of the console, on the demo's data, in Chromium at 1024 and 1440 px wide, and in
the dark theme:

- a full-page screenshot of each (test-artifacts/screenshots/pages-<width>-<name>.png);
- no element wider than its card (a table may scroll inside its card, nothing spills out of
  it), and no page wider than the window;
- axe-core (tests/browser/vendor/axe.min.js, the npm package `axe-core` pinned in
  frontend/package.json) finds no serious or critical violation: every rule in the light
  theme at both widths; in the dark theme, whose pages differ from the light ones at the same
  width only by their colours, the colour rules.
"""

from __future__ import annotations

from pathlib import Path
from pprint import pformat
from typing import Any, Literal

import pytest
from playwright.sync_api import Browser

from guardrails.models import Guardrail
from tests.browser.conftest import screenshot
from traces import demo
from traces.models import Evaluation, RunTrace, Upload, Violation

Scheme = Literal["light", "dark"]
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
#: The axe rules a theme's colours decide (the dark theme's DOM is the light one's).
COLOUR_RULES = ["color-contrast", "link-in-text-block"]

# Counts the page's fetches still in flight (charts, the run form's estimate, progress), so
# that a page is read once what it loads has come, without waiting for the network to idle.
FETCHES_JS = """(() => {
  window.__kindgiFetches = 0;
  const fetch = window.fetch;
  window.fetch = (...args) => {
    window.__kindgiFetches += 1;
    return fetch(...args).finally(() => setTimeout(() => { window.__kindgiFetches -= 1; }, 0));
  };
})();"""
# Ready: loaded, no fetch in flight, every chart drawn (a chart that cannot be drawn is
# replaced by its message), the editor mounted.
SETTLED_JS = """() => document.readyState === 'complete' && window.__kindgiFetches === 0
  && [...document.querySelectorAll('canvas[data-chart-url], canvas[data-chart-source]')]
    .every((c) => c.dataset.chartReady === 'true')
  && (!document.getElementById('guardrail-editor') || document.querySelector('.kg-editor'))"""

# What spills out of a card: an element whose box passes its card's right edge while no
# scrolling (or clipping) box between them holds it. Also the page itself wider than the window.
OVERFLOW_JS = """() => {
  const problems = [];
  const clips = (el) => ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(el).overflowX);
  for (const card of document.querySelectorAll('.card, .table-wrap, .filters')) {
    const edge = card.getBoundingClientRect().right + 1;
    for (const el of card.querySelectorAll('*')) {
      const box = el.getBoundingClientRect();
      if (!box.width || box.right <= edge) continue;
      let clipped = false;
      for (let up = el.parentElement; up && up !== card.parentElement; up = up.parentElement) {
        if (up !== el && clips(up) && up.getBoundingClientRect().right <= edge) { clipped = true; break; }
      }
      const name = `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}`;
      if (!clipped) problems.push(`${name} ${Math.round(box.right - edge)}px past its card`);
    }
  }
  // A table fits its card: it neither scrolls sideways nor is cut by what holds it, and a
  // cell's text is cut only with an ellipsis over a title that shows it whole.
  for (const table of document.querySelectorAll('.table')) {
    let holder = table.parentElement;
    while (holder && !clips(holder)) holder = holder.parentElement;
    if (!holder) continue;
    const past = Math.round(table.getBoundingClientRect().right - holder.getBoundingClientRect().right);
    if (past > 1) {
      const scrolls = ['auto', 'scroll'].includes(getComputedStyle(holder).overflowX);
      const where = `${holder.tagName.toLowerCase()}.${[...holder.classList].join('.')}`;
      problems.push(`table ${scrolls ? 'scrolls sideways' : 'cut'}: ${past}px past ${where}`);
    }
  }
  for (const cell of document.querySelectorAll('.table td, .table th, .table td *, .table th *')) {
    if (cell.closest('.visually-hidden') || cell.getBoundingClientRect().width <= 1) continue;
    const style = getComputedStyle(cell);
    if (!['hidden', 'clip'].includes(style.overflowX) || cell.scrollWidth <= cell.clientWidth + 1) continue;
    if (style.textOverflow === 'ellipsis' && cell.closest('[title]')) continue;
    problems.push(`"${cell.textContent.trim().slice(0, 30)}" cut in its cell`);
  }
  for (const tag of document.querySelectorAll('.table .tag')) {
    if (tag.getBoundingClientRect().height > 30) problems.push(`"${tag.textContent.trim()}" wraps onto several lines`);
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1) {
    problems.push(`page ${doc.scrollWidth}px wide in a ${window.innerWidth}px window`);
  }
  return problems.slice(0, 10);
}"""

AXE_JS = """async (rules) => {
  const options = { resultTypes: ['violations'] };
  if (rules) options.runOnly = { type: 'rule', values: rules };
  const result = await axe.run(document, options);
  return result.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
}"""


def pages() -> list[tuple[str, str]]:
    """(name, URL) of every page a signed-in admin reaches, on the demo's rows."""
    trace = RunTrace.objects.filter(tenant__slug="acme", withheld=True).first() or RunTrace.objects.first()
    violation = Violation.objects.filter(tenant__slug="acme").order_by("-created_at").first()
    evaluation = Evaluation.objects.filter(tenant__slug="acme").first()
    upload = Upload.objects.filter(tenant__slug="acme").first()
    guardrail = Guardrail.objects.filter(revision__gt=1).first() or Guardrail.objects.first()
    gid = guardrail.guardrail_id
    zero_llm = Guardrail.objects.filter(kind="zero-llm").exclude(guardrail_id=gid).first() or guardrail
    judged = Guardrail.objects.filter(kind="llm-judge").exclude(guardrail_id=gid).first() or guardrail
    budgeted = next(
        (g.guardrail_id for g in Guardrail.objects.all() if (g.document.get("budget") or {}).get("maxCostUsd")), gid
    )
    listed = [
        ("overview", "/"),
        ("guardrails", "/guardrails/"),
        ("guardrail", f"/guardrails/{gid}/"),
        ("guardrail-zero-llm", f"/guardrails/{zero_llm.guardrail_id}/"),
        ("guardrail-llm-judge", f"/guardrails/{judged.guardrail_id}/"),
        ("guardrail-edit", f"/guardrails/{gid}/edit/"),
        ("guardrail-new", "/guardrails/new/"),
        ("guardrail-import", "/guardrails/import/"),
        ("traces", "/traces/"),
        ("trace", f"/traces/{trace.pk}/"),
        ("evaluations", "/evaluations/"),
        ("evaluation-new", "/evaluations/new/"),
        ("uploads", "/uploads/"),
        ("upload-new", "/uploads/new/"),
        ("violations", "/violations/"),
        ("violation", f"/violations/{violation.pk}/"),
        ("review-queue", "/violations/queue/"),
        ("ledger", "/ledger/"),
        ("ledger-budget", f"/ledger/?guardrail={budgeted}"),
        ("ledger-by-tenant", "/ledger/?group=tenant"),
        ("judge-models", "/judge-models/"),
        ("tenants", "/manage/tenants/"),
        ("members", "/manage/members/"),
        ("api-keys", "/manage/api-keys/"),
    ]
    if evaluation is not None:
        listed.append(("evaluation", f"/evaluations/{evaluation.pk}/"))
    if upload is not None:
        listed.append(("upload", f"/uploads/{upload.pk}/"))
    return listed


@pytest.fixture
def demo_console(db: Any) -> None:
    demo.load(sizes={"acme": 200, "globex": 60})


def signed_in_context(browser: Browser, live_server: Any, width: int, scheme: Scheme = "light") -> Any:
    # bypass_csp only lets the test inject axe-core; the console's own scripts obey the CSP.
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": width, "height": 900}, bypass_csp=True, color_scheme=scheme
    )
    context.add_init_script(FETCHES_JS)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto("/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(demo.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login/" not in url)
    return context, page


def settle(page: Any) -> None:
    page.wait_for_function(SETTLED_JS, polling=50)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "scheme"), [(1024, "light"), (1440, "light"), (1440, "dark")])
def test_every_page_fits_its_cards_and_passes_axe(
    browser: Browser, live_server: Any, demo_console: None, width: int, scheme: Scheme
) -> None:
    """In the light theme at both widths, and in the dark one (the system's preference)."""
    context, page = signed_in_context(browser, live_server, width, scheme)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    overflow: dict[str, list[str]] = {}
    accessibility: dict[str, list[str]] = {}
    try:
        for name, url in pages():
            response = page.goto(url)
            assert response is not None and response.status == 200, (url, response and response.status)
            settle(page)
            screenshot(page, f"pages-{width}-{name}" + ("-dark" if scheme == "dark" else ""))
            found = page.evaluate(OVERFLOW_JS)
            if found:
                overflow[url] = found
            # At both widths: what scrolls at 1024 px (a region to reach by keyboard) does not at 1440.
            page.add_script_tag(path=str(AXE))
            found = page.evaluate(AXE_JS, COLOUR_RULES if scheme == "dark" else None)
            if found:
                accessibility[url] = found
    finally:
        context.close()
    if overflow or accessibility:
        pytest.fail("does not fit:\n" + pformat(overflow, width=150) + "\naxe:\n" + pformat(accessibility, width=150))
    assert errors == []


@pytest.mark.django_db(transaction=True)
def test_the_sign_in_page_passes_axe_and_works_with_the_keyboard_alone(
    browser: Browser, live_server: Any, demo_console: None
) -> None:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1024, "height": 800}, bypass_csp=True)
    page = context.new_page()
    try:
        page.goto("/login/")
        page.add_script_tag(path=str(AXE))
        assert page.evaluate(AXE_JS) == []
        page.keyboard.press("Tab")
        for _ in range(5):
            if page.evaluate("document.activeElement.name") == "username":
                break
            page.keyboard.press("Tab")
        page.keyboard.type("admin")
        page.keyboard.press("Tab")
        page.keyboard.type(demo.PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: "/login/" not in url)
        # The account menu opens from the keyboard too.
        page.locator(".user-menu summary").focus()
        page.keyboard.press("Enter")
        assert page.locator(".user-menu").get_attribute("open") is not None
    finally:
        context.close()
