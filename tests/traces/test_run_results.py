"""A run's results one click away: the results list, the run filter of violations, two runs
compared; pages and API, and another tenant sees none of it."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.services import Author, save_guardrail
from kindgi_console import paging
from tests.conftest import make_guardrail, make_trace, signed_in
from tests.traces.seed import run_trace
from tests.traces.test_evaluations import run_for, store_traces
from traces.models import Evaluation, RunTrace


def all_pages(api: Any, url: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while url:
        body = api.get(url).json()
        rows += body["results"]
        url = body["next"]
    return rows


@pytest.fixture
def two_runs(acme: Any, guardrails: Any) -> tuple[Evaluation, Evaluation]:
    """A run, then no-refunds edited to also forbid lookup_order (every trace), a run again."""
    store_traces(acme, 9)
    before = run_for(acme)
    save_guardrail(make_guardrail(config={"tools": ["issue_refund", "lookup_order"]}), Author(user=None, label="t"))
    return before, run_for(acme)


def test_the_results_list_filters_by_guardrail_and_status_and_pages_to_the_end(
    api: Any, acme_key: str, acme: Any, guardrails: Any
) -> None:
    store_traces(acme, 9)
    run = run_for(acme)
    url = f"/api/v1/evaluations/{run.pk}/results"
    rows = all_pages(api(acme_key), f"{url}?limit=4")
    assert len(rows) == 27 and len({r["id"] for r in rows}) == 27
    assert [r["status"] for r in rows] == sorted(r["status"] for r in rows)
    fails = api(acme_key).get(f"{url}?guardrail=no-refunds&status=fail").json()["results"]
    assert len(fails) == 3
    first = fails[0]
    assert (first["guardrail"], first["revision"], first["action"], first["severity"]) == (
        "no-refunds",
        1,
        "halt",
        "critical",
    )
    assert first["reason"] and first["violation"] and first["reviewState"] == "open"
    assert first["traceUrl"].startswith("/traces/")


def test_the_results_list_of_one_guardrail_pages_through_every_status_in_order(
    api: Any, acme_key: str, acme: Any, guardrails: Any
) -> None:
    """Filtered by guardrail and not by status, each status is its own range of the run's
    index: the pages go on from one status to the next, each result once."""
    store_traces(acme, 9)
    run = run_for(acme)
    url = f"/api/v1/evaluations/{run.pk}/results"
    rows = all_pages(api(acme_key), f"{url}?guardrail=no-refunds&limit=2")
    assert [r["status"] for r in rows] == ["fail"] * 3 + ["pass"] * 6
    assert len({r["id"] for r in rows}) == 9 and {r["guardrail"] for r in rows} == {"no-refunds"}
    every = all_pages(api(acme_key), f"{url}?limit=5")
    # By status, then guardrail (its key: the order it was created in), then as stored.
    order = {name: n for n, name in enumerate(["no-refunds", "cite", "billing-only"])}
    keys = [(r["status"], order[r["guardrail"]], r["id"]) for r in every]
    assert keys == sorted(keys) and len(keys) == 27
    old_style = paging.encode_text("fail", rows[0]["id"])  # (status, id): this list's cursor before
    answer = api(acme_key).get(f"{url}?cursor={old_style}")
    assert answer.status_code == 400 and answer.json()["errors"][0]["path"] == "/cursor"


def test_a_skipped_result_says_which_part_of_the_scope_did_not_select(
    api: Any, acme_key: str, acme: Any, guardrails: Any
) -> None:
    store_traces(acme, 2)
    run = run_for(acme)
    rows = api(acme_key).get(f"/api/v1/evaluations/{run.pk}/results?status=skipped").json()["results"]
    assert {(r["guardrail"], r["skipReason"], r["reason"]) for r in rows} == {
        ("billing-only", "flows", "scope.flows does not list this trace's flow (refund)")
    }


@pytest.mark.parametrize(
    ("query", "pointer"),
    [("status=maybe", "/status"), ("cursor=bm9wZQ", "/cursor"), ("limit=0", "/limit"), ("limit=501", "/limit")],
)
def test_a_bad_results_query_is_a_400_naming_the_parameter(
    api: Any, acme_key: str, acme: Any, guardrails: Any, query: str, pointer: str
) -> None:
    run = run_for(acme)
    answer = api(acme_key).get(f"/api/v1/evaluations/{run.pk}/results?{query}")
    assert answer.status_code == 400 and answer.json()["errors"][0]["path"] == pointer


def test_violations_filter_by_run(api: Any, acme_key: str, two_runs: Any) -> None:
    before, after = two_runs
    rows = api(acme_key).get(f"/api/v1/violations?evaluation={before.pk}").json()["results"]
    assert len(rows) == 3
    assert len(api(acme_key).get(f"/api/v1/violations?evaluation={after.pk}").json()["results"]) == 9


def test_the_violations_page_filters_by_run(alice: Any, two_runs: Any) -> None:
    before, _ = two_runs
    html = signed_in(alice).get(f"/violations/?evaluation={before.pk}").content.decode()
    assert html.count('href="/violations/') - html.count('href="/violations/?') >= 3
    assert f'name="evaluation" value="{before.pk}"' in html and 'id="id_evaluation"' in html  # the filter bar keeps it


def test_compare_counts_each_guardrail_against_its_earlier_results(api: Any, acme_key: str, two_runs: Any) -> None:
    before, after = two_runs
    body = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare").json()
    assert body["with"] is None  # each guardrail's latest earlier results, by default
    rows = {row["guardrail"]: row for row in body["guardrails"]}
    refunds = rows["no-refunds"]
    assert (refunds["revision"], refunds["failing"], refunds["compared"]) == (2, 9, 9)
    assert (refunds["newlyFailing"], refunds["noLongerFailing"], refunds["stillFailing"]) == (6, 0, 3)
    assert refunds["earlier"] == [{"run": before.pk, "revision": 1, "results": 9}]
    assert refunds["notes"] == ["compared with results of revision 1 (this run: revision 2)"]
    assert len(refunds["newlyFailingTraces"]) == 6 and len(refunds["stillFailingTraces"]) == 3
    assert {t["earlierRun"] for t in refunds["newlyFailingTraces"]} == {before.pk}
    assert rows["cite"]["newlyFailing"] == rows["cite"]["noLongerFailing"] == 0
    billing = rows["billing-only"]  # every trace out of its scope: not compared, and why
    assert billing["compared"] == 0 and billing["notCompared"] == 9
    assert billing["why"] == ["9 skipped by the guardrail's scope in this run"]
    back = api(acme_key).get(f"/api/v1/evaluations/{before.pk}/compare?with={after.pk}").json()
    assert {r["guardrail"]: r["noLongerFailing"] for r in back["guardrails"]}["no-refunds"] == 6


def test_the_first_run_says_it_has_no_earlier_result_to_compare_with(api: Any, acme_key: str, two_runs: Any) -> None:
    before, _ = two_runs
    body = api(acme_key).get(f"/api/v1/evaluations/{before.pk}/compare").json()
    refunds = {row["guardrail"]: row for row in body["guardrails"]}["no-refunds"]
    assert refunds["compared"] == 0 and refunds["withoutEarlier"] == 9
    assert refunds["why"] == ["9 with no earlier result of this guardrail (from an earlier run or the runtime)"]


def test_compare_with_a_run_lists_the_guardrails_only_that_run_evaluated(
    api: Any, acme_key: str, acme: Any, two_runs: Any
) -> None:
    before, _ = two_runs
    one = run_for(acme, guardrails=["cite"])
    body = api(acme_key).get(f"/api/v1/evaluations/{one.pk}/compare?with={before.pk}").json()
    rows = {row["guardrail"]: row for row in body["guardrails"]}
    assert rows["cite"]["compared"] == 9 and rows["no-refunds"]["revision"] is None
    assert rows["no-refunds"]["why"] == [f"evaluated by run #{before.pk} (revision 1), not by this run"]
    itself = api(acme_key).get(f"/api/v1/evaluations/{one.pk}/compare?with={one.pk}")
    assert itself.status_code == 400 and itself.json()["errors"][0]["path"] == "/with"


def test_each_guardrail_is_compared_with_its_own_latest_earlier_result(
    api: Any, acme_key: str, acme: Any, guardrails: Any
) -> None:
    """Run 1 evaluates everything, run 2 only cite, run 3 everything: no-refunds in run 3 is
    compared with run 1 (its latest), cite with run 2, and a trace with a runtime result only
    with the runtime's."""
    from traces.models import EvaluationResult

    traces = store_traces(acme, 6)
    first = run_for(acme)
    second = run_for(acme, guardrails=["cite"])
    # Received after both runs, calling issue_refund no more: its only earlier result is the runtime's.
    document = make_trace("late-one", tenant=acme.slug)
    document["toolCalls"] = document["toolCalls"][:1]
    late = run_trace(acme, document)
    late.save()
    refunds = guardrails[0]
    EvaluationResult.objects.create(
        tenant=acme, trace=late, guardrail=refunds, revision=refunds.revisions.get(), mode="runtime", status="fail"
    )
    third = run_for(acme)
    body = api(acme_key).get(f"/api/v1/evaluations/{third.pk}/compare").json()
    rows = {row["guardrail"]: row for row in body["guardrails"]}
    assert rows["no-refunds"]["earlier"] == [
        {"run": first.pk, "revision": 1, "results": len(traces)},
        {"run": None, "revision": 1, "results": 1},
    ]
    assert rows["cite"]["earlier"] == [{"run": second.pk, "revision": 1, "results": len(traces)}]
    assert rows["cite"]["withoutEarlier"] == 1  # the late trace was never cited before
    assert rows["no-refunds"]["noLongerFailing"] == 1  # the late one: failed at the runtime, passes now
    listed = api(acme_key).get(
        f"/api/v1/evaluations/{third.pk}/compare/traces?guardrail=no-refunds&change=no-longer-failing"
    )
    assert [(t["trace"], t["earlierRun"]) for t in listed.json()["results"]] == [(late.trace_id, None)]


