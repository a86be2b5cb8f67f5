"""The local operator's endpoints: the CLI beside a running server (``local_server``).

``LocalOperator`` wraps a server's ASGI app (``serve``'s, or ``mcp --transport http``'s)
and answers the requests under ``/v1/local/`` itself: ``lookup``, ``ingest`` and
``health`` on the server's own ``LookupApp`` (the process that holds the Milvus Lite
file), and ``eval`` (``eval run``) on a second app in this process with the eval's
settings. Everything else goes to the wrapped app untouched.

A request is accepted only from a loopback address and with the server's local secret
(``Authorization: Bearer``, from ``server.json``); it acts with the rights of the CLI on
that data directory (a trusted operator: it may name the principal of a lookup, as
``lookup --tenant`` does). The agent and auditor tokens are not accepted here, and the
secret is accepted nowhere else.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.api_requests import IngestRequest, LookupRequest
from lookup_knowledge.adapters.local_server import LOCAL_PREFIX, RunningServer
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.errors import (
    AccessDenied,
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
    NotFoundError,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1 << 20


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _status(error: LookupKnowledgeError) -> int:
    if isinstance(error, InvalidInputError | ConfigurationError):
        return 400
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, AccessDenied):
        return 403
    return 503


class LocalOperator:
    """ASGI: ``/v1/local/*`` for the local operator, the rest for ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        lookup_app: LookupApp,
        server: RunningServer,
        *,
        on_shutdown: Callable[[], None] | None = None,
    ) -> None:
        """``on_shutdown``: called when the server's lifespan ends (uvicorn re-raises the
        SIGTERM or SIGINT it stopped on after that, so code after its ``run`` may never
        run: this is where ``server.json`` is removed)."""
        self._app = app
        self._on_shutdown = on_shutdown
        self._lookup_app = lookup_app
        self._expected = f"Bearer {server.secret}".encode()
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "lookup": self._lookup,
            "ingest": self._ingest,
            "health": self._health,
            "eval": self._eval,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self._on_shutdown is not None:
            await self._app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(LOCAL_PREFIX):
            await self._app(scope, receive, send)
            return
        status, payload = await self._answer(scope, receive)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _lifespan_send(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                assert self._on_shutdown is not None
                self._on_shutdown()
            await send(message)

        return sending

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, dict[str, Any]]:
        client = scope.get("client") or (None, None)
        headers = dict(scope.get("headers") or ())
        if not _loopback(client[0]):
            return 403, {
                "error": "forbidden",
                "message": "local operator requests come from loopback only",
            }
        if not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            return 401, {
                "error": "unauthorized",
                "message": "the local secret (server.json) is required",
            }
        handler = self._handlers.get(str(scope["path"])[len(LOCAL_PREFIX) :])
        if handler is None or scope.get("method") != "POST":
            return 404, {"error": "not_found", "message": f"no local operation {scope['path']}"}
        try:
            body = json.loads(await _read_body(receive))
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as error:
            return 400, {"error": InvalidInputError.code, "message": f"bad JSON body: {error}"}
        try:
            return 200, await handler(body)
        except LookupKnowledgeError as error:
            return _status(error), {"error": error.code, "message": error.message}
        except (TypeError, ValueError) as error:  # a body of the wrong shape
            return 400, {"error": InvalidInputError.code, "message": str(error)}

    async def _lookup(self, body: dict[str, Any]) -> dict[str, Any]:
        from lookup_knowledge.application.agent_formats import (
            anthropic_tool_result_content,
            openai_tool_output,
        )

        result = await self._lookup_app.alookup_result(
            LookupRequest(
                body["query"],
                session_id=body.get("session_id") or "cli",
                step_id=body.get("step_id"),
                mode=body.get("mode"),
                category=body.get("category"),
                tool_call_id=body.get("tool_call_id"),
                principal=_principal(body.get("principal")),
            )
        )
        out: dict[str, Any] = {
            "toolJson": result.to_tool_json(),
            "errorCode": result.error_code,
            "message": result.message,
            "errorMessage": result.error_message,
            "invocationId": result.invocation_id,
        }
        wanted = body.get("format")
        if wanted == "anthropic":
            out["formatted"] = anthropic_tool_result_content(result)
        elif wanted == "openai":
            out["formatted"] = openai_tool_output(
                result, body.get("tool_call_id") or result.invocation_id
            )
        return out

    async def _ingest(self, body: dict[str, Any]) -> dict[str, Any]:
        paths = body["paths"]
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise InvalidInputError("paths must be a list of absolute paths")
        report = await self._lookup_app.aingest(
            IngestRequest(
                paths,
                category=body.get("category"),
                root=body.get("root"),
                doc_id=body.get("doc_id"),
                sync=bool(body.get("sync", False)),
                source_name=body.get("source_name"),
                dry_run=bool(body.get("dry_run", False)),
                tenant=body.get("tenant"),
                allowed_groups=list(body.get("allowed_groups") or ()),
                public=bool(body.get("public", False)),
            )
        )
        return report.as_dict()

    async def _eval(self, body: dict[str, Any]) -> dict[str, Any]:
        import anyio

        from lookup_knowledge.adapters.cli.eval.run import run_for_cli

        return await anyio.to_thread.run_sync(run_for_cli, body)

    async def _health(self, _body: dict[str, Any]) -> dict[str, Any]:
        return (await self._lookup_app.ahealth()).as_dict()


def _principal(value: object) -> Principal | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInputError("principal must be an object with tenant, user and groups")
    tenant = value.get("tenant")
    if not isinstance(tenant, str):
        raise InvalidInputError("principal.tenant must be a string")
    return Principal(tenant, value.get("user") or "", frozenset(value.get("groups") or ()))


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ValueError(f"the body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
