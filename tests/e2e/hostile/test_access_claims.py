"""Access that cannot be claimed, tried as an attacker would: ``serve`` (REST and /mcp
through the MCP SDK client) and ``lookup-knowledge mcp`` over stdio, under
``access.mode=enforced``, with two tenants (acme, globex) holding the same path with
different secrets, on SQLite and PostgreSQL.

The promises: the principal comes from the bearer token, never from a body, ``_meta`` or
header (only a trusted host's token may name one); a session belongs to the principal
that opened it (another principal cannot write into it, nor learn anything about it
through verify or check-answer, nor read another session's name in a reason); to an
agent token another tenant's document id, a group-restricted one and a made-up one look
alike; a bad MCP conversation id is a recorded ``invalid_input`` result; a replay runs
under the recorded principal.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.adapters.mcp_server import CONVERSATION_META_KEY
from lookup_knowledge.application.evaluation.replay import ReplaySelection
from lookup_knowledge.application.ports import AnswerCheckFilter, InvocationFilter
from tests.e2e.hostile.support import CLI, Backend, assert_no_traceback
from tests.support.http import served

ACME_TOKEN = "acme-agent-token-0001"
GLOBEX_TOKEN = "globex-agent-token-0002"
HOST_TOKEN = "trusted-host-token-0003"
AUDITOR_TOKEN = "auditor-token-0004"
ACME_SECRET = "ACMESECRET1111-VPNKEY"
GLOBEX_SECRET = "GLOBEXSECRET2222-VPNKEY"
VPN_ID = "kb/faq/vpn.md#chunk-0"
GLOBEX_ONLY_ID = "kb/faq/payroll.md#chunk-0"
HR_ID = "hrdocs/salaries.md#chunk-0"
MADE_UP_ID = "kb/faq/nothing-here.md#chunk-0"
QUERY = "what is the VPN key"
#: Stdio processes and HTTP calls are bounded.
TIMEOUT_S = 120.0


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


PRINCIPALS = {
    digest(ACME_TOKEN): {"tenant": "acme", "user": "alice"},
    digest(GLOBEX_TOKEN): {"tenant": "globex", "user": "gus", "groups": ["ops"]},
    digest(HOST_TOKEN): {"trusted-host": True},
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_session(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


@dataclass
class World:
    app: LookupApp
    base: str
    backend: Backend
    acme_session: str
    globex_session: str

    def post(
        self,
        path: str,
        token: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        return httpx.post(
            self.base + path,
            json=dict(body),
            headers={**bearer(token), **(headers or {})},
            timeout=TIMEOUT_S,
        )

    def records(self, session: str) -> list[Any]:
        self.app.flush()
        page = self.app.audit.list_invocations(
            InvocationFilter(session_id=session, limit=100, traffic="all")
        )
        return list(page.items)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def world(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    corpus = tmp_path_factory.mktemp("two-tenants")
    for tenant, secret in (("acme", ACME_SECRET), ("globex", GLOBEX_SECRET)):
        _write(
            corpus / tenant / "kb" / "faq" / "vpn.md",
            f'# VPN\n\nThe VPN key is "{secret}" for the {tenant} office network.\n',
        )
    _write(
        corpus / "globex" / "kb" / "faq" / "payroll.md",
        "# Payroll\n\nThe globex payroll run is on the 25th, approved by GLOBEXPAY.\n",
    )
    _write(
        corpus / "acme-hr" / "hrdocs" / "salaries.md",
        "# Salaries\n\nThe acme salary bands are in the HRBANDS sheet.\n",
    )
    app = create_app(
        overrides={
            **backend.overrides(),
            "search.backend": "memory",
            "rag.min-relevance": 0.0,
            "access.mode": "enforced",
            "server.auditor-token": AUDITOR_TOKEN,
            "server.principals": PRINCIPALS,
        }
    )
    app.ingest([corpus / "acme" / "kb"], tenant="acme")
    app.ingest([corpus / "globex" / "kb"], tenant="globex")
    app.ingest([corpus / "acme-hr" / "hrdocs"], tenant="acme", allowed_groups=["hr"])
    with served(create_http_app(app)) as base:
        built = World(app, base, backend, new_session("acme"), "")
        built.globex_session = new_session("globex-private-session")
        for token, session, secret in (
            (ACME_TOKEN, built.acme_session, ACME_SECRET),
            (GLOBEX_TOKEN, built.globex_session, GLOBEX_SECRET),
        ):
            shown = built.post("/v1/lookup", token, {"query": QUERY, "session_id": session})
            assert shown.status_code == 200, shown.text
            assert any(secret in b["content"] for b in shown.json()["evidenceBlocks"])
        payroll = built.post(
            "/v1/lookup", GLOBEX_TOKEN, {"query": "payroll run", "session_id": built.globex_session}
        ).json()
        assert GLOBEX_ONLY_ID in [b["document_id"] for b in payroll["evidenceBlocks"]]
        yield built
    app.close()


def _strip(payload: Any, *keys: str) -> Any:
    """A response without the members that differ by construction (ids, session)."""
    if isinstance(payload, dict):
        return {k: _strip(v, *keys) for k, v in payload.items() if k not in keys}
    if isinstance(payload, list):
        return [_strip(v, *keys) for v in payload]
    return payload


def _swap(payload: Any, old: str, new: str) -> Any:
    return json.loads(json.dumps(payload).replace(old, new))


# --------------------------------------------------------------------------- REST: claims

CLAIMS = {
    "lookup-body-other-tenant": (
        "/v1/lookup",
        {"query": QUERY, "principal": {"tenant": "globex"}},
        {},
    ),
    "lookup-body-own-tenant": (
        "/v1/lookup",
        {"query": QUERY, "principal": {"tenant": "acme", "groups": ["hr"]}},
        {},
    ),
    "verify-groups-hr": ("/v1/verify", {"document_ids": [HR_ID], "groups": ["hr"]}, {}),
    "verify-groups-staff": ("/v1/verify", {"document_ids": [HR_ID], "groups": ["staff"]}, {}),
    "lookup-header-tenant": (
        "/v1/lookup",
        {"query": QUERY},
        {"X-Lookup-Knowledge-Tenant": "globex"},
    ),
    "verify-header-x-tenant": ("/v1/verify", {"document_ids": [VPN_ID]}, {"X-Tenant": "globex"}),
    "check-answer-header-groups": (
        "/v1/check-answer",
        {"answer": f"The key is {GLOBEX_SECRET} [{VPN_ID}]."},
        {"X-Lookup-Knowledge-Groups": "hr"},
    ),
}


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_a_principal_named_in_a_request_is_refused_for_an_agent_token(
    world: World, claim: str
) -> None:
    path, body, headers = CLAIMS[claim]
    session = new_session(f"claim-{claim}")
    answered = world.post(path, ACME_TOKEN, {**body, "session_id": session}, headers)
    assert answered.status_code == 403, answered.text
    assert answered.json()["code"] == "forbidden"
    assert GLOBEX_SECRET not in answered.text
    assert world.records(session) == []


@pytest.mark.parametrize(
    ("token", "mine", "theirs"),
    [(ACME_TOKEN, ACME_SECRET, GLOBEX_SECRET), (GLOBEX_TOKEN, GLOBEX_SECRET, ACME_SECRET)],
    ids=["acme", "globex"],
)
def test_an_agent_token_looks_up_for_its_own_principal(
    world: World, token: str, mine: str, theirs: str
) -> None:
    session = new_session("own")
    answered = world.post("/v1/lookup", token, {"query": QUERY, "session_id": session})
    assert answered.status_code == 200, answered.text
    assert mine in answered.text
    assert theirs not in answered.text
    (record,) = world.records(session)
    assert record.principal_tenant == ("acme" if token == ACME_TOKEN else "globex")


def test_a_trusted_host_token_names_the_principal_in_the_body(world: World) -> None:
    session = new_session("host")
    answered = world.post(
        "/v1/lookup",
        HOST_TOKEN,
        {"query": QUERY, "session_id": session, "principal": {"tenant": "globex", "user": "h"}},
    )
    assert answered.status_code == 200, answered.text
    assert GLOBEX_SECRET in answered.text
    assert ACME_SECRET not in answered.text
    (record,) = world.records(session)
    assert (record.principal_tenant, record.principal_user) == ("globex", "h")


# --------------------------------------------------------------------------- REST: sessions


def test_a_lookup_naming_another_principals_session_is_refused(world: World) -> None:
    before = world.records(world.globex_session)
    answered = world.post(
        "/v1/lookup", ACME_TOKEN, {"query": QUERY, "session_id": world.globex_session}
    )
    assert answered.status_code == 403, answered.text
    assert GLOBEX_SECRET not in answered.text
    after = world.records(world.globex_session)
    assert [r.id for r in after] == [r.id for r in before]
    assert {r.principal_tenant for r in after} == {"globex"}


CROSS = {
    "verify": ("/v1/verify", {"document_ids": [VPN_ID, GLOBEX_ONLY_ID]}),
    "check-answer": (
        "/v1/check-answer",
        {
            "answer": f'The VPN key is "{GLOBEX_SECRET}" [{VPN_ID}]. '
            f"Payroll is approved by GLOBEXPAY [{GLOBEX_ONLY_ID}]."
        },
    ),
}


@pytest.mark.parametrize("route", sorted(CROSS))
def test_another_principals_session_answers_like_a_made_up_one(world: World, route: str) -> None:
    path, body = CROSS[route]
    foreign = world.post(path, ACME_TOKEN, {**body, "session_id": world.globex_session})
    made_up_session = new_session("made-up")
    made_up = world.post(path, ACME_TOKEN, {**body, "session_id": made_up_session})
    assert foreign.status_code == made_up.status_code == 200, (foreign.text, made_up.text)
    seen, expected = foreign.json(), made_up.json()
    assert "supported" not in json.dumps(seen)
    assert world.globex_session not in json.dumps(_strip(seen, "sessionId", "session_id"))
    assert _strip(seen, "checkId", "sessionId", "session_id") == _strip(
        expected, "checkId", "sessionId", "session_id"
    )
    if route == "verify":
        assert seen["valid"] == []
        assert seen["forbidden"] == []
    else:  # not recorded into the other principal's session
        checks = world.app.answer_checks.list_checks(
            AnswerCheckFilter(session_id=world.globex_session)
        )
        assert checks == ()


@pytest.mark.parametrize(
    "secret", [GLOBEX_SECRET, "GLOBEXSECRET9999-VPNKEY"], ids=["right", "wrong"]
)
def test_check_answer_on_another_session_cannot_tell_a_right_secret_from_a_wrong_one(
    world: World, secret: str
) -> None:
    answered = world.post(
        "/v1/check-answer",
        ACME_TOKEN,
        {"session_id": world.globex_session, "answer": f'The VPN key is "{secret}" [{VPN_ID}].'},
    ).json()
    (claim,) = answered["claims"]
    assert claim["verdict"] != "supported"
    assert claim["support"] is None
    # Not shown in the session checked: unknown, or not_in_session naming only the
    # caller's own session that was shown its own copy of the path.
    assert [c["status"] for c in claim["citations"]] != ["valid"]
    assert world.globex_session not in json.dumps(claim)


def test_check_answer_reasons_never_name_a_session_the_caller_does_not_own(
    world: World,
) -> None:
    answered = world.post(
        "/v1/check-answer",
        ACME_TOKEN,
        {
            "session_id": world.acme_session,
            "answer": f"Payroll is approved by GLOBEXPAY [{GLOBEX_ONLY_ID}].",
        },
    )
    assert answered.status_code == 200, answered.text
    assert world.globex_session not in answered.text
    assert "globex-private-session" not in answered.text
    (claim,) = answered.json()["claims"]
    assert [c["status"] for c in claim["citations"]] == ["unknown"]


# --------------------------------------------------------------------------- REST: oracles

ORACLE_ROUTES = {
    "verify": lambda doc: ("/v1/verify", {"document_ids": [doc]}),
    "check-answer": lambda doc: (
        "/v1/check-answer",
        {"answer": f"The payroll is approved by GLOBEXPAY [{doc}]."},
    ),
}


@pytest.mark.parametrize("route", sorted(ORACLE_ROUTES))
@pytest.mark.parametrize("hidden", [GLOBEX_ONLY_ID, HR_ID], ids=["other-tenant", "other-group"])
def test_a_document_the_caller_may_not_see_is_indistinguishable_from_a_made_up_one(
    world: World, route: str, hidden: str
) -> None:
    path, body = ORACLE_ROUTES[route](hidden)
    real = world.post(path, ACME_TOKEN, {**body, "session_id": world.acme_session})
    path, body = ORACLE_ROUTES[route](MADE_UP_ID)
    fake = world.post(path, ACME_TOKEN, {**body, "session_id": world.acme_session})
    assert real.status_code == fake.status_code == 200, (real.text, fake.text)
    assert '"forbidden"]' not in real.text  # no citation status
    assert real.json().get("forbidden", []) == []
    # ("end": the claim's span, longer by the longer id)
    assert _strip(_swap(real.json(), hidden, MADE_UP_ID), "checkId", "end") == _strip(
        fake.json(), "checkId", "end"
    )


def test_verify_answers_alike_whatever_groups_the_body_claims(world: World) -> None:
    answers = [
        world.post(
            "/v1/verify",
            ACME_TOKEN,
            {"session_id": world.acme_session, "document_ids": [HR_ID], "groups": groups},
        )
        for groups in (["staff"], ["hr"], [])
    ]
    assert {a.status_code for a in answers} == {403}
    assert len({a.text for a in answers}) == 1


def test_a_trusted_host_keeps_forbidden_apart_from_unknown(world: World) -> None:
    answered = world.post(
        "/v1/verify",
        HOST_TOKEN,
        {"session_id": world.acme_session, "document_ids": [GLOBEX_ONLY_ID, MADE_UP_ID]},
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["forbidden"] == [GLOBEX_ONLY_ID]
    assert answered.json()["unknown"] == [MADE_UP_ID]


def test_enforced_serve_refuses_an_agent_token_that_maps_to_no_principal(
    backend: Backend,
) -> None:
    done = backend.run(
        "serve",
        "--port",
        "0",
        env={
            "LOOKUP_KNOWLEDGE_ACCESS__MODE": "enforced",
            "LOOKUP_KNOWLEDGE_SEARCH__BACKEND": "memory",
            "LOOKUP_KNOWLEDGE_SERVER__AGENT_TOKEN": "an-agent-token-of-nobody",
            "LOOKUP_KNOWLEDGE_SERVER__AUDITOR_TOKEN": AUDITOR_TOKEN,
        },
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "server.principals" in done.stderr
    assert_no_traceback(done.stderr)


# --------------------------------------------------------------------------- MCP over HTTP


async def _mcp_call(
    world: World,
    token: str,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> Any:
    transport = streamable_http_client(
        world.base + "/mcp", http_client=create_mcp_http_client(headers=bearer(token))
    )
    async with Client(transport, mode="legacy") as client:  # type: ignore[arg-type]
        return await client.call_tool(tool, arguments, meta=meta)


def mcp_call(
    world: World,
    token: str,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> Any:
    return anyio.run(_mcp_call, world, token, tool, arguments, meta)


TOOLS = {
    "lookup_knowledge": {"query": QUERY},
    "check_answer": {"answer": f'The VPN key is "{GLOBEX_SECRET}" [{VPN_ID}].'},
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize(
    "meta",
    [
        {"lookup-knowledge/principal": {"tenant": "globex"}},
        {"lookup-knowledge/tenant": "globex"},
    ],
    ids=["principal", "tenant"],
)
def test_mcp_meta_naming_a_principal_is_refused_for_an_agent_token(
    world: World, tool: str, meta: dict[str, Any]
) -> None:
    conversation = new_session("meta-claim")
    result = mcp_call(
        world, ACME_TOKEN, tool, TOOLS[tool], {**meta, CONVERSATION_META_KEY: conversation}
    )
    assert result.is_error
    assert "forbidden" in result.content[0].text
    assert GLOBEX_SECRET not in json.dumps(result.structured_content)
    assert world.records(f"mcp-{conversation}") == []


def test_mcp_meta_principal_of_a_trusted_host_is_honoured(world: World) -> None:
    conversation = new_session("host-meta")
    result = mcp_call(
        world,
        HOST_TOKEN,
        "lookup_knowledge",
        {"query": QUERY},
        {"lookup-knowledge/principal": {"tenant": "globex"}, CONVERSATION_META_KEY: conversation},
    )
    assert not result.is_error
    assert GLOBEX_SECRET in json.dumps(result.structured_content)
    (record,) = world.records(f"mcp-{conversation}")
    assert record.principal_tenant == "globex"


@pytest.fixture(scope="module")
def globex_conversation(world: World) -> str:
    conversation = new_session("globex-chat")
    result = mcp_call(
        world,
        GLOBEX_TOKEN,
        "lookup_knowledge",
        {"query": QUERY},
        {CONVERSATION_META_KEY: conversation},
    )
    assert not result.is_error
    assert GLOBEX_SECRET in json.dumps(result.structured_content)
    return conversation


def test_mcp_lookup_in_another_principals_conversation_is_refused(
    world: World, globex_conversation: str
) -> None:
    before = world.records(f"mcp-{globex_conversation}")
    result = mcp_call(
        world,
        ACME_TOKEN,
        "lookup_knowledge",
        {"query": QUERY},
        {CONVERSATION_META_KEY: globex_conversation},
    )
    assert result.is_error
    assert "forbidden" in result.content[0].text
    after = world.records(f"mcp-{globex_conversation}")
    assert [r.id for r in after] == [r.id for r in before]
    assert {r.principal_tenant for r in after} == {"globex"}


def test_mcp_check_answer_in_another_principals_conversation_learns_nothing(
    world: World, globex_conversation: str
) -> None:
    result = mcp_call(
        world,
        ACME_TOKEN,
        "check_answer",
        TOOLS["check_answer"],
        {CONVERSATION_META_KEY: globex_conversation},
    )
    assert not result.is_error
    payload = result.structured_content
    assert payload["verdict"] != "supported"
    (claim,) = payload["claims"]
    assert [c["status"] for c in claim["citations"]] != ["valid"]
    assert claim["support"] is None
    assert globex_conversation not in json.dumps(claim)


def _sse_json(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("application/json"):
        data: dict[str, Any] = response.json()
        return data
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            found: dict[str, Any] = json.loads(line[5:])
            if "id" in found:
                return found
    raise AssertionError(response.text)


def test_mcp_session_id_of_another_principal_is_refused(world: World) -> None:
    """acme replays globex's ``Mcp-Session-Id`` with its own token: the call does not run
    in globex's audit session."""

    async def scenario() -> tuple[dict[str, Any], str]:
        transport = streamable_http_client(
            world.base + "/mcp", http_client=create_mcp_http_client(headers=bearer(GLOBEX_TOKEN))
        )
        async with Client(transport, mode="legacy") as client:  # type: ignore[arg-type]
            first = await client.call_tool("lookup_knowledge", {"query": QUERY})
            assert not first.is_error
            world.app.flush()
            mine = world.app.audit.list_invocations(
                InvocationFilter(limit=1, newest_first=True, traffic="all")
            ).items[0]
            assert mine.session_id.startswith("mcp-")
            session_header = mine.session_id.removeprefix("mcp-")
            async with httpx.AsyncClient(timeout=TIMEOUT_S) as raw:
                answered = await raw.post(
                    world.base + "/mcp",
                    headers={
                        **bearer(ACME_TOKEN),
                        "mcp-session-id": session_header,
                        "accept": "application/json, text/event-stream",
                        "mcp-protocol-version": client.session.protocol_version  # type: ignore[attr-defined]
                        if hasattr(client.session, "protocol_version")
                        else "2025-06-18",
                    },
                    json={
                        "jsonrpc": "2.0",
                        "id": 77,
                        "method": "tools/call",
                        "params": {"name": "lookup_knowledge", "arguments": {"query": QUERY}},
                    },
                )
            return (_sse_json(answered) if answered.status_code == 200 else {}), mine.session_id

    reply, session = anyio.run(scenario)
    if reply:  # the SDK accepted the session id: the tool must refuse the call
        assert reply["result"]["isError"] is True, reply
        assert GLOBEX_SECRET not in json.dumps(reply)
    assert {r.principal_tenant for r in world.records(session)} == {"globex"}