def test_the_run_page_counts_link_to_the_results(alice: Any, two_runs: Any) -> None:
    _, after = two_runs
    html = signed_in(alice).get(f"/evaluations/{after.pk}/").content.decode()
    assert f"/evaluations/{after.pk}/results/?guardrail=no-refunds&amp;status=fail" in html
    assert f"/evaluations/{after.pk}/results/?guardrail=billing-only&amp;status=skipped" in html


def test_the_results_page_shows_failures_only_by_default_and_every_status_on_asking(bob: Any, two_runs: Any) -> None:
    _, after = two_runs
    client = signed_in(bob)
    html = client.get(f"/evaluations/{after.pk}/results/").content.decode()
    assert html.count("pill--fail") == 9 and "pill--pass" not in html
    skipped = client.get(f"/evaluations/{after.pk}/results/?status=skipped").content.decode()
    assert "skipped by scope: flows" in skipped and "scope.flows does not list" in skipped


def test_the_results_page_pages_forward(alice: Any, acme: Any, guardrails: Any) -> None:
    store_traces(acme, 30)
    run = run_for(acme)
    client = signed_in(alice)
    html = client.get(f"/evaluations/{run.pk}/results/?status=all").content.decode()
    assert 'rel="next"' in html and html.count("<tr>") == 51


