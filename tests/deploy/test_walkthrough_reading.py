"""How the walkthrough test reads the README's blocks: as a shell would split them."""

from __future__ import annotations

from tests.deploy.test_deploy_walkthrough import commands, fenced_block


def test_continuations_comments_and_quoted_bodies_over_several_lines() -> None:
    block = "# a comment\nKEY=kgi_...   # a note\ncurl -X POST https://h/x \\\n  -d '{\"a\": [\n  1]}'\n\n"
    assert commands(block) == [["KEY=kgi_..."], ["curl", "-X", "POST", "https://h/x", "-d", '{"a": [\n  1]}']]


def test_the_readme_has_both_blocks_with_the_commands_a_deployer_needs() -> None:
    setup = [" ".join(words) for words in commands(fenced_block("walkthrough:setup"))]
    for needed in (
        "createdb",
        "manage.py migrate",
        "manage.py create_tenant",
        "manage.py createsuperuser --noinput",
        "manage.py add_member",
        "manage.py create_api_key",
        ".venv/bin/gunicorn",
        "celery -A kindgi_console worker",
        "celery -A kindgi_console beat",
    ):
        assert any(needed in line for line in setup), needed
    use = [" ".join(words) for words in commands(fenced_block("walkthrough:use"))]
    assert any("/api/v1/traces" in line for line in use)
    assert any("POST https://console.example.com/api/v1/evaluations" in line for line in use)
