"""Login guessing floods are throttled (failures per address and per (username, address), so a stranger cannot lock
the owner out; X-Forwarded-For cannot be rotated around it);
cookies are Secure behind TLS; CORS is closed unless origins are configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

from tests.controlplane.factories import UserFactory

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
LOGIN = "/api/v1/auth/login"
RATE = 20  # the default LOGIN_THROTTLE_RATE and LOGIN_USER_THROTTLE_RATE: failures per minute


def login(client: Client, username: str, password: str, address: str, **headers: str) -> int:
    response = client.post(LOGIN, json.dumps({"username": username, "password": password}),
                           content_type="application/json", REMOTE_ADDR=address, **headers)
    return int(response.status_code)


def fresh_address() -> str:
    """An address no other test (or earlier run: throttles live in Redis) has used."""
    raw = uuid.uuid4().bytes
    return f"10.{raw[0]}.{raw[1]}.{raw[2]}"


@pytest.fixture
def user() -> tuple[str, str]:
    name = f"victim-{uuid.uuid4().hex[:8]}"
    made = UserFactory(username=name)
    made.set_password("the-right-password")
    made.save()
    return name, "the-right-password"


def test_a_guessing_flood_from_one_address_is_stopped(user: tuple[str, str]) -> None:
    name, password = user
    client, address = Client(), fresh_address()
    answers = [login(client, name, f"guess-{i}", address) for i in range(RATE + 30)]
    assert answers[:RATE] == [401] * RATE
    assert set(answers[RATE:]) == {429}
    assert login(client, name, password, address) == 429  # the right password too, until the window passes
    assert login(client, f"other-{uuid.uuid4().hex[:6]}", "x", address) == 429  # and any other account


def test_rotating_x_forwarded_for_does_not_escape_the_throttle(user: tuple[str, str]) -> None:
    name, _ = user
    client, address = Client(), fresh_address()
    answers = [login(client, f"{name}-{i}", "guess", address, HTTP_X_FORWARDED_FOR=fresh_address())
               for i in range(RATE + 5)]
    assert answers.count(429) == 5


def test_a_strangers_failures_do_not_lock_the_owner_out(user: tuple[str, str]) -> None:
    name, password = user
    client, attacker, owner = Client(), fresh_address(), fresh_address()
    answers = [login(client, name, f"guess-{i}", attacker) for i in range(RATE + 5)]
    assert answers[:RATE] == [401] * RATE and set(answers[RATE:]) == {429}
    assert login(client, name, password, owner) == 200  # the owner, elsewhere, gets in
    assert login(client, name, "guess-again", attacker) == 429  # the attacker is still held
    assert login(client, name, password, attacker) == 429  # even with the right password, until the window passes


def test_guessing_one_account_from_many_addresses_does_not_lock_it(user: tuple[str, str]) -> None:
    """Each address has its own budget (so a botnet is slowed per address, not stopped: see docs)."""
    name, password = user
    client = Client()
    answers = [login(client, name, f"guess-{i}", fresh_address()) for i in range(RATE + 5)]
    assert set(answers) == {401}
    assert login(client, name, password, fresh_address()) == 200


def test_only_failures_count(user: tuple[str, str]) -> None:
    name, password = user
    client, address = Client(), fresh_address()
    assert [login(client, name, password, address) for _ in range(RATE + 5)] == [200] * (RATE + 5)
    assert login(client, name, "", address) == 400  # a malformed body is no attempt either
    answers = [login(client, name, f"guess-{i}", address) for i in range(RATE + 1)]
    assert answers[:RATE] == [401] * RATE and answers[RATE] == 429


def test_failures_are_counted_per_username_and_address(user: tuple[str, str]) -> None:
    name, password = user
    rates = {"login": "100/min", "login_user": "5/min"}
    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}):
        client, address = Client(), fresh_address()
        answers = [login(client, name, f"guess-{i}", address) for i in range(7)]
        assert answers == [401] * 5 + [429] * 2
        assert login(client, f"other-{uuid.uuid4().hex[:6]}", "x", address) == 401  # another account, same address
        assert login(client, name.upper(), "x", address) == 429  # the same account however it is spelled
        assert login(client, name, password, fresh_address()) == 200  # the same account, another address


def _settings_under(env: dict[str, str]) -> dict[str, object]:
    code = ("import django, json; from django.conf import settings; django.setup(); "
            "print(json.dumps({k: getattr(settings, k) for k in ('SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', "
            "'SECURE_PROXY_SSL_HEADER', 'CORS_ALLOWED_ORIGINS')} | "
            "{'NUM_PROXIES': settings.REST_FRAMEWORK['NUM_PROXIES']}))")
    base = {k: v for k, v in os.environ.items() if k not in ("SLUICE_BEHIND_TLS", "SESSION_COOKIE_SECURE",
                                                               "CSRF_COOKIE_SECURE", "CORS_ALLOWED_ORIGINS",
                                                               "NUM_PROXIES")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**base, "DJANGO_SETTINGS_MODULE": "controlplane.settings", **env}, check=True)
    parsed: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


def test_cookies_are_secure_behind_tls_and_the_proxy_header_is_trusted_only_then() -> None:
    plain = _settings_under({})
    assert plain == {"SESSION_COOKIE_SECURE": False, "CSRF_COOKIE_SECURE": False, "SECURE_PROXY_SSL_HEADER": None,
                     "CORS_ALLOWED_ORIGINS": [], "NUM_PROXIES": 0}
    tls = _settings_under({"SLUICE_BEHIND_TLS": "true"})
    assert tls["SESSION_COOKIE_SECURE"] is True and tls["CSRF_COOKIE_SECURE"] is True
    assert tls["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"] and tls["NUM_PROXIES"] == 1
    assert _settings_under({"SLUICE_BEHIND_TLS": "true", "SESSION_COOKIE_SECURE": "false"})[
        "SESSION_COOKIE_SECURE"] is False


@override_settings(SESSION_COOKIE_SECURE=True, CSRF_COOKIE_SECURE=True,
                   SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
def test_a_login_behind_tls_sets_secure_cookies(user: tuple[str, str]) -> None:
    name, password = user
    response = Client().post(LOGIN, json.dumps({"username": name, "password": password}),
                             content_type="application/json", REMOTE_ADDR=fresh_address(),
                             HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200
    assert response.cookies["sessionid"]["secure"] and response.cookies["csrftoken"]["secure"]


def _preflight(origin: str) -> dict[str, str]:
    response = Client().options("/api/v1/tenants", HTTP_ORIGIN=origin, HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET")
    return {k.lower(): v for k, v in response.headers.items()}


def test_cors_is_closed_unless_origins_are_configured() -> None:
    assert "access-control-allow-origin" not in _preflight("https://evil.example")
    response = Client().get("/api/v1/tenants", HTTP_ORIGIN="https://evil.example")
    assert "Access-Control-Allow-Origin" not in response.headers
    with override_settings(CORS_ALLOWED_ORIGINS=["https://console.example"]):
        assert _preflight("https://console.example")["access-control-allow-origin"] == "https://console.example"
        assert "access-control-allow-origin" not in _preflight("https://evil.example")
        assert "access-control-allow-credentials" not in _preflight("https://console.example")
