"""Driver errors -> the project's errors (callers never see a SQLAlchemy type)."""

from __future__ import annotations

from sqlalchemy import exc

from lookup_knowledge.domain.errors import AuditError, AuditUnavailable, InvalidInputError

_UNAVAILABLE = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, exc.TimeoutError)


def is_unavailable(error: BaseException) -> bool:
    """True when the store could not be reached or was busy (worth retrying later)."""
    return isinstance(error, _UNAVAILABLE) or (
        isinstance(error, exc.DBAPIError) and error.connection_invalidated
    )


def is_permanent(error: BaseException) -> bool:
    """True for failures that the same record will hit again (bad data, a constraint).

    Everything else (connection loss, a locked or read-only database, a missing table
    that a migration will add) is worth retrying later.
    """
    if is_unavailable(error):
        return False
    if isinstance(error, exc.SQLAlchemyError):
        return isinstance(error, exc.DataError | exc.IntegrityError) or (
            isinstance(error, exc.StatementError) and not isinstance(error, exc.DBAPIError)
        )
    return isinstance(error, TypeError | ValueError | ArithmeticError | KeyError)


SEQ_CONSTRAINT = "uq_tool_invocation_session_id_seq"
_SQLITE_SEQ_MESSAGE = "tool_invocation.session_id, tool_invocation.seq"


def is_seq_conflict(error: exc.IntegrityError) -> bool:
    """A unique violation on (session_id, seq): another writer took that seq first."""
    text = str(error.orig)
    return SEQ_CONSTRAINT in text or _SQLITE_SEQ_MESSAGE in text


def translate(error: exc.SQLAlchemyError, doing: str) -> AuditError:
    detail = str(error.orig) if isinstance(error, exc.DBAPIError) else str(error)
    detail = detail.strip().splitlines()[0] if detail.strip() else type(error).__name__
    if is_unavailable(error):
        return AuditUnavailable(f"audit database unavailable while {doing}: {detail}")
    return AuditError(f"audit database error while {doing}: {detail}")


def translate_query(error: exc.SQLAlchemyError | UnicodeError, doing: str) -> Exception:
    """A reader's failure: a value the driver cannot send (a NUL to PostgreSQL, a lone
    surrogate to SQLite's UTF-8 encoder) is the caller's bad input, not a store failure;
    the rest as ``translate``. Inputs are checked before they get here
    (``require_text``): this is the net under that check."""
    if isinstance(error, UnicodeError | exc.DataError):
        detail = str(getattr(error, "orig", None) or error).strip().splitlines()
        reason = detail[0] if detail else type(error).__name__
        return InvalidInputError(f"a value cannot be used while {doing}: {reason}")
    return translate(error, doing)
