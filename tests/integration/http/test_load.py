"""Concurrent agents over real HTTP (uvicorn on loopback): every lookup is answered and
recorded exactly once, with a gap-free seq per session (the full 8 x 200 run is
benchmarks/bench_http.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import httpx
import pytest

from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.application.ports import InvocationFilter
from tests.support.http import sample_app, served

CLIENTS = 8
LOOKUPS = 25
SESSIONS = 3  # fewer sessions than clients: clients share a session's seq counter

QUERIES = [
    "PG-53300 too many connections",
    "how long is the DNS TTL?",
    "数据库主从切换怎么做",
    "rotate the TLS certificate",
    "",  # an invalid query is answered (found false) and recorded too
]


async def _agent(client: httpx.AsyncClient, n: int) -> list[tuple[str, str]]:
    made = []
    for i in range(LOOKUPS):
        session = f"load-{(n + i) % SESSIONS}"
        response = await client.post(
            "/v1/lookup",
            json={
                "query": QUERIES[(n + i) % len(QUERIES)],
                "session_id": session,
                "step_id": f"{n}-{i}",
            },
        )
        assert response.status_code == 200, response.text
        made.append((session, response.json()["invocationId"]))
    return made


@pytest.mark.slow
def test_concurrent_clients_are_each_recorded_once_gap_free(tmp_path: Path) -> None:
    lookup_app = sample_app(tmp_path / "data")
    try:
        with served(create_http_app(lookup_app)) as url:

            async def run() -> list[list[tuple[str, str]]]:
                limits = httpx.Limits(max_connections=CLIENTS)
                async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
                    return await asyncio.gather(*(_agent(client, n) for n in range(CLIENTS)))

            made = [call for agent in asyncio.run(run()) for call in agent]
        assert len(made) == CLIENTS * LOOKUPS
        assert len({invocation_id for _, invocation_id in made}) == len(made)
        assert lookup_app.flush(timeout_s=30)
        per_session = Counter(session for session, _ in made)
        for session, count in per_session.items():
            page = lookup_app.audit.list_invocations(
                InvocationFilter(session_id=session, limit=1000)
            )
            assert sorted(i.seq for i in page.items) == list(range(1, count + 1))
            assert {i.id for i in page.items} == {iid for s, iid in made if s == session}
    finally:
        lookup_app.close()
