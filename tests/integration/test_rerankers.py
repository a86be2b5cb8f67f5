"""The reranker adapters against stub servers on 127.0.0.1 that speak each API (Text
Embeddings Inference ``POST /rerank``; the Cohere-compatible ``POST /v2/rerank`` vLLM
serves), alone and as the app configures them; a server that fails, times out or answers
out of shape is a ``RerankerError``, and through the app a lookup answered without it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.reranking import CohereCompatibleReranker, TeiReranker
from lookup_knowledge.domain.errors import ConfigurationError, RerankerError
from tests.support.tcp_proxy import closed_port

TEXTS = ["Brew green tea leaves.", "The gnuflux capacitor needs current.", "DNS caches answers."]


class StubRerankServer:
    """Answers POST with the next scripted (status, body, delay), recording each request
    (path, body, headers); with nothing scripted it scores like the API it plays."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.replies: list[tuple[int, Any, float]] = []
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body, dict(self.headers)))
                status, reply, delay = (
                    stub.replies.pop(0) if stub.replies else (200, stub.score(body), 0.0)
                )
                if delay:
                    time.sleep(delay)
                data = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test)
                    pass

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def score(self, body: dict[str, Any]) -> Any:
        """Texts mentioning gnuflux score 0.97, others 0.02; sorted best first, as the
        servers sort them, with the extra fields they add."""
        texts = body["texts"] if self.api == "tei" else body["documents"]
        scored = [(i, 0.97 if "gnuflux" in t else 0.02) for i, t in enumerate(texts)]
        scored.sort(key=lambda p: -p[1])
        if self.api == "tei":
            return [{"index": i, "score": s, "text": None} for i, s in scored]
        return {
            "id": "rerank-1",
            "model": body["model"],
            "usage": {"total_tokens": 42},
            "results": [
                {"index": i, "relevance_score": s, "document": {"text": texts[i]}}
                for i, s in scored[: body.get("top_n") or len(scored)]
            ],
        }


def _serve(stub: StubRerankServer) -> Iterator[StubRerankServer]:
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


@pytest.fixture
def tei() -> Iterator[StubRerankServer]:
    yield from _serve(StubRerankServer("tei"))


@pytest.fixture
def cohere() -> Iterator[StubRerankServer]:
    yield from _serve(StubRerankServer("cohere"))


def test_tei_scores_come_back_in_the_order_of_the_texts(tei: StubRerankServer) -> None:
    reranker = TeiReranker(url=tei.url, model="bge-reranker-base", api_key="tei-key")
    scores = reranker.rerank("what is gnuflux", TEXTS)
    reranker.close()
    assert scores == [0.02, 0.97, 0.02]
    ((path, body, headers),) = tei.requests
    assert path == "/rerank"
    assert body == {
        "query": "what is gnuflux",
        "texts": TEXTS,
        "raw_scores": False,
        "truncate": True,
    }
    assert headers["Authorization"] == "Bearer tei-key"
    assert reranker.provider == "tei:bge-reranker-base"


def test_tei_is_asked_for_raw_scores_when_logits_are_configured(tei: StubRerankServer) -> None:
    TeiReranker(url=tei.url, raw_scores=True).rerank("q", TEXTS[:1])
    assert tei.requests[0][1]["raw_scores"] is True


def test_cohere_compatible_scores_come_back_in_the_order_of_the_texts(
    cohere: StubRerankServer,
) -> None:
    reranker = CohereCompatibleReranker(url=cohere.url, model="BAAI/bge-reranker-v2-m3")
    scores = reranker.rerank("what is gnuflux", TEXTS)
    reranker.close()
    assert scores == [0.02, 0.97, 0.02]
    ((path, body, _),) = cohere.requests
    assert path == "/v2/rerank"
    assert body == {
        "model": "BAAI/bge-reranker-v2-m3",
        "query": "what is gnuflux",
        "documents": TEXTS,
        "top_n": 3,
    }
    assert reranker.provider == "cohere:BAAI/bge-reranker-v2-m3"


def test_tei_gets_texts_in_batches_it_accepts(tei: StubRerankServer) -> None:
    texts = [f"text {i}" for i in range(5)] + ["gnuflux"]
    scores = TeiReranker(url=tei.url, batch_size=4).rerank("q", texts)
    assert scores == [0.02] * 5 + [0.97]
    assert [len(body["texts"]) for _, body, _ in tei.requests] == [4, 2]


def test_a_url_that_already_names_the_endpoint_is_used_as_it_is(cohere: StubRerankServer) -> None:
    CohereCompatibleReranker(url=cohere.url + "/v2/rerank", model="m").rerank("q", TEXTS)
    assert cohere.requests[0][0] == "/v2/rerank"


def test_a_transient_failure_is_retried(tei: StubRerankServer) -> None:
    tei.replies.append((503, {"error": "overloaded"}, 0.0))
    reranker = TeiReranker(url=tei.url, max_retries=1, sleep=lambda _: None)
    assert reranker.rerank("gnuflux", TEXTS) == [0.02, 0.97, 0.02]
    assert len(tei.requests) == 2


