"""What every console handler shares: the app, the token guard, the signed sessions and
the login throttle (``Console``), and the page wrapper that turns the project's errors
into HTML pages with the status ``problems.status_of`` gives them.

``console_router`` puts the ``Console`` on each request (``request.state.console``);
the handlers are plain module-level functions that read it with ``console_of``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import ServerSettings
from lookup_knowledge.adapters.http.auth import Role, TokenGuard
from lookup_knowledge.adapters.http.problems import status_of
from lookup_knowledge.adapters.http.render import render
from lookup_knowledge.adapters.http.signin import SESSION_COOKIE, ConsoleSessions, LoginThrottle
from lookup_knowledge.application.ports import AuditQueries
from lookup_knowledge.application.ports.answer_check import AnswerCheckStore
from lookup_knowledge.domain.errors import LookupKnowledgeError

# The sign-out form's CSRF token of the request being rendered (base.html shows the
# form when it is set).
_LOGOUT_CSRF: ContextVar[str | None] = ContextVar("logout_csrf", default=None)

_TITLES = {400: "Invalid input", 403: "Forbidden", 404: "Not found"}


def render_page(template: str, **context: Any) -> str:
    return render(template, logout_csrf=_LOGOUT_CSRF.get(), **context)


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


def error_page(title: str, message: str, status: int, *, login: bool = False) -> HTMLResponse:
    return html(render_page("error.html", title=title, message=message, login=login), status)


class Console:
    """The console's state. ``now`` (epoch seconds): the clock of session expiry and of
    the login throttle."""

    def __init__(
        self,
        lookup_app: LookupApp,
        guard: TokenGuard,
        server: ServerSettings | None = None,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.lookup_app = lookup_app
        self.guard = guard
        self.server = server or lookup_app.settings.server
        self.signins = ConsoleSessions(
            self.server.auditor_token,
            lifetime_s=self.server.console_session_hours * 3600,
            now=now,
        )
        self.throttle = LoginThrottle(self.server.login_attempts_per_minute, now=now)

    def audit(self) -> AuditQueries:
        return self.lookup_app.audit  # resolved per request: the audit store may be off

    def checks(self) -> AnswerCheckStore:
        return self.lookup_app.answer_checks

    def allowed(self, request: Request) -> bool:
        header = request.headers.get("authorization")
        if header is None and self.guard.enabled:
            return self.signins.check(request.cookies.get(SESSION_COOKIE)) is not None
        try:
            self.guard.check(header, Role.AUDITOR)
        except HTTPException:
            return False
        return True

    def secure(self, request: Request) -> bool:
        return self.server.behind_https or request.url.scheme == "https"

    def refused(self) -> HTMLResponse:
        return error_page("Sign in", "This console needs an auditor token.", 401, login=True)

    def page(self, request: Request, build: Callable[[], str | Response]) -> Response:
        """Render a console page, or the page that says why not (as HTML)."""
        session = self.signins.check(request.cookies.get(SESSION_COOKIE))
        _LOGOUT_CSRF.set(self.signins.csrf_for(session) if session is not None else None)
        if not self.allowed(request):
            return self.refused()
        try:
            built = build()
        except LookupKnowledgeError as error:
            status = status_of(error)
            title = _TITLES.get(status, "Unavailable")
            message = error.message if status in _TITLES else f"{error.code}: {error.message}"
            return error_page(title, message, status)
        return built if isinstance(built, Response) else html(built)


def console_of(request: Request) -> Console:
    console: Console = request.state.console
    return console