def test_the_compare_page_links_every_count_and_says_what_was_not_compared(alice: Any, two_runs: Any) -> None:
    _, after = two_runs
    client = signed_in(alice)
    html = client.get(f"/evaluations/{after.pk}/compare/").content.decode()
    assert "against earlier results" in html
    base = f"/evaluations/{after.pk}/compare/traces/?guardrail=cite&amp;revision=1&amp;change="
    for kind in ("newly-failing", "no-longer-failing", "still-failing"):  # zero counts are links too
        assert f'href="{base}{kind}" data-count="{kind}"' in html
    assert 'id="not-compared"' in html and "billing-only" in html and "skipped by the guardrail&#x27;s scope" in html
    assert f"/evaluations/{after.pk}/results/?guardrail=billing-only&amp;status=skipped" in html
    compared = html.count('data-count="newly-failing"')
    revisions = after.results.values("revision").distinct().count()
    assert 0 < compared < revisions and f"{compared} of {revisions} guardrail revisions" in html
    newly = client.get(
        f"/evaluations/{after.pk}/compare/traces/?guardrail=no-refunds&revision=2&change=newly-failing"
    ).content.decode()
    assert (
        "newly failing (6)" in newly
        and newly.count('<td class="mono"><a href="/traces/') == 6
        and "revision 1" in newly
    )
    empty = client.get(f"/evaluations/{after.pk}/compare/traces/?guardrail=cite&change=newly-failing")
    assert empty.status_code == 200 and "No trace in this list" in empty.content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/evaluations/{pk}/results/",
        "/evaluations/{pk}/compare/",
        "/evaluations/{other}/compare/?with={pk}",
        "/evaluations/{pk}/compare/traces/?guardrail=no-refunds&change=newly-failing",
        "/evaluations/{pk}/compare/traces/?guardrail=no-refunds&change=still-failing",
        "/evaluations/{other}/compare/traces/?with={pk}&guardrail=no-refunds&change=newly-failing",
    ],
)
def test_another_tenants_pages_are_404(charlie: Any, globex: Any, two_runs: Any, path: str) -> None:
    _, after = two_runs
    theirs = Evaluation.objects.create(tenant=globex)
    assert signed_in(charlie).get(path.format(pk=after.pk, other=theirs.pk)).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/evaluations/{pk}/results",
        "/api/v1/evaluations/{pk}/compare",
        "/api/v1/evaluations/{other}/compare?with={pk}",
        "/api/v1/evaluations/{pk}/compare/traces?guardrail=no-refunds&change=newly-failing",
        "/api/v1/evaluations/{pk}/compare/traces?guardrail=no-refunds&change=still-failing",
        "/api/v1/evaluations/{other}/compare/traces?with={pk}&guardrail=no-refunds&change=newly-failing",
        "/api/v1/violations?evaluation={pk}",
    ],
)
def test_another_tenants_key_gets_nothing(api: Any, charlie_key: str, globex: Any, two_runs: Any, path: str) -> None:
    _, after = two_runs
    theirs = Evaluation.objects.create(tenant=globex)
    answer = api(charlie_key).get(path.format(pk=after.pk, other=theirs.pk))
    if "violations" in path:
        assert answer.status_code == 200 and answer.json()["results"] == []
    else:
        assert answer.status_code == 404


