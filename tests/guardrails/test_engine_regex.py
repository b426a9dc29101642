"""output-matches over large outputs: patterns compile without capture, programs are bounded."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from guardrails.engine.checks import MAX_PROGRAM_SIZE, compile_re2, re2_matcher, without_named_groups
from guardrails.engine.evaluate import Engine
from guardrails.engine.registration import define_guardrail
from guardrails.engine.types import Context, Guardrail
from tests.conftest import make_guardrail

ENGINE = Engine.default()
#: A 1 MB answer with an `a` in every word: the groups of the patterns below each have
#: many places to end, which is what made RE2's capturing engines slow.
MEGABYTE_OUTPUT = ("hello world, a banana! " * 50_000)[: 1 << 20]


def matches(pattern: str) -> dict[str, Any]:
    return make_guardrail("matches", check="output-matches", config={"pattern": pattern})


@pytest.fixture
def at_most_20_seconds() -> Iterator[None]:
    """Fail the test instead of waiting when matching takes minutes (it took 57 s with groups).

    A generous bound against a hang, not a timing: each pattern takes about 0.01 s.
    """

    def stop(_signum: int, _frame: object) -> None:
        raise TimeoutError("matching a 1 MB output took more than 20 s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_patterns_compile_without_capture_groups() -> None:
    assert compile_re2("(.*a){100}").groups == 0
    assert compile_re2("(?P<order>order) (\\d+)", "i").groups == 0


def test_named_groups_become_plain_groups_and_nothing_else_changes() -> None:
    assert without_named_groups("(?P<x>a)(?<y>b)") == "(?:a)(?:b)"
    # In a class, escaped, quoted, or not a name: left for RE2 to read (or refuse).
    for pattern in ("[(?P<x>]", "\\(?P<x>a\\)", "\\Q(?P<x>\\E", "(?<=a)b>", "(?<>a)", "[[:alpha:](?<x>]"):
        assert without_named_groups(pattern) == pattern


@pytest.mark.parametrize("pattern", ["(.*a){100}", "(.*){1000}!", "(?P<x>.*a){100}", "(?<x>.*){1000}!"])
def test_many_groups_over_a_megabyte_finish(pattern: str, at_most_20_seconds: None) -> None:
    registration = define_guardrail(matches(pattern), registry=ENGINE.registry)
    assert registration.valid, registration.errors
    guardrail = registration.guardrail
    assert isinstance(guardrail, Guardrail)
    status, reason, _ = ENGINE.verdict(guardrail, {"id": "t", "output": MEGABYTE_OUTPUT}, Context("ci"))
    assert (status, reason) == ("pass", None)


def test_an_over_large_program_is_refused_at_config_pattern() -> None:
    registration = define_guardrail(matches("\\pL{100}"), registry=ENGINE.registry)
    assert not registration.valid
    [issue] = registration.errors
    assert issue.path == "/config/pattern"
    assert f"more than the limit of {MAX_PROGRAM_SIZE}" in issue.message


def test_the_largest_accepted_patterns_are_still_accepted() -> None:
    # 9,004 instructions: within the bound.
    assert define_guardrail(matches("(.*){1000}!"), registry=ENGINE.registry).valid


def test_the_api_refuses_an_over_large_program_with_its_pointer(api: Any, alice: Any) -> None:
    client = api(alice)
    checked = client.post("/api/v1/guardrails/validate", data=matches("\\pL{100}"), format="json")
    assert [error["path"] for error in checked.json()["errors"]] == ["/config/pattern"]
    created = client.post("/api/v1/guardrails", data=matches("\\pL{100}"), format="json")
    assert created.status_code == 400
    assert [error["path"] for error in created.json()["errors"]] == ["/config/pattern"]


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [(r"\border\s+#?\d{3,}\b", "i"), ("^a.c$", "m"), ("a.c", "s"), ("é+b", ""), ("", ""), ("x*", ""), ("^$", "")],
)
def test_the_yes_or_no_of_output_matches_is_pyre2s_search_and_fullmatch(pattern: str, flags: str) -> None:
    regex = compile_re2(pattern, flags)
    texts = ["order 1234", "Order #99999 x", "a\nc", "abc\nabd", "ééb", "xéébx", "", "x", "ordre 12", "line\n"]
    for text in texts:
        assert re2_matcher(regex, whole=False)(text) is (regex.search(text) is not None), text
        assert re2_matcher(regex, whole=True)(text) is (regex.fullmatch(text) is not None), text