@pytest.mark.parametrize(
    ("api", "status", "reply", "message"),
    [
        (
            "tei",
            413,
            {"error": "batch too large", "error_type": "Validation"},
            "rejected: HTTP 413",
        ),
        ("tei", 500, {"error": "down"}, "after 1 attempt"),
        ("tei", 200, [{"index": 0, "score": 0.5}], "no score for text 1"),
        ("tei", 200, [{"index": "0", "score": 0.5}], "not shaped as expected"),
        ("tei", 200, {"error": "no"}, "not shaped as expected"),
        ("cohere", 200, {"data": []}, "not shaped as expected"),
        ("cohere", 200, {"results": [{"index": 0, "score": 0.4}]}, "not shaped as expected"),
        ("cohere", 401, {"message": "invalid api token"}, "rejected: HTTP 401"),
    ],
)
def test_every_failure_is_a_reranker_error_without_the_key(
    api: str, status: int, reply: Any, message: str
) -> None:
    stub = StubRerankServer(api)
    for server in _serve(stub):
        cls = TeiReranker if api == "tei" else CohereCompatibleReranker
        reranker = cls(url=server.url, model="m", api_key="rk-secret", max_retries=0)
        server.replies.append((status, reply, 0.0))
        with pytest.raises(RerankerError, match=message) as raised:
            reranker.rerank("q", TEXTS[:2])
        assert "rk-secret" not in str(raised.value)


def test_a_server_that_does_not_answer_in_time_is_a_reranker_error(tei: StubRerankServer) -> None:
    tei.replies.append((200, [], 2.0))
    reranker = TeiReranker(url=tei.url, timeout_s=0.2, max_retries=0)
    with pytest.raises(RerankerError, match="timed out"):
        reranker.rerank("q", TEXTS)


def test_an_unreachable_server_is_a_reranker_error() -> None:
    reranker = CohereCompatibleReranker(
        url=f"http://127.0.0.1:{closed_port()}", model="m", max_retries=0
    )
    with pytest.raises(RerankerError, match="connection failed"):
        reranker.rerank("q", TEXTS)


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "kb").mkdir(parents=True)
    (root / "kb" / "tea.md").write_text("# Tea\n\nBrew green tea leaves.\n", encoding="utf-8")
    (root / "kb" / "flux.md").write_text(
        "# Flux\n\nThe gnuflux capacitor needs tea-warm current.\n", encoding="utf-8"
    )
    return root


def _app(tmp_path: Path, **rerank: object) -> Any:
    return create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.search-mode": "sparse",
            **{f"rag.rerank.{k}": v for k, v in rerank.items()},
        }
    )


@pytest.mark.parametrize("api", ["tei", "cohere"])
def test_the_configured_reranker_scores_the_lookup(api: str, tmp_path: Path) -> None:
    for stub in _serve(StubRerankServer(api)):
        with _app(tmp_path, provider=api, url=stub.url, model="reranker-m") as app:
            corpus = _corpus(tmp_path)
            app.ingest([corpus], root=corpus)
            result = app.lookup_result("green tea", session_id="s")
        assert result.found
        # the stub scores the chunk naming gnuflux highest: it leads, the BM25 best follows
        assert [b.source for b in result.evidence_blocks] == ["kb/flux.md", "kb/tea.md"]
        stage = result.retrieval_trace["reranker"]
        assert (stage["provider"], stage["status"]) == (f"{api}:reranker-m", "applied")
        assert stub.requests


def test_a_configured_reranker_that_is_down_does_not_fail_the_lookup(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with _app(tmp_path, provider="tei", url=url, **{"max-retries": 0}) as app:
        corpus = _corpus(tmp_path)
        app.ingest([corpus], root=corpus)
        result = app.lookup_result("gnuflux", session_id="s")
    assert result.found
    stage = result.retrieval_trace["reranker"]
    assert stage["status"] == "failed"
    assert "reranker_error" in stage["reason"]


@pytest.mark.parametrize(
    ("rerank", "message"),
    [
        ({"provider": "tei"}, r"rag\.rerank\.url is required"),
        ({"provider": "cohere", "url": "http://127.0.0.1:1"}, r"rag\.rerank\.model is required"),
        ({"provider": "jina", "url": "http://127.0.0.1:1"}, r"rag\.rerank\.provider"),
        ({"provider": "tei", "url": "127.0.0.1:1"}, r"rag\.rerank\.url"),
        ({"weight": 2}, r"rag\.rerank\.weight"),
        ({"top-k": 0}, r"rag\.rerank\.top-k"),
        ({"timeout-s": 0}, r"rag\.rerank\.timeout-s"),
    ],
)
def test_reranker_configuration_is_validated_at_start_up(
    rerank: dict[str, object], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _app(tmp_path, **rerank).close()


def test_the_reranker_is_off_by_default(tmp_path: Path) -> None:
    with _app(tmp_path) as app:
        corpus = _corpus(tmp_path)
        app.ingest([corpus], root=corpus)
        result = app.lookup_result("green tea", session_id="s")
    assert "reranker" not in result.retrieval_trace
    assert result.evidence_blocks[0].source == "kb/tea.md"
