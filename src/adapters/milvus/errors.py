"""Translate pymilvus / gRPC exceptions into the project's errors at the boundary.

Every adapter call into pymilvus goes through ``translate`` (search side) or
``translate_ingest`` (write side); callers never see a driver exception type, and the
driver exception is always chained as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc  # type: ignore[import-untyped]
from pymilvus.exceptions import (
    CollectionNotExistException,
    ConnectError,
    ConnectionConfigException,
    ConnectionNotExistException,
    DataNotMatchException,
    DataTypeNotMatchException,
    DataTypeNotSupportException,
    MilvusException,
    MilvusUnavailableException,
    ParamError,
)

from lookup_knowledge.domain.errors import (
    IngestError,
    SearchBadRequest,
    SearchError,
    SearchTimeout,
    SearchUnavailable,
    UnsupportedSearchMode,
)

# Milvus server codes (milvus/pkg/util/merr) that mean "the request was wrong".
_BAD_REQUEST_CODES = frozenset(
    {
        6,  # Lite: expression parse error / unknown field
        1100,  # ParameterInvalid
        1101,  # ParameterMissing
        1102,  # ParameterTooLarge
        65535,  # legacy: failed to create query plan (expression errors)
    }
)
_COLLECTION_MISSING_CODES = frozenset({4, 100})
_UNAVAILABLE_TEXT = (
    "fail connecting",
    "should create connection first",
    "connection refused",
    "not connected",
    "server unavailable",
    "retry timeout",
    "closed channel",
)


_DRIVER_ERRORS = (MilvusException, grpc.RpcError, OSError, ValueError, TypeError)
DRIVER_ERRORS: tuple[type[BaseException], ...] = _DRIVER_ERRORS


def collection_missing(error: BaseException | None) -> bool:
    """Whether a driver error says the collection is gone (never created, or dropped by
    another process): what an adapter cached about it is stale."""
    return isinstance(error, CollectionNotExistException) or (
        isinstance(error, MilvusException) and error.code in _COLLECTION_MISSING_CODES
    )


def _grpc_status(error: BaseException) -> grpc.StatusCode | None:
    if isinstance(error, grpc.RpcError):
        code = getattr(error, "code", None)
        if callable(code):
            value = code()
            return value if isinstance(value, grpc.StatusCode) else None
    if isinstance(error, MilvusException) and isinstance(error.code, grpc.StatusCode):
        return error.code
    return None


def _describe(error: BaseException) -> str:
    if isinstance(error, MilvusException):
        return f"{error.message} (code {error.code})"
    if isinstance(error, grpc.RpcError):
        details = getattr(error, "details", None)
        text = details() if callable(details) else str(error)
        return f"{text} ({_grpc_status(error)})"
    return f"{type(error).__name__}: {error}"


def translate(error: BaseException, action: str, where: str) -> SearchError:
    """The project's error for a driver failure during ``action`` against ``where``."""
    detail = _describe(error)
    message = f"Milvus {action} failed at {where}: {detail}"
    status = _grpc_status(error)
    if status is grpc.StatusCode.DEADLINE_EXCEEDED:
        return SearchTimeout(f"Milvus {action} timed out at {where}: {detail}")
    if status is grpc.StatusCode.UNIMPLEMENTED:
        return UnsupportedSearchMode(
            f"Milvus at {where} does not implement {action} ({detail}); this needs a newer "
            "Milvus (2.5 or later)"
        )
    if status in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE):
        return SearchBadRequest(message)
    if status is not None:
        # UNAVAILABLE, UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED, ...
        return SearchUnavailable(message)
    if isinstance(error, MilvusException):
        lowered = error.message.lower()
        if isinstance(
            error,
            ConnectError
            | ConnectionNotExistException
            | ConnectionConfigException
            | MilvusUnavailableException,
        ) or any(text in lowered for text in _UNAVAILABLE_TEXT):
            return SearchUnavailable(message)
        if "timeout" in lowered or "deadline" in lowered:
            return SearchTimeout(message)
        if collection_missing(error):
            return SearchUnavailable(
                f"{message}; the collection does not exist yet: ingest documents first"
            )
        if (
            isinstance(
                error,
                ParamError
                | DataTypeNotMatchException
                | DataNotMatchException
                | DataTypeNotSupportException,
            )
            or error.is_input_error
            or error.code in _BAD_REQUEST_CODES
        ):
            return SearchBadRequest(message)
        return SearchUnavailable(message)
    if isinstance(error, TimeoutError):
        return SearchTimeout(message)
    if isinstance(error, ValueError | TypeError):
        return SearchBadRequest(message)
    return SearchUnavailable(message)


def translate_ingest(error: BaseException, action: str, where: str) -> IngestError:
    """Write-side failures are ``IngestError``; the search-side category is kept in the
    message (``search_unavailable: ...``) so the operator sees what kind it was."""
    translated = translate(error, action, where)
    return IngestError(f"{translated.code}: {translated.message}")


@contextmanager
def index_failures(index: str, where: str) -> Iterator[None]:
    """An index beside the Lite file (``dense``, ``full-text``) that fails, its file or its
    library, as ``SearchUnavailable`` naming it."""
    try:
        yield
    except (OSError, ValueError, RuntimeError) as error:
        raise SearchUnavailable(f"the {index} index of {where} failed: {error}") from error
