"""Console sign-in: the cookie is a signed, expiring session (never the auditor token),
``Secure`` behind HTTPS, revoked at logout; every console POST needs its form's CSRF
token; failed sign-ins are throttled per client (429 + Retry-After). Time is a fake
clock moved by the test."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.adapters.http.signin import SESSION_COOKIE
from tests.support.http import AGENT, AUDITOR, LOCAL, sample_app

LIMIT = 3


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def lookup_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    app = sample_app(tmp_path_factory.mktemp("signin") / "data")
    app.lookup("PG-53300 too many connections", session_id="signin-1", step_id="1")
    yield app
    app.close()


def _client(
    lookup_app: LookupApp, clock: Clock, *, client: str = "10.1.1.1", **overrides: object
) -> TestClient:
    settings = load_settings(
        overrides={
            "server.auditor-token": AUDITOR,
            "server.agent-token": AGENT,
            "server.login-attempts-per-minute": LIMIT,
            "server.console-session-hours": 1,
            **overrides,
        }
    ).settings
    app = create_http_app(lookup_app, settings, console_clock=clock)
    return TestClient(app, base_url=LOCAL, client=(client, 50000), follow_redirects=False)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def browser(lookup_app: LookupApp, clock: Clock) -> TestClient:
    return _client(lookup_app, clock)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


def sign_in(browser: TestClient, token: str = AUDITOR) -> object:
    form = browser.get("/login")
    assert form.status_code == 200
    return browser.post(
        "/login", data={"token": token, "csrf": _csrf(form.text)}, follow_redirects=False
    )


def test_the_session_cookie_is_signed_and_never_the_token(browser: TestClient) -> None:
    signed = sign_in(browser)
    assert signed.status_code == 303  # type: ignore[attr-defined]
    header = signed.headers["set-cookie"]  # type: ignore[attr-defined]
    assert AUDITOR not in header
    assert "HttpOnly" in header
    assert "SameSite=strict" in header
    assert "Secure" not in header
    assert browser.get("/").status_code == 200


def test_the_cookie_is_secure_when_the_server_is_behind_https(
    lookup_app: LookupApp, clock: Clock
) -> None:
    browser = _client(lookup_app, clock, **{"server.behind-https": True})
    assert "Secure" in browser.get("/login").headers["set-cookie"]
    assert "Secure" in sign_in(browser).headers["set-cookie"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "cookie",
    [AUDITOR, "abc.1999999999.0000", "x.y.z", "", "a.b", "a.1999999999." + "0" * 64],
    ids=["raw-token", "bad-signature", "not-a-number", "empty", "two-parts", "zero-signature"],
)
def test_a_forged_cookie_is_not_a_session(browser: TestClient, cookie: str) -> None:
    browser.cookies.set(SESSION_COOKIE, cookie)
    browser.cookies.set("lk_auditor", AUDITOR)  # the old raw-token cookie: no longer read
    assert browser.get("/").status_code == 401


def test_a_tampered_expiry_breaks_the_signature(browser: TestClient) -> None:
    sign_in(browser)
    session_id, expires, signature = browser.cookies[SESSION_COOKIE].split(".")
    browser.cookies.clear()
    browser.cookies.set(SESSION_COOKIE, f"{session_id}.{int(expires) + 86400}.{signature}")
    assert browser.get("/").status_code == 401


def test_a_session_expires(browser: TestClient, clock: Clock) -> None:
    sign_in(browser)
    clock.now += 3599
    assert browser.get("/").status_code == 200
    clock.now += 2
    assert browser.get("/").status_code == 401


def test_logout_revokes_the_session_even_for_a_copied_cookie(browser: TestClient) -> None:
    sign_in(browser)
    stolen = browser.cookies[SESSION_COOKIE]
    page = browser.get("/")
    out = browser.post("/logout", data={"csrf": _csrf(page.text)})
    assert out.status_code == 303
    # The copy (replayed to the same server: the revocation list is the server's).
    browser.cookies.clear()
    browser.cookies.set(SESSION_COOKIE, stolen)
    assert browser.get("/").status_code == 401


def test_logout_without_the_form_token_is_refused(browser: TestClient) -> None:
    sign_in(browser)
    assert browser.post("/logout").status_code == 403
    assert browser.post("/logout", data={"csrf": "0" * 64}).status_code == 403
    assert browser.get("/").status_code == 200  # still signed in


@pytest.mark.parametrize(
    "csrf", [None, "", "0" * 64, "not-hex"], ids=["missing", "empty", "wrong", "garbage"]
)
def test_login_without_its_form_token_is_refused(browser: TestClient, csrf: str | None) -> None:
    browser.get("/login")
    data = {"token": AUDITOR} if csrf is None else {"token": AUDITOR, "csrf": csrf}
    refused = browser.post("/login", data=data)
    assert refused.status_code == 403
    assert SESSION_COOKIE not in refused.headers.get("set-cookie", "")


def test_a_login_form_token_needs_its_own_cookie(lookup_app: LookupApp, clock: Clock) -> None:
    """A token from another browser's form (the attacker's own) does not fit this one."""
    attacker = _client(lookup_app, clock)
    victim = _client(lookup_app, clock)
    csrf = _csrf(attacker.get("/login").text)
    victim.get("/login")
    assert victim.post("/login", data={"token": AUDITOR, "csrf": csrf}).status_code == 403


def test_failed_sign_ins_are_throttled_per_client(lookup_app: LookupApp, clock: Clock) -> None:
    browser = _client(lookup_app, clock, client="10.9.9.9")
    for _ in range(LIMIT):
        assert sign_in(browser, "wrong-token").status_code == 401  # type: ignore[attr-defined]
    clock.now += 10
    blocked = sign_in(browser, AUDITOR)  # even the right token waits
    assert blocked.status_code == 429  # type: ignore[attr-defined]
    assert blocked.headers["retry-after"] == "50"  # type: ignore[attr-defined]
    # Another client is not held up by this one.
    assert sign_in(_client(lookup_app, clock, client="10.9.9.8")).status_code == 303  # type: ignore[attr-defined]
    clock.now += 50
    assert sign_in(browser, AUDITOR).status_code == 303  # type: ignore[attr-defined]


def test_a_successful_sign_in_clears_the_failures(lookup_app: LookupApp, clock: Clock) -> None:
    browser = _client(lookup_app, clock, client="10.9.9.7")
    for _ in range(LIMIT - 1):
        sign_in(browser, "wrong-token")
    assert sign_in(browser).status_code == 303  # type: ignore[attr-defined]
    for _ in range(LIMIT - 1):
        assert sign_in(browser, "wrong-token").status_code == 401  # type: ignore[attr-defined]
