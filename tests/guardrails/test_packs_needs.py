"""needsSpec: what a guardrail declares and the deployment does not provide."""

from __future__ import annotations

from guardrails.engine.packs import check_needs
from guardrails.engine.types import Issue

NEEDS = {
    "env": {"REGION": {}, "MODEL/NAME": {}},
    "secrets": {"API_TOKEN": {}},
    "capabilities": ["http", "gpu"],
    "bindings": ["search"],
}


def test_it_names_every_missing_need_with_its_pointer():
    issues = check_needs(NEEDS, {"REGION"}, set(), {"http"}, set())
    assert issues == [
        Issue("/needsSpec/env/MODEL~1NAME", "environment variable 'MODEL/NAME' is not available"),
        Issue("/needsSpec/secrets/API_TOKEN", "secret 'API_TOKEN' is not available"),
        Issue("/needsSpec/capabilities/1", "capability 'gpu' is not available"),
        Issue("/needsSpec/bindings/0", "binding 'search' is not available"),
    ]


def test_it_is_satisfied_when_the_deployment_provides_everything():
    provided = check_needs(NEEDS, {"REGION", "MODEL/NAME"}, {"API_TOKEN"}, {"http", "gpu"}, {"search"})
    assert provided == []
    assert check_needs(None, set(), set(), set(), set()) == []
