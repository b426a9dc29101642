"""Sign-in is throttled, and the API throttle is shared by every process (in the cache)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.test import Client, override_settings

PASSWORD = "correct horse 42"


def sign_in(client: Client, password: str, username: str = "alice") -> Any:
    return client.post("/login/", {"username": username, "password": password})


def test_wrong_passwords_are_limited_and_then_even_the_right_one_waits(alice: Any) -> None:
    client = Client()
    answers = [sign_in(client, f"guess {n}").status_code for n in range(40)]
    limit = settings.KINDGI_SIGNIN_FAILURES
    assert answers[:limit] == [200] * limit  # the form again, with its error
    assert set(answers[limit:]) == {429}
    blocked = sign_in(client, PASSWORD)
    assert blocked.status_code == 429 and b"Too many failed sign-ins" in blocked.content
    assert blocked["Retry-After"] == str(settings.KINDGI_SIGNIN_WINDOW_S)
    assert "_auth_user_id" not in client.session


def test_the_right_password_within_the_limit_signs_in(alice: Any) -> None:
    client = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES - 1):
        sign_in(client, f"guess {n}")
    assert sign_in(client, PASSWORD).status_code == 302


def test_one_users_failures_do_not_lock_another_out(alice: Any, bob: Any) -> None:
    client = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES + 1):
        sign_in(client, f"guess {n}")
    assert sign_in(client, PASSWORD, "bob").status_code == 302


def counters_outside_the_process() -> list[str]:
    """The cache's keys as another process sees them: in Redis, or in the database table."""
    cache: dict[str, Any] = settings.CACHES["default"]
    location = cache["LOCATION"]
    if cache["BACKEND"].endswith("RedisCache"):
        import redis

        prefix = cache["KEY_PREFIX"]
        return [key.decode() for key in redis.Redis.from_url(location).keys(f"{prefix}:*")]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT cache_key FROM {location}")
        return [row[0] for row in cursor.fetchall()]


def test_the_api_throttle_is_kept_where_every_process_sees_it(api: Any, acme_key: str) -> None:
    assert not str(settings.CACHES["default"]["BACKEND"]).endswith("LocMemCache")
    with override_settings(KINDGI_API_RATE="3/minute"):
        answers = [api(acme_key).get("/api/v1/traces").status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    assert any("throttle:key:" in key for key in counters_outside_the_process())


def test_the_sign_in_counters_are_shared_too(alice: Any) -> None:
    sign_in(Client(), "wrong")
    assert any("signin:" in key for key in counters_outside_the_process())


def test_the_admin_sign_in_is_held_to_the_same_counters(admin_user: Any) -> None:
    client = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES):
        client.post("/admin/login/", {"username": "admin", "password": f"guess {n}"})
    response = client.post("/admin/login/", {"username": "admin", "password": "password"})
    assert b"Too many failed sign-ins" in response.content
    assert "_auth_user_id" not in client.session


def test_a_cache_that_cannot_be_reached_throttles_nothing_and_breaks_nothing(
    api: Any, acme_key: str, alice: Any, monkeypatch: Any
) -> None:
    """The cache is on the broker's Redis by default: Redis down must not make 500s."""
    from django.core.cache import cache
    from redis.exceptions import ConnectionError as RedisConnectionError

    def down(*args: Any, **kwargs: Any) -> Any:
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379")

    for name in ("get", "set", "add", "incr"):
        monkeypatch.setattr(cache, name, down)
    assert api(acme_key).get("/api/v1/traces").status_code == 200
    assert sign_in(Client(), "wrong").status_code == 200
    assert sign_in(Client(), PASSWORD).status_code == 302