BAD_CONVERSATIONS = {
    "too-long": "c" * 256,
    "prefix-makes-it-too-long": "c" * 252,
    "nul": "chat\x00-1",
    "control": "chat\n1",
    "number": 42,
    "object": {"id": "x"},
}


def _assert_invalid_input_recorded(world: World, result: Any, before: set[str]) -> None:
    assert result.is_error
    assert CONVERSATION_META_KEY in result.structured_content["message"]
    world.app.flush()
    items = world.app.audit.list_invocations(
        InvocationFilter(limit=500, traffic="all", newest_first=True)
    ).items
    new = [i for i in items if i.id not in before]
    assert len(new) == 1, new
    assert new[0].error_code == "invalid_input"
    assert new[0].principal_tenant == "acme"


def _invocation_ids(world: World) -> set[str]:
    world.app.flush()
    items = world.app.audit.list_invocations(InvocationFilter(limit=500, traffic="all")).items
    return {i.id for i in items}


@pytest.mark.parametrize("bad", sorted(BAD_CONVERSATIONS))
def test_mcp_http_bad_conversation_id_is_a_recorded_invalid_input(world: World, bad: str) -> None:
    before = _invocation_ids(world)
    result = mcp_call(
        world,
        ACME_TOKEN,
        "lookup_knowledge",
        {"query": QUERY},
        {CONVERSATION_META_KEY: BAD_CONVERSATIONS[bad]},
    )
    _assert_invalid_input_recorded(world, result, before)


