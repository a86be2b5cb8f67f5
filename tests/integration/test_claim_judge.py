"""The OpenAI-compatible claim judge against a stub chat server on 127.0.0.1, alone and as
configured in the app (with the embedder's cosine); the checker without an audit store."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.answer_check import OpenAICompatibleClaimJudge
from lookup_knowledge.domain.errors import ConfigurationError, JudgeError
from tests.support.tcp_proxy import closed_port


class StubChat:
    """Answers POST /v1/chat/completions with the next scripted reply."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                stub.headers.append(dict(self.headers))
                status, reply = stub.replies.pop(0)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply_with(self, content: str, status: int = 200) -> None:
        self.replies.append((status, {"choices": [{"message": {"content": content}}]}))


@pytest.fixture
def stub() -> Iterator[StubChat]:
    server = StubChat()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_the_judge_sends_claim_and_evidence_and_parses_the_opinion(stub: StubChat) -> None:
    judge = OpenAICompatibleClaimJudge(base_url=stub.url, model="nli-small", api_key="sk-test")
    stub.reply_with('```json\n{"label": "contradiction", "score": 0.92}\n```')
    opinion = judge.judge("Failover takes ten minutes.", ["Failover takes about two minutes."])
    judge.close()
    assert (opinion.label, opinion.score, opinion.model) == ("contradicted", 0.92, "nli-small")
    (request,) = stub.requests
    assert request["model"] == "nli-small"
    assert request["temperature"] == 0
    assert "Failover takes ten minutes." in request["messages"][1]["content"]
    assert "two minutes" in request["messages"][1]["content"]
    assert stub.headers[0]["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("status", "content", "message"),
    [
        (500, "{}", "HTTP 500"),
        (200, "I think it is fine", "not the JSON asked for"),
        (200, '{"label": "maybe"}', "unknown label"),
        (200, '{"label": "neutral", "score": 7}', "between 0 and 1"),
    ],
)
def test_every_failure_is_a_judge_error_without_the_key(
    stub: StubChat, status: int, content: str, message: str
) -> None:
    judge = OpenAICompatibleClaimJudge(base_url=stub.url, model="m", api_key="sk-secret")
    stub.reply_with(content, status)
    with pytest.raises(JudgeError, match=message) as raised:
        judge.judge("claim", ["evidence"])
    assert "sk-secret" not in str(raised.value)


def test_an_unreachable_judge_is_a_judge_error() -> None:
    judge = OpenAICompatibleClaimJudge(
        base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", timeout_s=2.0
    )
    with pytest.raises(JudgeError, match="unreachable"):
        judge.judge("claim", ["evidence"])


def test_the_configured_judge_and_embedder_add_signals_to_recorded_claims(
    stub: StubChat, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus" / "operations"
    corpus.mkdir(parents=True)
    (corpus / "failover.md").write_text(
        "# Failover\n\nFailover takes about two minutes.\n", encoding="utf-8"
    )
    with create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
            "audit.check.use-embedder": True,
            "audit.check.judge.provider": "openai",
            "audit.check.judge.base-url": stub.url,
            "audit.check.judge.model": "nli-small",
        }
    ) as app:
        app.ingest([corpus.parent], root=corpus.parent)
        result = app.lookup("how long does failover take", session_id="judged")
        cited = result["evidenceBlocks"][0]["document_id"]
        stub.reply_with('{"label": "contradicted", "score": 0.7}')
        check = app.check_answer("judged", f"Failover takes about two minutes [{cited}].")
        stored = app.answer_checks.get_check(check.id)
    (claim,) = stored.claims
    assert claim.verdict.value == "supported"  # the judge never decides
    assert claim.signals["judge"] == {"label": "contradicted", "score": 0.7, "model": "nli-small"}
    assert isinstance(claim.signals["cosine"], float)


def test_with_the_audit_store_off_there_is_nothing_to_check_against(tmp_path: Path) -> None:
    with (
        create_app(
            overrides={
                "data-dir": str(tmp_path / "data"),
                "search.backend": "memory",
                "embedder.provider": "hashing",
                "audit.enabled": False,
            }
        ) as app,
        pytest.raises(ConfigurationError, match=r"audit\.enabled"),
    ):
        app.check_answer("s", "Failover takes two minutes [a#chunk-0].")
