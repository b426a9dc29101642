"""A week in the console, in a real browser, on the demo data and offline (the console serves
the demo's judge itself): the issue's journey from authoring to enforcement to review.

Monday, the author writes a `halt` tool-order guardrail and an llm-judge in the form alone and
saves both in shadow; on Thursday the admin issues the runtime a key, the runtime checks turns
through the Python client, and the author sees what each guardrail would have caught and
promotes them. The reviewer compares this week with last, follows a count to the newly
failing traces, reviews from the queue, labels a calibration sample of a zero-llm guardrail
and sees its precision and recall; a second reviewer labels the same sample and the
agreement between them shows; an escalated violation is claimed from its queue, and the
second reviewer sees who holds it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from kindgi import Kindgi
from playwright.sync_api import Browser, Page, expect

from guardrails.models import Guardrail
from kindgi_console.tenancy.models import Membership, Tenant
from tests.browser.conftest import screenshot
from tests.browser.test_authoring import choose
from tests.browser.test_form_authoring import FILL, add_items, choose_action, empty_objects
from traces import demo
from traces.models import EvaluationResult, Violation

TOOL_ORDER = "refunds-look-up-the-order-first"
JUDGE = "replies-stay-courteous"


def person(browser: Browser, live_server: Any, username: str) -> Page:
    """A browser of one's own, signed in through the sign-in form."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.script_errors = errors  # type: ignore[attr-defined]
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(demo.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login/" not in url)
    return page


def write_in_shadow(page: Page, guardrail_id: str, name: str, kind: str, check: str, fill: Any, action: str) -> None:
    """A guardrail written from scratch in the form, without the JSON tab, saved in shadow."""
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_id")
    page.fill("#root_id", guardrail_id)
    page.fill("#root_name", name)
    choose(page, "#root_kind", kind)
    choose(page, "#root_check", check)
    fill(page)
    choose_action(page, action)
    choose(page, "#root_severity", "error")
    expect(page.locator(".kg-editor .pill--pass")).to_have_text("Valid on the server", timeout=15_000)
    document = page.evaluate("() => JSON.parse(document.querySelector('input[name=draft]').value)")
    assert empty_objects(document) == [], document
    page.get_by_role("button", name="Save in shadow").click()
    page.wait_for_url(f"**/guardrails/{guardrail_id}/?saved=1")
    page.get_by_role("heading", name="In shadow").wait_for()


def turn(number: int, tools: list[str], output: str) -> dict[str, Any]:
    """A support-bot turn of acme as the runtime sends it at its output stage."""
    return {
        "id": f"week-turn-{number:03d}",
        "tenant": "acme",
        "agent": "support-bot",
        "flow": "refund",
        "startedAt": "2026-12-03T09:00:00Z",
        "endedAt": "2026-12-03T09:00:05Z",
        "input": f"Can I get a refund for order {4000 + number}?",
        "messages": [{"role": "user", "content": f"Can I get a refund for order {4000 + number}?"}],
        "toolCalls": [
            {"id": f"c{i}", "name": name, "arguments": {"order": str(4000 + number)}} for i, name in enumerate(tools)
        ],
        "output": output,
    }


@pytest.mark.django_db(transaction=True)
def test_a_week_in_the_console(browser: Browser, live_server: Any, settings: Any) -> None:
    settings.KINDGI_DEMO_JUDGE = True
    demo.load(sizes={"acme": 160, "globex": 20})
    demo.point_judges_at(live_server.url)
    colleague = User.objects.create_user("acme-second-reviewer", password=demo.PASSWORD)
    Membership.objects.create(user=colleague, tenant=Tenant.objects.get(slug="acme"), role="reviewer")

    # Monday: the author writes both guardrails in the form alone and saves them in shadow.
    author = person(browser, live_server, "author")
    write_in_shadow(
        author,
        TOOL_ORDER,
        "Refunds look the order up first",
        "zero-llm",
        "tool-order",
        lambda page: add_items(page, "root_config_order", ["lookup_order", "issue_refund"]),
        "halt",
    )
    write_in_shadow(author, JUDGE, "Replies stay courteous", "llm-judge", "rubric", FILL["rubric"], "log-only")
    for guardrail_id in (TOOL_ORDER, JUDGE):
        stored = Guardrail.objects.get(guardrail_id=guardrail_id)
        assert stored.shadow and stored.enforced_revision is None, guardrail_id

    # Thursday: the admin issues the runtime its key; the runtime checks its turns.
    admin = person(browser, live_server, "admin")
    admin.goto("/manage/api-keys/")
    admin.fill("#key-name", "support-bot production")
    admin.locator("#key-tenant").select_option("acme")
    admin.get_by_label("evaluate", exact=True).check()
    admin.get_by_role("button", name="Create key").click()
    key = admin.locator("#new-api-key").inner_text()
    wrong_order, right_order = ["issue_refund", "lookup_order"], ["lookup_order", "issue_refund"]
    with Kindgi(live_server.url, key, timeout=10.0) as console:
        verdicts = [
            console.check_output(turn(n, wrong_order if n % 3 == 0 else right_order, "Your refund is on its way."))
            for n in range(12)
        ]
    # In shadow nothing halts, whatever the guardrail finds.
    assert [v.error for v in verdicts] == [None] * 12
    assert [v.halted_by for v in verdicts if v.halted_by in (TOOL_ORDER, JUDGE)] == []
    shadowed = EvaluationResult.objects.filter(guardrail__guardrail_id=TOOL_ORDER, shadow=True)
    assert shadowed.filter(status="fail").count() == 4

    author.goto(f"/guardrails/{TOOL_ORDER}/")
    caught = author.locator("#shadow table tbody tr").first
    expect(caught).to_contain_text("4 would have been violations")
    screenshot(author, "week-shadow-caught")
    author.goto(f"/guardrails/{JUDGE}/")
    judged = author.locator("#shadow table tbody tr").first
    expect(judged.locator("td").first).to_have_text("12")  # the demo judge read every turn, offline
    expect(judged).to_contain_text("would have been violations")
    for guardrail_id in (TOOL_ORDER, JUDGE):
        author.goto(f"/guardrails/{guardrail_id}/")
        author.once("dialog", lambda dialog: dialog.accept())
        author.get_by_role("button", name="Promote revision 1 to enforced").click()
        author.get_by_role("heading", name="Enforced", exact=True).wait_for()
        assert not Guardrail.objects.get(guardrail_id=guardrail_id).shadow
    with Kindgi(live_server.url, key, timeout=10.0) as console:
        enforced = console.check_output(turn(99, wrong_order, "Your refund is on its way."))
    ours = [result for result in enforced.results if result.guardrail == TOOL_ORDER]
    assert enforced.halted and [(r.status, r.action) for r in ours] == [("fail", "halt")], enforced

    # The author tightens the enforced guardrail: a refund needs the eligibility check first.
    author.goto(f"/guardrails/{TOOL_ORDER}/edit/")
    author.wait_for_selector("#root_config_order_0")
    author.fill("#root_config_order_0", "check_refund_eligibility")
    expect(author.locator(".kg-editor .pill--pass")).to_have_text("Valid on the server", timeout=15_000)
    author.get_by_role("button", name="Save guardrail").click()
    author.wait_for_url(f"**/guardrails/{TOOL_ORDER}/?saved=1")
    assert Guardrail.objects.get(guardrail_id=TOOL_ORDER).revision == 2

    # Tuesday: what broke since last week? The reviewer runs the zero-llm guardrails over this
    # week's traces (under the judge limit) and compares each with its own earlier results.
    reviewer = person(browser, live_server, "acme-reviewer")
    reviewer.goto("/evaluations/new/")
    reviewer.get_by_role("button", name="Zero-llm guardrails only").click()
    expect(reviewer.get_by_label(TOOL_ORDER, exact=True)).to_be_checked()
    expect(reviewer.get_by_label(JUDGE, exact=True)).not_to_be_checked()
    today = timezone.localdate().isoformat()
    reviewer.get_by_label("From", exact=True).fill((timezone.localdate() - timedelta(days=6)).isoformat())
    reviewer.get_by_label("To", exact=True).fill(today)
    expect(reviewer.locator("[data-no-judge]")).to_be_visible()
    reviewer.get_by_role("button", name="Start evaluation").click()
    reviewer.wait_for_url("**/evaluations/*/")
    reviewer.locator("[data-progress-status]", has_text="succeeded").first.wait_for()
    reviewer.reload()
    reviewer.get_by_role("link", name="Compare with earlier results").click()
    row = reviewer.locator(f"#run-compare tr[data-guardrail='{TOOL_ORDER}']")
    newly = row.locator("[data-count='newly-failing']")
    expect(newly).to_have_text("8", timeout=30_000)  # the eight turns revision 1 let through
    revisions = reviewer.locator("#run-compare tbody tr[data-guardrail]").count()
    expect(reviewer.locator("#compared-title + .card__subtitle")).to_have_text(
        f"{revisions} of {revisions} guardrail revisions"
    )
    screenshot(reviewer, "week-compare")
    newly.click()
    listed = reviewer.locator("#compare-traces tbody tr")
    expect(listed).to_have_count(8)
    assert "never was" in listed.first.inner_text(), listed.first.inner_text()

    # The reviewer works the queue from the keyboard.
    left = Violation.objects.filter(tenant__slug="acme", state="open").count()
    reviewer.goto("/violations/")
    reviewer.get_by_role("link", name="Review next").click()
    reviewer.wait_for_url("**/violations/queue/**")
    first = int(reviewer.locator("#what-title").inner_text().split("#")[1])
    reviewer.keyboard.press("a")
    expect(reviewer.locator("[data-queue-left]")).to_have_text(str(left - 1))
    second = int(reviewer.locator("#what-title").inner_text().split("#")[1])
    reviewer.keyboard.press("f")
    expect(reviewer.locator("[data-queue-left]")).to_have_text(str(left - 2))
    states = dict(Violation.objects.filter(pk__in=[first, second]).values_list("pk", "state"))
    assert states == {first: "acknowledged", second: "false-positive"}, states

    # Wednesday: a calibration sample of the zero-llm guardrail, labelled by two reviewers.
    reviewer.goto(f"/guardrails/{TOOL_ORDER}/#calibration")
    reviewer.get_by_label("Traces to label").fill("6")
    reviewer.get_by_role("button", name="Draw a calibration sample").click()
    reviewer.wait_for_url("**/calibrations/*/")
    sample = reviewer.url
    first_labels = label_sample(reviewer, 6, lambda n: "f" if n % 2 == 0 else "p")
    reviewer.wait_for_url(f"**/guardrails/{TOOL_ORDER}/**")
    reviewer.locator("[data-agreement]").wait_for()
    assert reviewer.locator("[data-calibrated-precision]").inner_text().endswith("%")
    assert reviewer.locator("[data-calibrated-recall]").inner_text().endswith("%")
    screenshot(reviewer, "week-calibration-one-reviewer")

    second_reviewer = person(browser, live_server, "acme-second-reviewer")
    second_reviewer.goto(sample)
    second_labels = label_sample(second_reviewer, 6, lambda n: "f" if n < 3 else "p")
    second_reviewer.wait_for_url(f"**/guardrails/{TOOL_ORDER}/**")
    people = second_reviewer.locator("[data-people-agreement]")
    agreed = sum(a == b for a, b in zip(first_labels, second_labels, strict=True))
    expect(people).to_contain_text(f"{agreed} of 6")
    expect(second_reviewer.locator("[data-people-disagreements]")).to_contain_text("acme-second-reviewer")
    screenshot(second_reviewer, "week-agreement-between-reviewers")

    # Escalation goes somewhere: the overview counts the support leads' queue, a reviewer
    # claims its next violation, and the second reviewer sees who holds it.
    reviewer.goto("/")
    reviewer.locator("tr[data-queue='support-leads'] td").nth(2).get_by_role("link").click()  # its unclaimed
    reviewer.wait_for_url("**/violations/queue/?queue=support-leads&assignee=none")
    claimed = int(reviewer.locator("#what-title").inner_text().split("#")[1])
    reviewer.keyboard.press("c")
    expect(reviewer.locator("[data-claim-status]")).to_contain_text("You hold it")
    assert Violation.objects.get(pk=claimed).assignee == "acme-reviewer"
    second_reviewer.goto(f"/violations/{claimed}/")
    expect(second_reviewer.locator("[data-assignee]")).to_have_text("acme-reviewer")
    expect(second_reviewer.get_by_role("button", name="Claim it")).to_have_count(0)
    screenshot(second_reviewer, "week-claimed-by-another")

    for page in (author, admin, reviewer, second_reviewer):
        assert page.script_errors == []  # type: ignore[attr-defined]


def label_sample(page: Page, size: int, key: Any) -> list[str]:
    """Each trace of a calibration sample labelled with a single key, as in the review queue."""
    keys = []
    for n in range(size):
        page.get_by_text(f"trace {n + 1} of {size}").wait_for()
        expect(page.get_by_role("button", name="Pass")).to_be_focused()
        keys.append(key(n))
        page.keyboard.press(keys[-1])
    return keys