# --------------------------------------------------------------------------- MCP over stdio


def _stdio_env(world: World, tenant: str) -> dict[str, str]:
    env = world.backend.env()
    env.update(
        {
            "LOOKUP_KNOWLEDGE_DATA_DIR": str(world.backend.data_dir / f"stdio-{tenant}"),
            "LOOKUP_KNOWLEDGE_AUDIT__DATABASE_URL": world.app.settings.audit_database_url,
            "LOOKUP_KNOWLEDGE_SEARCH__BACKEND": "memory",
            "LOOKUP_KNOWLEDGE_ACCESS__MODE": "enforced",
            "LOOKUP_KNOWLEDGE_MCP__TENANT": tenant,
            "LOOKUP_KNOWLEDGE_MCP__USER": "stdio",
        }
    )
    return env


def stdio_calls(
    world: World, tenant: str, calls: list[tuple[str, dict[str, Any], dict[str, Any] | None]]
) -> tuple[list[Any], str]:
    errlog = world.backend.data_dir / f"stdio-{uuid.uuid4().hex[:8]}.err"

    async def run() -> list[Any]:
        params = StdioServerParameters(command=CLI, args=["mcp"], env=_stdio_env(world, tenant))
        with errlog.open("w", encoding="utf-8") as err, anyio.fail_after(TIMEOUT_S):
            async with Client(stdio_client(params, errlog=err), mode="legacy") as client:  # type: ignore[arg-type]
                return [await client.call_tool(t, a, meta=m) for t, a, m in calls]

    results = anyio.run(run)
    return results, errlog.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("bad", ["too-long", "nul", "number"])
