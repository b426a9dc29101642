"""Check packs: loading, invalid packs, built-in replacement, filesystem and oci artifacts."""

from __future__ import annotations

import pytest

from guardrails.engine.packs import (
    PackError,
    code_artifact_issues,
    load_filesystem_check,
    load_pack,
    load_packs,
    resolve_filesystem_artifact,
)
from guardrails.engine.registry import default_registry
from guardrails.engine.strategies import default_strategies
from guardrails.engine.types import Issue
from tests.guardrails.conftest import oci


def test_it_loads_a_pack_with_its_name_and_version():
    pack = load_pack("tests.packs.greetings")
    assert (pack.name, pack.version) == ("tests.packs.greetings", "1.2.0")
    [check] = pack.checks
    assert (check.id, check.kind, check.pack, check.pack_version) == (
        "says-word",
        "zero-llm",
        "tests.packs.greetings",
        "1.2.0",
    )
    assert (check.module, check.function) == ("tests.packs.greetings", "says_word")
    assert check.config_schema is not None
    assert check.validate_config({"word": ""})


def test_it_loads_a_pack_from_its_checks_function():
    pack = load_pack("tests.packs.generated")
    assert pack.version is None
    assert "sandboxed-says-hello" in {check.id for check in pack.checks}
    assert {check.module for check in pack.checks} == {"tests.packs.handlers"}


def test_load_packs_registers_the_checks():
    registry = default_registry()
    assert load_packs(["tests.packs.greetings"], registry, default_strategies()) == []
    assert registry.get("says-word").pack == "tests.packs.greetings"


def test_a_schema_that_does_not_compile_names_the_pack_and_the_check():
    with pytest.raises(PackError, match=r"pack 'tests\.packs\.bad_schema'.*broken-schema"):
        load_packs(["tests.packs.bad_schema"], default_registry())


def test_a_duplicate_id_in_a_pack_names_the_pack_and_the_check():
    expected = r"pack 'tests\.packs\.duplicate' defines check 'twice' twice"
    with pytest.raises(PackError, match=expected):
        load_pack("tests.packs.duplicate")


def test_a_duplicate_id_across_packs_names_both():
    registry = default_registry()
    expected = r"tests\.packs\.rival.*'says-word'.*tests\.packs\.greetings"
    with pytest.raises(PackError, match=expected):
        load_packs(["tests.packs.greetings", "tests.packs.rival"], registry)


def test_a_kind_without_a_strategy_names_the_pack_and_the_check():
    with pytest.raises(PackError, match=r"tests\.packs\.unknown_kind.*'entangled'.*'quantum'"):
        load_packs(["tests.packs.unknown_kind"], default_registry(), default_strategies())


def test_a_module_that_cannot_be_imported_is_a_pack_error():
    with pytest.raises(PackError, match=r"pack 'tests\.packs\.absent' cannot be imported"):
        load_pack("tests.packs.absent")


def test_a_builtin_replaces_a_pack_check_of_its_id_with_a_warning():
    registry = default_registry()
    warnings = load_packs(["tests.packs.shadows_builtin"], registry)
    assert warnings == [
        Issue(
            "/packs/tests.packs.shadows_builtin/checks/must-cite",
            "the built-in check 'must-cite' replaces check 'must-cite' of pack 'tests.packs.shadows_builtin'",
        )
    ]
    assert registry.get("must-cite").builtin
    assert registry.get("cites-nothing").pack == "tests.packs.shadows_builtin"


def test_it_loads_a_check_from_a_filesystem_path(check_file):
    check = load_filesystem_check(check_file, "short-output")
    assert (check.module, check.function, check.pack) == (check_file, "short_output", check_file)
    assert check.evaluate is not None
    assert check.evaluate({"max": 3}, {"output": "hello"}).reason == "5 characters"


def test_filesystem_load_errors_name_the_path_and_the_check(check_file, tmp_path):
    with pytest.raises(PackError, match="not an absolute path"):
        load_filesystem_check("short_output.py", "short-output")
    with pytest.raises(PackError, match="is not a file"):
        load_filesystem_check(str(tmp_path / "missing.py"), "short-output")
    with pytest.raises(PackError, match="defines no check 'long-output'"):
        load_filesystem_check(check_file, "long-output")


def test_a_filesystem_artifact_puts_its_check_in_the_registry(check_file):
    registry = default_registry()
    document = {
        "kind": "zero-llm",
        "check": "short-output",
        "codeArtifactRef": {"kind": "filesystem", "modulePath": check_file},
    }
    assert resolve_filesystem_artifact(document, registry) == ([], [])
    assert registry.get("short-output").module == check_file


def test_a_filesystem_artifact_that_does_not_load_is_an_error_at_its_path(tmp_path):
    document = {
        "check": "short-output",
        "codeArtifactRef": {"kind": "filesystem", "modulePath": str(tmp_path / "x.py")},
    }
    errors, _ = resolve_filesystem_artifact(document, default_registry())
    assert [error.path for error in errors] == ["/codeArtifactRef/modulePath"]


def test_an_oci_artifact_of_another_version_gives_a_warning():
    registry = default_registry()
    load_packs(["tests.packs.greetings"], registry)
    document = {"check": "says-word", "codeArtifactRef": oci("1.1.0")}
    assert code_artifact_issues(document, registry) == [
        Issue(
            "/codeArtifactRef/artifactVersion",
            "artifactVersion '1.1.0' is not the version of the installed pack 'tests.packs.greetings' (1.2.0)",
        )
    ]
    assert code_artifact_issues({**document, "codeArtifactRef": oci("1.2.0")}, registry) == []


def test_an_oci_artifact_of_a_pack_without_a_version_is_not_compared():
    registry = default_registry()
    load_packs(["tests.packs.generated"], registry)
    document = {"check": "sandboxed-says-hello", "codeArtifactRef": oci("9.9.9")}
    assert code_artifact_issues(document, registry) == []
