"""KINDGI_OIDC_GROUPS: both spellings, the highest role, and bad values named by place."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from kindgi_console.tenancy.sso_groups import granted, parse_groups


def test_the_plain_and_the_json_spellings_say_the_same():
    plain = parse_groups("eng=acme:author, ops=acme:admin,ops=beta:reviewer")
    spelled = parse_groups(
        '{"eng": {"tenant": "acme", "role": "author"},'
        ' "ops": [{"tenant": "acme", "role": "admin"}, {"tenant": "beta", "role": "reviewer"}]}'
    )
    assert plain == spelled == {"eng": [("acme", "author")], "ops": [("acme", "admin"), ("beta", "reviewer")]}
    assert parse_groups("") == {}


def test_a_person_in_several_groups_gets_the_highest_role_per_tenant():
    grants = parse_groups("eng=acme:author,ops=acme:admin,all=acme:reviewer,ops=beta:reviewer")
    assert granted(grants, ["all", "eng"]) == {"acme": "author"}
    assert granted(grants, ["eng", "ops", "marketing"]) == {"acme": "admin", "beta": "reviewer"}
    assert granted(grants, ["marketing"]) == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"eng": {"tenant": "acme", "role": "owner"}}', "KINDGI_OIDC_GROUPS: /eng/role: must be one of"),
        ('{"a/b": [{"tenant": "acme", "role": "admin"}, {"tenant": "x y"}]}', "KINDGI_OIDC_GROUPS: /a~1b/1/tenant:"),
        ('{"eng": {"tenant": "acme", "role": "admin", "extra": 1}}', "/eng/extra: is not a field"),
        ('{"eng": []}', "/eng: grants nothing"),
        ('["eng"]', "KINDGI_OIDC_GROUPS: /: must be an object"),
        ("{not json", "KINDGI_OIDC_GROUPS: not JSON"),
        ("eng=acme", "item 1 ('eng=acme'): must be group=tenant:role"),
        ("eng=acme:admin,ops=beta:boss", "item 2 ('ops=beta:boss')/role: must be one of"),
    ],
)
def test_a_bad_mapping_names_the_variable_and_the_place(value, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        parse_groups(value)
    assert message in str(raised.value)
