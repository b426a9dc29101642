"""Third-party instrumentations, OpenInference's and OpenLLMetry's for OpenAI: the `openai` client
calls a local server that speaks the OpenAI protocol, and the SDK exports the spans to a live console."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryInstrumentor
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.fakeproviders import Answer, FakeProvider
from tests.traces.otlp_turn import Recorder, exporter, hex_ids

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=[OpenInferenceInstrumentor, OpenLLMetryInstrumentor], ids=["openinference", "openllmetry"])
def instrumented(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    recorder = Recorder()
    instrumentor = request.param()
    instrumentor.instrument(tracer_provider=recorder.provider)
    yield recorder
    instrumentor.uninstrument()


def test_an_instrumented_openai_call_becomes_a_run_trace(live_server, api, acme_key, instrumented):
    with FakeProvider() as provider:
        provider.script(Answer("Orders can be refunded within 30 days.", input_tokens=21, output_tokens=9))
        client = OpenAI(base_url=provider.openai_base_url, api_key="sk-local", max_retries=0)
        client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[
                {"role": "system", "content": "You help with refunds."},
                {"role": "user", "content": "Can I get a refund?"},
            ],
        )

    spans = instrumented.spans
    assert exporter(live_server.url, acme_key).export(spans) is SpanExportResult.SUCCESS

    trace_id, span_id = hex_ids(spans[0])
    response = api(acme_key).get(f"/api/v1/traces/{trace_id}-{span_id}")
    assert response.status_code == 200, response.content
    document = response.json()["document"]
    assert document["input"] == "Can I get a refund?"
    assert document["output"] == "Orders can be refunded within 30 days."
    assert document["messages"] == [
        {"role": "system", "content": "You help with refunds."},
        {"role": "user", "content": "Can I get a refund?"},
        {"role": "assistant", "content": "Orders can be refunded within 30 days."},
    ]
    assert document["usage"] == {"inputTokens": 21, "outputTokens": 9, "model": "gpt-4.1-mini"}
