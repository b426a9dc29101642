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


# ---------------------------------------------------------------------------- behind a proxy

PROXY = "10.0.0.1"
ATTACKER = "203.0.113.66"
HOME = "198.51.100.7"


def through_proxy(client: Client, username: str, password: str, forwarded: str, peer: str = PROXY) -> Any:
    """A sign-in as the TLS proxy forwards it: from the proxy, naming the client."""
    data = {"username": username, "password": password}
    return client.post("/login/", data, REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=forwarded)


@override_settings(KINDGI_TRUSTED_PROXIES=[PROXY])
def test_a_flood_of_random_usernames_through_the_proxy_does_not_lock_out_admin(admin_user: Any) -> None:
    client = Client()
    flood = settings.KINDGI_SIGNIN_FAILURES * 10 + 5
    answers = {through_proxy(client, f"nobody-{n}", "guess", ATTACKER).status_code for n in range(flood)}
    assert 429 in answers  # the flooding client is blocked ...
    # ... and admin, from another client behind the same proxy, is not
    assert through_proxy(Client(), "admin", "password", HOME).status_code == 302


@override_settings(KINDGI_TRUSTED_PROXIES=[PROXY])
def test_wrong_passwords_from_an_attacker_do_not_stop_the_user_from_their_own_address(alice: Any) -> None:
    attacker = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES + 1):
        through_proxy(attacker, "alice", f"guess {n}", ATTACKER)
    assert through_proxy(attacker, "alice", PASSWORD, ATTACKER).status_code == 429
    assert through_proxy(Client(), "alice", PASSWORD, HOME).status_code == 302


@override_settings(KINDGI_TRUSTED_PROXIES=[PROXY])
def test_guesses_from_many_addresses_spare_the_address_the_user_signs_in_from(alice: Any) -> None:
    assert through_proxy(Client(), "alice", PASSWORD, HOME).status_code == 302
    for n in range(settings.KINDGI_SIGNIN_FAILURES * 10):
        through_proxy(Client(), "alice", f"guess {n}", f"203.0.113.{n % 200 + 1}")
    assert through_proxy(Client(), "alice", PASSWORD, "192.0.2.9").status_code == 429  # a new address waits
    assert through_proxy(Client(), "alice", PASSWORD, HOME).status_code == 302


def test_x_forwarded_for_is_ignored_when_no_proxy_is_trusted(alice: Any) -> None:
    """A client that names a fresh address in the header at each guess is still one client."""
    client = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES):
        through_proxy(client, "alice", f"guess {n}", f"192.0.2.{n}", peer=ATTACKER)
    assert through_proxy(client, "alice", PASSWORD, HOME, peer=ATTACKER).status_code == 429


@override_settings(KINDGI_TRUSTED_PROXIES=[PROXY])
def test_x_forwarded_for_is_read_only_from_a_trusted_proxy(alice: Any) -> None:
    client = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES):
        through_proxy(client, "alice", f"guess {n}", f"192.0.2.{n}", peer=ATTACKER)
    assert through_proxy(client, "alice", PASSWORD, HOME, peer=ATTACKER).status_code == 429


@override_settings(KINDGI_TRUSTED_PROXIES=[PROXY])
def test_what_a_client_writes_before_the_proxys_hop_is_not_read(alice: Any) -> None:
    """The attacker sends `X-Forwarded-For: <alice's address>`; the proxy appends the attacker's."""
    client = Client()
    for n in range(settings.KINDGI_SIGNIN_FAILURES):
        through_proxy(client, "alice", f"guess {n}", f"{HOME}, {ATTACKER}")
    assert through_proxy(client, "alice", PASSWORD, ATTACKER).status_code == 429
    assert through_proxy(Client(), "alice", PASSWORD, HOME).status_code == 302


def test_the_client_address_skips_every_trusted_hop_from_the_right() -> None:
    from django.test import RequestFactory

    from kindgi_console.proxies import client_address

    def address(peer: str, forwarded: str | None = None) -> str:
        request = RequestFactory().get("/", REMOTE_ADDR=peer)
        if forwarded is not None:
            request.META["HTTP_X_FORWARDED_FOR"] = forwarded
        return client_address(request)

    with override_settings(KINDGI_TRUSTED_PROXIES=["10.0.0.0/8", "fd00::/8"]):
        assert address("10.0.0.1", f"{HOME}, {ATTACKER}, 10.1.2.3") == ATTACKER
        assert address("10.0.0.1", f"[2001:db8::7]:443, {ATTACKER}:5678") == ATTACKER
        assert address("fd00::1", "2001:db8::7") == "2001:db8::7"
        assert address("10.0.0.1", "10.2.3.4, 10.1.2.3") == "10.2.3.4"  # only proxies: the farthest
        assert address("10.0.0.1", f"{ATTACKER}, unknown") == "10.0.0.1"  # not an address: the proxy
        assert address("10.0.0.1") == "10.0.0.1"
        assert address(ATTACKER, HOME) == ATTACKER
    assert address("10.0.0.1", HOME) == "10.0.0.1"


def test_a_trusted_proxy_that_is_not_an_address_stops_start_up() -> None:
    import subprocess
    import sys

    env = {**__import__("os").environ, "KINDGI_TRUSTED_PROXIES": "10.0.0.1,nginx"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "DJANGO_SETTINGS_MODULE": "kindgi_console.settings"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "KINDGI_TRUSTED_PROXIES" in done.stderr


def test_the_api_throttle_does_not_take_the_address_from_the_header() -> None:
    from django.test import RequestFactory
    from rest_framework.request import Request

    from kindgi_console.api import CallerRateThrottle

    request = Request(RequestFactory().get("/", REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR="192.0.2.1"))
    assert CallerRateThrottle().get_ident(request) == ATTACKER
