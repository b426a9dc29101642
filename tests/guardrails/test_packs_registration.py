"""define_guardrail with packs: filesystem artifacts, oci versions, built-ins, needsSpec."""

from __future__ import annotations

from guardrails.engine.packs import load_packs
from guardrails.engine.registration import RegistrationPolicy, define_guardrail
from guardrails.engine.registry import default_registry
from guardrails.engine.types import Issue
from tests.guardrails.conftest import oci


def document(**fields):
    return {
        "id": "short",
        "kind": "zero-llm",
        "check": "short-output",
        "config": {"max": 10},
        "action": {"on-violation": "log-only"},
        **fields,
    }


def filesystem(path):
    return {"kind": "filesystem", "modulePath": path}


def test_it_loads_a_filesystem_check_outside_production(check_file):
    registry = default_registry()
    registration = define_guardrail(document(codeArtifactRef=filesystem(check_file)), registry=registry)
    assert registration.valid, registration.errors
    assert registration.warnings == []
    assert registry.get("short-output").module == check_file


def test_the_filesystem_check_validates_the_config(check_file):
    registration = define_guardrail(
        document(config={}, codeArtifactRef=filesystem(check_file)), registry=default_registry()
    )
    assert registration.errors == [Issue("/config/max", "'max' is required")]


def test_a_filesystem_check_that_does_not_load_is_one_error_at_its_path(tmp_path):
    missing = str(tmp_path / "missing.py")
    registration = define_guardrail(document(codeArtifactRef=filesystem(missing)), registry=default_registry())
    assert registration.errors == [
        Issue("/codeArtifactRef/modulePath", f"codeArtifactRef modulePath '{missing}' is not a file")
    ]


def test_a_filesystem_check_of_another_kind_is_refused_and_not_registered(check_file):
    registry = default_registry()
    registration = define_guardrail(
        document(kind="llm-judge", codeArtifactRef=filesystem(check_file)), registry=registry
    )
    assert [issue.path for issue in registration.errors] == ["/kind"]
    assert "short-output" not in registry


def test_production_refuses_the_filesystem_artifact_and_loads_nothing(check_file):
    registry = default_registry()
    registration = define_guardrail(
        document(codeArtifactRef=filesystem(check_file)), registry=registry, policy=RegistrationPolicy(production=True)
    )
    assert [issue.path for issue in registration.errors] == ["/codeArtifactRef/kind"]
    assert "refused in production" in registration.errors[0].message
    assert "short-output" not in registry


def test_a_builtin_named_with_a_filesystem_artifact_gives_one_warning(tmp_path):
    registration = define_guardrail(
        document(check="must-cite", config={}, codeArtifactRef=filesystem(str(tmp_path / "never-read.py"))),
        registry=default_registry(),
    )
    assert registration.valid
    assert [issue.path for issue in registration.warnings] == ["/checkBuiltIn"]


def test_an_oci_artifact_of_another_version_is_a_warning_at_registration():
    registry = default_registry()
    load_packs(["tests.packs.greetings"], registry)
    doc = document(check="says-word", config={"word": "hi"}, codeArtifactRef=oci("1.1.0"))
    registration = define_guardrail(doc, registry=registry)
    assert registration.valid
    assert registration.warnings == [
        Issue(
            "/codeArtifactRef/artifactVersion",
            "artifactVersion '1.1.0' is not the version of the installed pack 'tests.packs.greetings' (1.2.0)",
        )
    ]
    matching = define_guardrail({**doc, "codeArtifactRef": oci("1.2.0")}, registry=registry)
    assert matching.valid and matching.warnings == []


def test_needs_are_checked_only_where_the_deployment_says_what_it_provides():
    doc = document(check="must-cite", config={}, needsSpec={"secrets": {"TOKEN": {}}})
    assert define_guardrail(doc, registry=default_registry()).valid
    refused = define_guardrail(
        doc, registry=default_registry(), policy=RegistrationPolicy(available_secrets=frozenset())
    )
    assert refused.errors == [Issue("/needsSpec/secrets/TOKEN", "secret 'TOKEN' is not available")]
