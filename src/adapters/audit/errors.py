"""Driver errors -> the project's errors (callers never see a SQLAlchemy type)."""

from __future__ import annotations

from sqlalchemy import exc

from lookup_knowledge.domain.errors import AuditError, AuditUnavailable

_UNAVAILABLE = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, exc.TimeoutError)


def is_unavailable(error: BaseException) -> bool:
    """True when the store could not be reached or was busy (worth retrying later)."""
    return isinstance(error, _UNAVAILABLE) or (
        isinstance(error, exc.DBAPIError) and error.connection_invalidated
    )


def is_permanent(error: BaseException) -> bool:
    """True for failures that the same record will hit again (bad data, constraint)."""
    if is_unavailable(error):
        return False
    return isinstance(error, exc.DataError | exc.IntegrityError) or (
        isinstance(error, exc.StatementError) and not isinstance(error, exc.DBAPIError)
    )


def translate(error: exc.SQLAlchemyError, doing: str) -> AuditError:
    detail = str(error.orig) if isinstance(error, exc.DBAPIError) else str(error)
    detail = detail.strip().splitlines()[0] if detail.strip() else type(error).__name__
    if is_unavailable(error):
        return AuditUnavailable(f"audit database unavailable while {doing}: {detail}")
    return AuditError(f"audit database error while {doing}: {detail}")