def test_mcp_stdio_bad_conversation_id_is_a_recorded_invalid_input(world: World, bad: str) -> None:
    before = _invocation_ids(world)
    (result,), stderr = stdio_calls(
        world,
        "acme",
        [("lookup_knowledge", {"query": QUERY}, {CONVERSATION_META_KEY: BAD_CONVERSATIONS[bad]})],
    )
    assert_no_traceback(stderr)
    _assert_invalid_input_recorded(world, result, before)


def test_mcp_stdio_conversation_of_another_principal_is_refused(
    world: World, globex_conversation: str
) -> None:
    meta = {CONVERSATION_META_KEY: globex_conversation}
    (lookup, check), stderr = stdio_calls(
        world,
        "acme",
        [
            ("lookup_knowledge", {"query": QUERY}, meta),
            ("check_answer", TOOLS["check_answer"], meta),
        ],
    )
    assert_no_traceback(stderr)
    assert lookup.is_error
    assert "forbidden" in lookup.content[0].text
    assert {r.principal_tenant for r in world.records(f"mcp-{globex_conversation}")} == {"globex"}
    assert check.structured_content["verdict"] != "supported"


# --------------------------------------------------------------------------- replay


@pytest.mark.parametrize(
    ("token", "tenant", "secret"),
    [(ACME_TOKEN, "acme", ACME_SECRET), (GLOBEX_TOKEN, "globex", GLOBEX_SECRET)],
    ids=["acme", "globex-with-groups"],
)
def test_replay_of_an_enforced_session_runs_under_its_recorded_principal(
    world: World, token: str, tenant: str, secret: str
) -> None:
    session = new_session(f"replay-{tenant}")
    shown = world.post("/v1/lookup", token, {"query": QUERY, "session_id": session})
    assert secret in shown.text
    report = world.app.replayer().execute(
        ReplaySelection(session_id=session), world.app.settings.to_lookup_config()
    )
    assert report.lost_all == ()
    assert report.groups_unknown == ()
    (replayed,) = report.queries
    assert replayed.after == replayed.before
    records = world.records(report.replay_session_id)
    assert {r.principal_tenant for r in records} == {tenant}
