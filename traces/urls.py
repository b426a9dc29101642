"""The routes of traces' contexts, and the one place that orders the routes under guardrails/.

Every page or endpoint under `guardrails/` is declared once, here or in guardrails' own URL
modules, and ordered here: the fixed routes and those ending in a fixed word first, then the
detail routes, whose `path` converter takes an id that may hold a "/" (ids stored before the id
alphabet, console-limits.schema.json) and would otherwise take every longer path.
"""

from django.urls import URLPattern, URLResolver, path

from guardrails import urls as guardrail_pages
from guardrails.api import urls as guardrail_api
from traces.demo import judge_endpoint
from traces.ingest import urls as ingest
from traces.ledger import urls as ledger
from traces.review import urls as review
from traces.runs import urls as runs

Routes = list[URLPattern | URLResolver]

urlpatterns: Routes = [
    *review.guardrail_urlpatterns,
    *runs.guardrail_urlpatterns,
    *guardrail_pages.urlpatterns,
    review.guardrail_detail,
    *ingest.urlpatterns,
    *runs.urlpatterns,
    *review.urlpatterns,
    *ledger.urlpatterns,
    # The demo's judge provider (a 404 unless KINDGI_DEMO_JUDGE is on).
    path(f"{judge_endpoint.PATH}/chat/completions", judge_endpoint.chat_completions, name="demo-judge"),
]

#: Under api/v1/.
api_urlpatterns: Routes = [
    *ingest.runtime_api_urlpatterns,  # POST evaluate first: the runtime path
    *runs.guardrail_api_urlpatterns,
    *review.guardrail_api_urlpatterns,
    *guardrail_api.urlpatterns,
    *ingest.api_urlpatterns,
    *runs.api_urlpatterns,
    *review.api_urlpatterns,
    *ledger.api_urlpatterns,
]