def test_the_compare_lists_page_by_a_keyset_to_the_counted_end(
    api: Any, acme_key: str, alice: Any, acme: Any, guardrails: Any
) -> None:
    store_traces(acme, 30)
    before = run_for(acme)
    save_guardrail(make_guardrail(config={"tools": ["issue_refund", "lookup_order"]}), Author(user=None, label="t"))
    after = run_for(acme)
    body = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare").json()
    refunds = next(row for row in body["guardrails"] if row["guardrail"] == "no-refunds")
    assert body["status"] == "succeeded" and refunds["newlyFailing"] == 20
    url = f"/api/v1/evaluations/{after.pk}/compare/traces?guardrail=no-refunds&change=newly-failing&limit=6"
    listed = [row["trace"] for row in all_pages(api(acme_key), url)]
    assert len(listed) == len(set(listed)) == 20
    client = signed_in(alice)
    html = client.get(
        f"/evaluations/{after.pk}/compare/traces/?with={before.pk}&guardrail=no-refunds&change=newly-failing"
    ).content.decode()
    assert html.count("/traces/") >= 20 and 'rel="next"' not in html
    bad = api(acme_key).get(f"{url}&cursor=nonsense")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "/cursor"
    wrong = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare/traces?guardrail=no-refunds&change=x")
    assert wrong.status_code == 400 and wrong.json()["errors"][0]["path"] == "/change"


def test_a_comparison_is_computing_until_its_task_ran(
    api: Any, acme_key: str, alice: Any, two_runs: Any, monkeypatch: Any
) -> None:
    from traces.runs import comparing, comparisons

    _, after = two_runs
    sent: list[int] = []
    monkeypatch.setattr(comparisons, "send", sent.append)
    answer = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare")
    assert answer.status_code == 202 and answer.json()["status"] == "queued" and answer.json()["guardrails"] == []
    html = signed_in(alice).get(f"/evaluations/{after.pk}/compare/").content.decode()
    assert "Computing the comparison" in html
    assert f'data-progress-url="/api/v1/evaluations/{after.pk}/compare" data-progress-reload' in html
    comparing.compute(sent[0])
    done = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare").json()
    assert done["status"] == "succeeded" and done["progress"]["percent"] == 100 and len(sent) == 1


def test_a_comparison_whose_worker_was_lost_is_sent_again(
    api: Any, acme_key: str, two_runs: Any, monkeypatch: Any, settings: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from traces.models import RunComparison
    from traces.runs import comparing, comparisons

    _, after = two_runs
    sent: list[int] = []
    monkeypatch.setattr(comparisons, "send", sent.append)
    url = f"/api/v1/evaluations/{after.pk}/compare"
    api(acme_key).get(url)
    RunComparison.objects.update(status="running", started_at=timezone.now())
    assert api(acme_key).get(url).json()["status"] == "running" and len(sent) == 1
    lost = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT) - 2 * comparisons.RESEND_AFTER
    RunComparison.objects.update(started_at=lost)
    assert api(acme_key).get(url).json()["status"] == "queued" and len(sent) == 2
    comparing.compute(sent[1])
    rows = {r["guardrail"]: r for r in api(acme_key).get(url).json()["guardrails"]}
    assert rows["no-refunds"]["newlyFailing"] == 6 and len(rows["no-refunds"]["newlyFailingTraces"]) == 6


