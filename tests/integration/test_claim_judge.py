"""The claim judges against stub servers on 127.0.0.1 speaking their APIs (an
OpenAI-compatible chat endpoint; Text Embeddings Inference's ``/predict`` with an NLI
model), alone and as configured in the app (signal and veto modes); the checker without
an audit store."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.answer_check import OpenAICompatibleClaimJudge, TeiNliClaimJudge
from lookup_knowledge.application.answer_check import answer_check_json
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


class StubTei(StubChat):
    """Answers POST /predict like TEI with an NLI model: every label with its score."""

    def __init__(self) -> None:
        super().__init__()
        self.url = self.url.removesuffix("/v1")

    def predict(self, entailment: float, neutral: float, contradiction: float) -> None:
        scores = {"entailment": entailment, "neutral": neutral, "contradiction": contradiction}
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        self.replies.append((200, [{"label": k, "score": v} for k, v in ranked]))


def _serve(server: StubChat) -> Iterator[Any]:
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def stub() -> Iterator[StubChat]:
    yield from _serve(StubChat())


@pytest.fixture
def tei() -> Iterator[StubTei]:
    yield from _serve(StubTei())


def test_the_nli_judge_sends_the_pair_to_predict_and_takes_the_best_label(tei: StubTei) -> None:
    judge = TeiNliClaimJudge(base_url=tei.url, model="nli-deberta")
    tei.predict(0.05, 0.15, 0.80)
    opinion = judge.judge("Failover takes ten minutes.", ["Failover takes about two minutes."])
    judge.close()
    assert (opinion.label, opinion.score, opinion.model) == ("contradicted", 0.8, "nli-deberta")
    assert opinion.reason == "NLI: contradiction (0.80)"
    assert tei.requests == [
        {
            "inputs": ["Failover takes about two minutes.", "Failover takes ten minutes."],
            "truncate": True,
        }
    ]


@pytest.mark.parametrize(
    ("status", "reply", "message"),
    [
        (500, {}, "HTTP 500"),
        (200, {"error": "no"}, "not TEI's /predict answer"),
        (200, [{"label": "LABEL_0", "score": 0.9}], "unknown label"),
    ],
)
def test_every_nli_failure_is_a_judge_error(
    tei: StubTei, status: int, reply: Any, message: str
) -> None:
    judge = TeiNliClaimJudge(base_url=tei.url, api_key="tei-secret")
    tei.replies.append((status, reply))
    with pytest.raises(JudgeError, match=message) as raised:
        judge.judge("claim", ["evidence"])
    assert "tei-secret" not in str(raised.value)


def test_a_judge_gets_the_aligned_span_bounded_not_the_whole_block(tei: StubTei) -> None:
    judge = TeiNliClaimJudge(base_url=tei.url)
    tei.predict(0.9, 0.05, 0.05)
    judge.judge("claim", ["word " * 2000])
    premise = tei.requests[0]["inputs"][0]
    assert len(premise) <= 2050
    assert premise.endswith(" …")


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


FAILOVER = (
    "# Failover\n\nPatroni elects a new leader when the primary fails. "
    "Failover takes about two minutes. Announce it in the incident channel.\n"
)


def _veto_app(tmp_path: Path, provider: str, url: str) -> Any:
    corpus = tmp_path / "corpus" / "operations"
    corpus.mkdir(parents=True)
    (corpus / "failover.md").write_text(FAILOVER, encoding="utf-8")
    app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
            "audit.check.judge.provider": provider,
            "audit.check.judge.base-url": url,
            "audit.check.judge.model": "nli-small",
            "audit.check.judge.mode": "veto",
        }
    )
    app.ingest([corpus.parent], root=corpus.parent)
    return app


def test_in_veto_mode_a_contradicting_chat_judge_overturns_a_supported_claim(
    stub: StubChat, tmp_path: Path
) -> None:
    with _veto_app(tmp_path, "openai", stub.url) as app:
        cited = app.lookup("how long does failover take", session_id="veto")["evidenceBlocks"][0][
            "document_id"
        ]
        stub.reply_with(
            '{"label": "contradicted", "score": 0.8, "reason": "the runbook says two minutes"}'
        )
        check = app.check_answer("veto", f"Failover takes about two minutes [{cited}].")
        stored = app.answer_checks.get_check(check.id)
    (claim,) = stored.claims
    assert claim.verdict.value == "contradicted"
    assert claim.reasons == ("judge nli-small: the runbook says two minutes",)
    assert stored.verdict.value == "contradicted"
    # the judge saw the claim's sentence, not the block
    user = stub.requests[0]["messages"][1]["content"]
    assert "Failover takes about two minutes." in user
    assert "Patroni" not in user
    published = answer_check_json(stored)["claims"][0]
    assert published["judge"]["label"] == "contradicted"
    assert published["span"]["document_id"] == cited


def test_in_veto_mode_a_neutral_nli_judge_makes_a_supported_claim_unsupported(
    tei: StubTei, tmp_path: Path
) -> None:
    with _veto_app(tmp_path, "tei", tei.url) as app:
        cited = app.lookup("how long does failover take", session_id="veto")["evidenceBlocks"][0][
            "document_id"
        ]
        tei.predict(0.2, 0.7, 0.1)
        tei.predict(0.9, 0.05, 0.05)
        check = app.check_answer(
            "veto",
            f"Failover takes about two minutes [{cited}]. "
            f"Patroni elects a new leader when the primary fails [{cited}].",
        )
    neutral, entailed = check.claims
    assert neutral.verdict.value == "unsupported"
    assert neutral.reasons == ("judge nli-small: NLI: neutral (0.70)",)
    assert entailed.verdict.value == "supported"
    assert entailed.signals["judge"] == {
        "label": "entailed",
        "score": 0.9,
        "model": "nli-small",
        "reason": "NLI: entailment (0.90)",
    }
    assert tei.requests[0]["inputs"] == [
        "Failover takes about two minutes.",
        "Failover takes about two minutes.",
    ]


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
