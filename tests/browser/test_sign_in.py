"""Sign-in in a real browser."""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.browser.conftest import screenshot


@pytest.mark.django_db(transaction=True)
def test_it_signs_in_with_the_form(page, sign_in):
    User.objects.create_user("erin", password="pw-erin-123")
    sign_in("erin", "pw-erin-123")
    assert "/login/" not in page.url
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_it_says_when_the_password_is_wrong(page):
    User.objects.create_user("erin", password="pw-erin-123")
    page.goto("/login/")
    screenshot(page, "sign-in")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