def test_a_run_still_going_is_compared_when_it_has_finished(api: Any, acme_key: str, alice: Any, two_runs: Any) -> None:
    _, after = two_runs
    Evaluation.objects.filter(pk=after.pk).update(status=Evaluation.Status.RUNNING)
    answer = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare")
    assert answer.status_code == 202 and answer.json()["status"] == "waiting"
    html = signed_in(alice).get(f"/evaluations/{after.pk}/compare/").content.decode()
    assert f'data-progress-url="/api/v1/evaluations/{after.pk}" data-progress-reload' in html  # reloads when done


def test_compare_reads_the_same_queries_for_small_and_larger_runs(
    api: Any, acme_key: str, acme: Any, guardrails: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(traces: int) -> int:
        store_traces(acme, traces)
        run_for(acme)
        save_guardrail(
            make_guardrail(config={"tools": ["issue_refund", f"tool-{traces}"]}), Author(user=None, label="t")
        )
        after = run_for(acme)
        client = api(acme_key)
        url = f"/api/v1/evaluations/{after.pk}/compare"
        assert client.get(url).json()["status"] == "succeeded"
        with CaptureQueriesContext(connection) as captured:
            client.get(url)
        RunTrace.objects.all().delete()
        return len(captured)

    assert queries(6) == queries(60)


def test_retention_drops_the_comparisons_of_the_runs_it_thins(
    api: Any, acme_key: str, acme: Any, two_runs: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from traces.models import RunComparison
    from traces.store import retention

    _, after = two_runs
    api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare")
    assert RunComparison.objects.count() == 1
    RunTrace.objects.filter(trace_id="run-00000").update(received_at=timezone.now() - timedelta(days=90))
    retention.delete_old_traces(acme.pk, timezone.now() - timedelta(days=30))
    assert RunComparison.objects.count() == 0
    body = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare").json()
    assert {r["guardrail"]: r["failing"] for r in body["guardrails"]}["no-refunds"] == 8


def test_a_comparison_read_in_small_batches_counts_the_same(
    api: Any, acme_key: str, two_runs: Any, monkeypatch: Any
) -> None:
    from traces.models import RunComparison
    from traces.runs import comparing

    _, after = two_runs
    url = f"/api/v1/evaluations/{after.pk}/compare"
    whole = api(acme_key).get(url).json()["guardrails"]
    RunComparison.objects.all().delete()
    monkeypatch.setattr(comparing, "BATCH", 2)
    batched = api(acme_key).get(url).json()
    assert batched["guardrails"] == whole
    assert batched["progress"]["done"] == batched["progress"]["total"] == 18  # no-refunds' and cite's 9 verdicts


def test_results_stored_after_the_run_was_created_are_not_earlier(
    api: Any, acme_key: str, acme: Any, two_runs: Any
) -> None:
    _, after = two_runs
    run_for(acme)  # a later run: not what `after` is compared with
    body = api(acme_key).get(f"/api/v1/evaluations/{after.pk}/compare").json()
    refunds = {row["guardrail"]: row for row in body["guardrails"]}["no-refunds"]
    assert [source["run"] for source in refunds["earlier"]] == [after.pk - 1]


def test_a_comparison_stopped_midway_is_continued_from_where_it_stopped(
    api: Any, acme_key: str, two_runs: Any, monkeypatch: Any
) -> None:
    """A task stopped by its time limit after some batches: the next one continues from the
    position the last committed batch wrote, and counts every trace once."""
    from traces.models import ComparisonChange, RunComparison
    from traces.runs import comparing, comparisons

    _, after = two_runs
    url = f"/api/v1/evaluations/{after.pk}/compare"
    whole = api(acme_key).get(url).json()["guardrails"]
    RunComparison.objects.all().delete()
    sent: list[int] = []
    monkeypatch.setattr(comparisons, "send", sent.append)
    monkeypatch.setattr(comparing, "BATCH", 2)
    api(acme_key).get(url)
    batches = 0
    real = comparing._count_batch

    def stops_after_three(*args: Any) -> Any:
        nonlocal batches
        batches += 1
        if batches > 3:
            raise TimeoutError("soft time limit")
        return real(*args)

    monkeypatch.setattr(comparing, "_count_batch", stops_after_three)
    with pytest.raises(TimeoutError):
        comparing.compute(sent[0])
    stopped = RunComparison.objects.get()
    assert 0 < stopped.done < 18 and stopped.position["after"] > 0 and stopped.status == "running"
    monkeypatch.setattr(comparing, "_count_batch", real)
    comparing.compute(sent[0])
    body = api(acme_key).get(url).json()
    assert body["guardrails"] == whole and body["progress"]["done"] == 18
    assert ComparisonChange.objects.count() == 9  # no-refunds' 6 newly and 3 still failing, once each
