"""Errors as RFC 9457 problem details (``application/problem+json``).

Every error body carries the project's stable error ``code`` (``src/domain/errors.py``)
beside the standard members, so a client branches on ``code``, never on the text:

    {"type": "urn:lookup-knowledge:problem:not_found", "title": "Not Found",
     "status": 404, "detail": "no tool invocation with id ...", "code": "not_found",
     "instance": "/v1/invocations/..."}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lookup_knowledge.domain.errors import (
    AccessDenied,
    AuditError,
    AuditUnavailable,
    ConfigurationError,
    EmbeddingError,
    InvalidInputError,
    LookupKnowledgeError,
    NotFoundError,
    SchemaMismatch,
    SearchBadRequest,
    SearchError,
    SearchTimeout,
    SearchUnavailable,
    UnsupportedSearchMode,
)

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:lookup-knowledge:problem:"

# Most specific first: the first class an error is an instance of decides its status.
_STATUS: tuple[tuple[type[LookupKnowledgeError], int], ...] = (
    (InvalidInputError, 400),
    (AccessDenied, 403),
    (NotFoundError, 404),
    (SearchBadRequest, 400),
    (UnsupportedSearchMode, 400),
    (SearchTimeout, 504),
    (SearchUnavailable, 503),
    (SchemaMismatch, 503),
    (SearchError, 502),
    (EmbeddingError, 502),
    (AuditUnavailable, 503),
    (AuditError, 500),
    # A feature this configuration switched off (e.g. audit.enabled=false).
    (ConfigurationError, 503),
    # A closed app (shutting down) and anything else of ours.
    (LookupKnowledgeError, 503),
)

# Codes of the HTTP layer itself (no domain error stands behind them).
HTTP_CODES: Mapping[int, str] = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
    422: "invalid_input",
    429: "too_many_requests",
}


def status_of(error: LookupKnowledgeError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500  # pragma: no cover - LookupKnowledgeError closes the table


def problem(
    status: int,
    code: str,
    detail: str,
    *,
    instance: str | None = None,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + code,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if instance is not None:
        body["instance"] = instance
    body.update(extra or {})
    return JSONResponse(
        _encodable(body), status_code=status, headers=dict(headers or {}), media_type=PROBLEM_JSON
    )


def _encodable(value: Any) -> Any:
    """Strings a UTF-8 body can carry: a lone surrogate the request brought (and a
    message quotes) becomes U+FFFD, so the answer about bad input is never a 500."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


def install_problem_handlers(app: FastAPI) -> None:
    """Every error the app answers is problem+json: ours, FastAPI's validation, routing
    (404/405) and anything unexpected (500 without details; logged)."""

    async def domain_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, LookupKnowledgeError)
        status = status_of(error)
        if status >= 500:
            logger.warning("request failed: %s (%s)", error, error.code)
        return problem(status, error.code, error.message, instance=request.url.path)

    async def validation_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        errors = [
            {"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", ""))}
            for e in error.errors()
        ]
        return problem(
            422,
            "invalid_input",
            "the request does not match the API's schema",
            instance=request.url.path,
            extra={"errors": errors},
        )

    async def http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        code = HTTP_CODES.get(error.status_code, "http_error")
        return problem(
            error.status_code,
            code,
            str(error.detail),
            instance=request.url.path,
            headers=error.headers,
        )

    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        logger.exception("unexpected error serving %s", request.url.path)
        return problem(500, "internal_error", "internal error", instance=request.url.path)

    app.add_exception_handler(LookupKnowledgeError, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
