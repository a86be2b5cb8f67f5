"""The console's sign-in and sign-out handlers (the cookie rules are ``signin``'s)."""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import RedirectResponse, Response

from lookup_knowledge.adapters.http.auth import Role
from lookup_knowledge.adapters.http.console_context import Console, console_of, error_page, html
from lookup_knowledge.adapters.http.render import render
from lookup_knowledge.adapters.http.signin import LOGIN_COOKIE, SESSION_COOKIE


def _field(form: dict[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0]


def login_page(
    console: Console, request: Request, nonce: str | None, message: str | None, status: int
) -> Response:
    """The sign-in form with a CSRF token bound to the login cookie's nonce."""
    fresh = nonce is None
    if nonce is None:
        nonce, csrf = console.signins.login_nonce()
    else:
        csrf = console.signins.csrf_of_login(nonce)
    response = html(
        render("login.html", message=message, csrf=csrf, nav="", logout_csrf=None), status
    )
    if fresh:
        response.set_cookie(
            LOGIN_COOKIE,
            nonce,
            httponly=True,
            samesite="strict",
            secure=console.secure(request),
            max_age=3600,
            path="/login",
        )
    return response


def login_form(request: Request) -> Response:
    return login_page(console_of(request), request, None, None, 200)


async def login(request: Request) -> Response:
    console = console_of(request)
    client = request.client.host if request.client else "unknown"
    wait = console.throttle.retry_after(client)
    if wait is not None:
        busy = error_page(
            "Too many attempts", f"Too many failed sign-ins; try again in {wait} s.", 429
        )
        busy.headers["retry-after"] = str(wait)
        return busy
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    nonce = request.cookies.get(LOGIN_COOKIE)
    if not nonce or not console.signins.csrf_ok(nonce, "login", _field(form, "csrf")):
        return login_page(
            console, request, None, "The sign-in form expired or did not come from here.", 403
        )
    token = _field(form, "token").strip()
    if console.guard.role_of(f"Bearer {token}") is not Role.AUDITOR:
        console.throttle.failed(client)
        return login_page(console, request, nonce, "That is not an auditor token.", 401)
    console.throttle.succeeded(client)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        console.signins.issue(),
        httponly=True,
        samesite="strict",
        secure=console.secure(request),
        max_age=console.signins.lifetime_s,
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    console = console_of(request)
    session = console.signins.check(request.cookies.get(SESSION_COOKIE))
    if session is not None:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        if not console.signins.csrf_ok(session.session_id, "csrf", _field(form, "csrf")):
            return error_page("Forbidden", "The sign-out form did not come from this console.", 403)
        console.signins.revoke(session)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
