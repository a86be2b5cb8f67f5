"""The stdio wire in front of the MCP SDK: every request gets an answer.

The SDK (2.x) validates each line with pydantic-core and, when a line does not validate,
drops it without a reply: a client that sent an id then waits forever. That is the case
for a query holding a lone UTF-16 surrogate (``"\\ud800"``: valid JSON, refused by the
SDK's parser), a request with an id but no method, ``params`` that is not an object, and
absurdly deep nesting. ``check_line`` looks at each line first:

* a line the SDK would take is forwarded, with lone surrogates replaced by U+FFFD (what
  the lookup itself does to a query, see ``lookup/query.py``), so the call is answered
  and recorded;
* a request it cannot take gets a JSON-RPC error reply with the request's id (found even
  in a line too deep to parse): -32700 parse error, -32600 invalid request, -32602
  invalid params;
* a notification (no id) that is malformed is dropped, as JSON-RPC says: there is nobody
  to answer.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

#: Deeper than any MCP message needs; deep enough to refuse before a recursive parser.
MAX_DEPTH = 64
RequestId = int | str
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


@dataclass(frozen=True, slots=True)
class WireError:
    """A JSON-RPC error reply to send instead of forwarding the line."""

    request_id: RequestId | None
    code: int
    message: str

    def session_message(self) -> SessionMessage:
        error = types.JSONRPCError(
            jsonrpc="2.0",
            id=self.request_id,
            error=types.ErrorData(code=self.code, message=self.message),
        )
        return SessionMessage(error)


def _shape(line: str) -> tuple[int, RequestId | None]:
    """How deep the line nests and the id of its top-level object, without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    top_id: RequestId | None = None
    for index, char in enumerate(line):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            if depth == 1 and top_id is None:
                found = _ID.match(line, index)
                if found is not None:
                    top_id = _request_id(json.loads(found.group(1)))
            in_string = True
        elif char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "}]":
            depth -= 1
    return deepest, top_id


def _request_id(value: object) -> RequestId | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return _clean_text(value)
    return None


def _clean_text(text: str) -> str:
    if text.isascii():
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _clean(value: Any) -> Any:
    """Lone surrogates -> U+FFFD in every string (depth is bounded by ``MAX_DEPTH``)."""
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, dict):
        return {_clean_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def check_line(line: str) -> tuple[str | None, WireError | None]:
    """(the line to forward, or the error to answer with); (None, None): drop it."""
    if not line.strip():
        return None, None
    depth, top_id = _shape(line)
    if depth > MAX_DEPTH:
        return None, WireError(
            top_id, types.INVALID_REQUEST, f"message nests deeper than {MAX_DEPTH} levels"
        )
    try:
        data = json.loads(line)
    except ValueError as error:
        return None, WireError(top_id, types.PARSE_ERROR, f"parse error: {error}")
    if not isinstance(data, dict):
        return None, WireError(
            None, types.INVALID_REQUEST, "a message must be one JSON object (no batches)"
        )
    has_id = data.get("id") is not None
    request_id = _request_id(data.get("id"))
    method = data.get("method")
    if method is None and ("result" in data or "error" in data):
        return _forward(data, None)  # the client's answer to a server request
    if not isinstance(method, str) or not method:
        return _refuse(has_id, request_id, types.INVALID_REQUEST, "a request needs a method")
    params = data.get("params")
    if params is not None and not isinstance(params, dict):
        return _refuse(
            has_id,
            request_id,
            types.INVALID_PARAMS,
            f"params must be an object, not {type(params).__name__}",
        )
    return _forward(data, request_id if has_id else None)


def _refuse(
    has_id: bool, request_id: RequestId | None, code: int, message: str
) -> tuple[str | None, WireError | None]:
    if not has_id:
        logger.warning("dropped a malformed MCP notification: %s", message)
        return None, None
    return None, WireError(request_id, code, message)


def _forward(
    data: dict[str, Any], request_id: RequestId | None
) -> tuple[str | None, WireError | None]:
    line = json.dumps(_clean(data))  # ASCII: every non-ASCII character escaped
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as error:
        reason = str(error).splitlines()[0]
        if request_id is None and data.get("id") is None:
            logger.warning("dropped a malformed MCP message: %s", reason)
            return None, None
        return None, WireError(request_id, types.INVALID_REQUEST, f"invalid request: {reason}")
    return line, None


class GuardedLines:
    """The lines of ``source`` that the SDK can take; errors for the others go to
    ``replies`` (sent on the SDK's write stream by ``serve_guarded``)."""

    def __init__(
        self,
        source: AsyncIterator[str],
        replies: anyio.abc.ObjectSendStream[SessionMessage],
    ) -> None:
        self._source = source
        self._replies = replies

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._replies:
            async for line in self._source:
                try:
                    forward, error = check_line(line)
                except Exception:  # a bug here must not stop the server reading
                    logger.exception("cannot check an MCP message; dropped")
                    continue
                if error is not None:
                    await self._replies.send(error.session_message())
                if forward is not None:
                    yield forward + "\n"


def stdin_lines() -> AsyncIterator[str]:
    """The process's stdin as UTF-8 text lines (undecodable bytes replaced)."""
    wrapper = TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    stream: AsyncIterator[str] = anyio.wrap_file(wrapper).__aiter__()
    return stream
