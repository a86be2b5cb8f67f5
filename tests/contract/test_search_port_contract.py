"""One contract for ``KnowledgeSearchPort``, run against every search backend.

Backends: the in-memory knowledge base, Milvus Lite (a fresh file per run), a Milvus
server at ``TEST_MILVUS_URI`` when set, and the PyPI ``milvus`` server (2.3.x) started
on 127.0.0.1 for this session when that package is installed (``.[milvus-server]``).
The 2.3 server has no BM25 function and no hybrid search: there the sparse and hybrid
tests check the clear "needs a newer Milvus" error instead, and grouping runs through
the adapter's client-side fallback.

The corpus is written through ``KnowledgeStore`` (the same rows on every backend)
with a deterministic hashing embedder, so every backend answers the same questions.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.application.ports import (
    ChunkRecord,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    KnowledgeStore,
    RankedListSource,
)
from lookup_knowledge.domain.errors import (
    IngestError,
    InvalidInputError,
    SchemaMismatch,
    SearchBadRequest,
    SearchUnavailable,
    UnsupportedSearchMode,
)
from lookup_knowledge.domain.identity import chunk_key
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import ScoreKind, normalise_relevance
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.support.xdist import PYPI_MILVUS

DIM = 64
EMBEDDER = HashingEmbedder(DIM)
ALL_MODES = frozenset(SearchMode)
EXPECTED_KIND = {
    SearchMode.DENSE: ScoreKind.COSINE,
    SearchMode.SPARSE: ScoreKind.BM25,
    SearchMode.HYBRID: ScoreKind.RRF,
}

# ---------------------------------------------------------------------------- corpus

KAFKA = "ops/kafka-lag.md"
DISK = "ops/disk-full.md"
INVOICES = "billing/invoices.md"

DOCS: dict[str, tuple[str, str, list[str]]] = {
    KAFKA: (
        "ops",
        "Kafka consumer lag",
        [
            "Kafka consumer lag grows when the consumer group cannot keep up with producers.",
            "Diagnose kafka consumer lag with kafka-consumer-groups describe for the group.",
            "Fix kafka consumer lag by scaling consumer instances and partitions.",
            "After a kafka consumer restart, lag should shrink within minutes.",
        ],
    ),
    DISK: (
        "ops",
        "Disk full",
        [
            "A full disk stops the database from writing its journal.",
            "Free disk space by rotating logs and removing old snapshots.",
        ],
    ),
    INVOICES: (
        "billing",
        "Invoices",
        [
            "Invoices are issued on the first day of each month.",
            "Billing exports events through a kafka consumer into the ledger.",
            "A credit note corrects an invoice that was issued with a wrong amount.",
        ],
    ),
}

#: Category values stored in the corpus that a naive expression would break on.
HOSTILE_STORED = [
    'quote"inside',
    "back\\slash",
    '" or 1==1 or "',
    "' or ''='",
    "é日本語🙂",
    "tab\tinside",
    "line\nbreak",
    '\\"',
    "trailing\\",
    "x" * 300,
]
#: Filter values stored nowhere: they must match nothing (or be rejected), never widen.
HOSTILE_ABSENT = [
    'ops" or category != "',
    "ops' or 1==1 or '",
    'ops") or (1==1',
    "ops\\",
    '"',
    "\\",
    "",
    " ops",
    "OPS",
    "z" * 10_000,
    "ops\x00",
    "ops\x1b[0m",
]


def hostile_doc(index: int) -> str:
    return f"hostile/doc-{index}.md"


def corpus_records() -> list[ChunkRecord]:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    records: list[ChunkRecord] = []

    def add(doc_id: str, category: str, title: str, texts: list[str]) -> None:
        vectors = EMBEDDER.embed_documents(texts)
        for index, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            records.append(
                ChunkRecord(
                    evidence_key=chunk_key(doc_id, index),
                    doc_id=doc_id,
                    chunk_index=index,
                    text=text,
                    category=category,
                    source=doc_id,
                    title=title,
                    breadcrumb=f"{title} > part {index}",
                    source_type="runbook" if category == "ops" else "markdown",
                    content_hash=f"hash-{doc_id}",
                    ingested_at=now,
                    vector=tuple(vector),
                )
            )

    for doc_id, (category, title, texts) in DOCS.items():
        add(doc_id, category, title, texts)
    for index, category in enumerate(HOSTILE_STORED):
        add(hostile_doc(index), category, f"Hostile {index}", [f"hostile marker {index} text"])
    return records


CORPUS = corpus_records()
TEXT_BY_KEY = {r.evidence_key: r.text for r in CORPUS}

# ---------------------------------------------------------------------------- backends


@dataclass
class Backend:
    name: str
    search: KnowledgeSearchPort
    expected_modes: frozenset[SearchMode] | None  # None: trust capabilities()
    make_broken: Callable[[], KnowledgeSearchPort]
    driver_cause: bool  # a broken driver's exception is chained as __cause__
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()


def _load(store: KnowledgeStore, records: list[ChunkRecord]) -> None:
    store.ensure_collection(DIM)
    store.upsert_chunks(records)


def memory_backend() -> Backend:
    kb = InMemoryKnowledgeBase()
    _load(kb, CORPUS)

    def broken() -> KnowledgeSearchPort:
        other = InMemoryKnowledgeBase()
        _load(other, CORPUS[:2])
        other.close()
        return other

    return Backend("memory", kb, ALL_MODES, broken, driver_cause=False, closers=[kb.close])


def milvus_backend(
    name: str,
    uri_factory: Callable[[], str],
    expected_modes: frozenset[SearchMode] | None,
) -> Backend:
    collection = f"contract_{uuid.uuid4().hex[:12]}"
    connection = MilvusConnection(uri_factory(), timeout_s=30.0)
    store = MilvusKnowledgeStore(connection, collection=collection)
    _load(store, CORPUS)
    # Strong reads: the corpus was written just now (a server's default is Bounded).
    search = MilvusKnowledgeSearch(connection, collection=collection, consistency_level="Strong")
    closers: list[Callable[[], None]] = [connection.close]  # run in reverse order
    if not connection.is_lite:
        closers.append(store.drop_collection)

    def broken() -> KnowledgeSearchPort:
        other_collection = f"broken_{uuid.uuid4().hex[:12]}"
        other = MilvusConnection(uri_factory(), timeout_s=5.0)
        other_store = MilvusKnowledgeStore(other, collection=other_collection)
        _load(other_store, CORPUS[:2])
        if not other.is_lite:
            closers.append(lambda: _drop_quietly(connection, other_collection))
        adapter = MilvusKnowledgeSearch(other, collection=other_collection)
        adapter.search(dense_request("kafka", 1))  # works before the driver breaks
        # Break the driver underneath the adapter: its gRPC channel goes away.
        other.client().close()
        closers.append(other.close)
        return adapter

    return Backend(name, search, expected_modes, broken, driver_cause=True, closers=closers)


def _drop_quietly(connection: MilvusConnection, collection: str) -> None:
    client = connection.client()
    if client.has_collection(collection):
        client.drop_collection(collection)


BACKEND_NAMES = [
    "memory",
    "milvus-lite",
    pytest.param("milvus-env", marks=pytest.mark.milvus_server),
    PYPI_MILVUS,
]


@pytest.fixture(scope="module", params=BACKEND_NAMES)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    name = request.param
    if name == "memory":
        made = memory_backend()
    elif name == "milvus-lite":
        folder: Path = tmp_path_factory.mktemp("milvus-lite")
        counter = iter(range(1000))
        made = milvus_backend(name, lambda: str(folder / f"contract-{next(counter)}.db"), ALL_MODES)
    elif name == "milvus-env":
        uri = os.environ.get("TEST_MILVUS_URI")
        if not uri:
            pytest.skip("TEST_MILVUS_URI is not set")
        made = milvus_backend(name, lambda: uri, None)
    else:
        uri = request.getfixturevalue("pypi_milvus_uri")
        made = milvus_backend(name, lambda: uri, frozenset({SearchMode.DENSE}))
    try:
        yield made
    finally:
        made.close()


# ---------------------------------------------------------------------------- helpers


def dense_request(text: str, top_k: int, **kwargs: Any) -> KnowledgeSearchRequest:
    return KnowledgeSearchRequest(
        query_text=text,
        top_k=top_k,
        mode=SearchMode.DENSE,
        query_vector=tuple(EMBEDDER.embed_query(text)),
        **kwargs,
    )


def request_for(mode: SearchMode, text: str, top_k: int, **kwargs: Any) -> KnowledgeSearchRequest:
    return KnowledgeSearchRequest(
        query_text=text,
        top_k=top_k,
        mode=mode,
        query_vector=tuple(EMBEDDER.embed_query(text)) if mode.needs_query_vector else None,
        **kwargs,
    )


def supported(backend: Backend, mode: SearchMode) -> bool:
    return mode in backend.search.capabilities().modes


def run(backend: Backend, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
    """Search, or - for a mode the backend lacks - prove the error is the clear one."""
    if not supported(backend, request.mode):
        with pytest.raises(UnsupportedSearchMode, match=r"2\.5|not enabled"):
            backend.search.search(request)
        pytest.skip(f"{request.mode.value} is unsupported on {backend.name} (error checked)")
    return backend.search.search(request)


def strength(hit: KnowledgeSearchHit) -> float:
    return abs(hit.score) if hit.score_kind is ScoreKind.BM25 else hit.score


# ---------------------------------------------------------------------------- tests


def test_capabilities_are_what_the_backend_offers(backend: Backend) -> None:
    caps = backend.search.capabilities()
    assert SearchMode.DENSE in caps.modes
    if backend.expected_modes is not None:
        assert caps.modes == backend.expected_modes
    assert caps.server_version


@pytest.mark.parametrize("mode", list(SearchMode))
def test_chunks_of_one_document_come_back_as_separate_hits(
    backend: Backend, mode: SearchMode
) -> None:
    hits = run(backend, request_for(mode, "kafka consumer lag", 10))
    kafka = [h for h in hits if h.identity.doc_id == KAFKA]
    assert len(kafka) >= 2, [h.identity.evidence_key for h in hits]
    keys = [h.identity.evidence_key for h in hits]
    assert len(keys) == len(set(keys)), "evidence keys must be distinct"
    for hit in hits:
        assert hit.identity.chunk_index is not None
        assert hit.identity.evidence_key == chunk_key(
            hit.identity.doc_id or "", hit.identity.chunk_index
        )
        assert hit.id == hit.identity.evidence_key
        assert hit.score_kind is EXPECTED_KIND[mode]
    strengths = [strength(h) for h in hits]
    assert strengths == sorted(strengths, reverse=True)


@pytest.mark.parametrize("mode", list(SearchMode))
def test_hits_carry_identity_and_light_metadata(backend: Backend, mode: SearchMode) -> None:
    hits = run(backend, request_for(mode, "kafka consumer lag", 5))
    assert hits
    for hit in hits:
        record = next(r for r in CORPUS if r.evidence_key == hit.identity.evidence_key)
        meta = hit.metadata
        assert meta["doc_id"] == record.doc_id
        assert int(str(meta["chunk_index"])) == record.chunk_index
        assert meta["category"] == record.category
        assert meta["source"] == record.source
        assert meta["title"] == record.title
        assert meta["breadcrumb"] == record.breadcrumb
        assert meta["source_type"] == record.source_type


@pytest.mark.parametrize("mode", list(SearchMode))
def test_category_filter_keeps_only_that_category(backend: Backend, mode: SearchMode) -> None:
    unfiltered = run(backend, request_for(mode, "kafka consumer", 20))
    assert {h.metadata["category"] for h in unfiltered} >= {"ops", "billing"}
    ops = run(backend, request_for(mode, "kafka consumer", 20, category_filter="ops"))
    assert ops
    assert {h.metadata["category"] for h in ops} == {"ops"}
    billing = run(backend, request_for(mode, "kafka consumer", 20, category_filter="billing"))
    assert billing
    assert {h.metadata["doc_id"] for h in billing} == {INVOICES}


MIN_RELEVANCE = RetrievalSettings().min_relevance_for("hybrid")
NONSENSE = "zebra giraffe banana smoothie recipe"


def evidence_strength(hit: KnowledgeSearchHit) -> float:
    """What the lookup judges a hit by: its best normalised per-list score."""
    assert hit.component_scores, f"{hit.identity.evidence_key} carries no component scores"
    return max(normalise_relevance(score, kind) for kind, score in hit.component_scores)


def unrelated_vector(text: str) -> tuple[float, ...]:
    """The embedding of ``text`` with every direction the corpus spans removed: a query
    that shares no meaning with any chunk (cosine 0 to all), whatever the embedder."""
    basis: list[list[float]] = []
    for record in CORPUS:
        assert record.vector is not None
        v = list(record.vector)
        for b in basis:
            dot = sum(x * y for x, y in zip(v, b, strict=True))
            v = [x - dot * y for x, y in zip(v, b, strict=True)]
        norm = sum(x * x for x in v) ** 0.5
        if norm > 1e-9:
            basis.append([x / norm for x in v])
    q = list(EMBEDDER.embed_query(text))
    for b in basis:
        dot = sum(x * y for x, y in zip(q, b, strict=True))
        q = [x - dot * y for x, y in zip(q, b, strict=True)]
    norm = sum(x * x for x in q) ** 0.5
    assert norm > 0.1, "the corpus spans nearly every direction: use a larger DIM"
    return tuple(x / norm for x in q)


def test_hybrid_hits_carry_the_raw_score_of_each_list_even_outside_its_top(
    backend: Backend,
) -> None:
    """Every fused hit has each list's own score for it: the score of the list that ranked
    it, and for a list that did not rank it high enough, the score that list gives it
    (asked of the engine): a hit outside one list's top is weaker there, not without
    evidence. Only a chunk without any query word has no BM25 score."""
    query = "how do I fix kafka lag after a restart of the consumer"
    everything = len(CORPUS)
    dense = {
        h.identity.evidence_key: h.score for h in run(backend, dense_request(query, everything))
    }
    sparse = {
        h.identity.evidence_key: h.score
        for h in run(backend, request_for(SearchMode.SPARSE, query, everything))
    }
    outside = 0
    for per_list in range(2, 9):  # lists shorter than the chunks that match
        hybrid = run(backend, request_for(SearchMode.HYBRID, query, per_list))
        dense_top = sorted(dense, key=lambda k: -dense[k])[:per_list]
        sparse_top = sorted(sparse, key=lambda k: -abs(sparse[k]))[:per_list]
        assert hybrid
        for hit in hybrid:
            key = hit.identity.evidence_key
            components = dict(hit.component_scores)
            assert len(components) == len(hit.component_scores), hit.component_scores
            assert [kind for kind, _ in hit.component_scores] == [
                kind for kind in (ScoreKind.COSINE, ScoreKind.BM25) if kind in components
            ], "dense evidence first, then BM25"
            assert components[ScoreKind.COSINE] == pytest.approx(dense[key], abs=1e-5)
            if key in sparse:
                assert components[ScoreKind.BM25] == pytest.approx(sparse[key], rel=1e-4)
            else:  # no query word in the chunk
                assert ScoreKind.BM25 not in components
            outside += (key not in dense_top) + (key in sparse and key not in sparse_top)
        assert hybrid[0].identity.doc_id == KAFKA
    assert outside, "some fused hit was outside one list's top: the case completed"


@pytest.mark.parametrize("mode", [SearchMode.DENSE, SearchMode.SPARSE])
def test_list_scores_are_the_scores_each_row_has_in_the_full_list(
    backend: Backend, mode: SearchMode
) -> None:
    query = "how do I fix kafka lag after a restart of the consumer"
    request = request_for(mode, query, len(CORPUS))
    full = {h.id: h.score for h in run(backend, request)}
    source = backend.search
    assert isinstance(source, RankedListSource)
    ranked = sorted(full, key=lambda k: -abs(full[k]))
    named = [str(k) for k in ranked[-3:] + ranked[:1]] + ["ops/none.md#chunk-9", "x\x00y"]
    got = source.list_scores(request, mode, named)
    assert set(got) == {str(k) for k in ranked[-3:] + ranked[:1]}
    assert got == pytest.approx({k: full[k] for k in got}, rel=1e-4, abs=1e-5)
    filtered = replace(request, category_filter="billing")
    billing = {h.id for h in run(backend, filtered)}
    assert billing
    assert set(source.list_scores(filtered, mode, [str(k) for k in full])) == billing


def test_a_hybrid_hits_evidence_does_not_depend_on_how_deep_the_lists_were_fetched(
    backend: Backend,
) -> None:
    query = "how do I fix kafka lag after a restart of the consumer"
    shallow = run(backend, request_for(SearchMode.HYBRID, query, 3))
    deep = {
        h.identity.evidence_key: h
        for h in run(backend, request_for(SearchMode.HYBRID, query, len(CORPUS)))
    }
    for hit in shallow:
        other = deep[hit.identity.evidence_key]
        assert dict(hit.component_scores) == pytest.approx(dict(other.component_scores))
        assert evidence_strength(hit) == pytest.approx(evidence_strength(other))


def test_hybrid_strength_separates_a_nonsense_query_from_a_real_one(backend: Backend) -> None:
    nonsense = KnowledgeSearchRequest(
        query_text=NONSENSE,
        top_k=10,
        mode=SearchMode.HYBRID,
        query_vector=unrelated_vector(NONSENSE),
    )
    hits = run(backend, nonsense)
    assert hits, "dense search returns its nearest chunks however far they are"
    # The fused score only says where a hit ranked: the first still looks relevant ...
    assert normalise_relevance(hits[0].score, hits[0].score_kind) >= MIN_RELEVANCE
    # ... its own list scores say it is not evidence.
    assert max(evidence_strength(h) for h in hits) < MIN_RELEVANCE
    assert all(ScoreKind.BM25 not in dict(h.component_scores) for h in hits)  # no shared word

    real = run(backend, request_for(SearchMode.HYBRID, "kafka consumer lag", 10))
    assert real[0].identity.doc_id == KAFKA
    assert evidence_strength(real[0]) >= MIN_RELEVANCE
    assert {kind for kind, _score in real[0].component_scores} == {
        ScoreKind.COSINE,
        ScoreKind.BM25,
    }


@pytest.mark.parametrize("group_size", [None, 2])
def test_hybrid_component_scores_survive_grouping_and_late_materialisation(
    backend: Backend, group_size: int | None
) -> None:
    request = request_for(
        SearchMode.HYBRID, "kafka consumer lag", 3, group_size=group_size, include_content=False
    )
    hits = run(backend, request)
    assert hits
    assert all(h.content is None for h in hits)
    assert all(h.component_scores for h in hits), [h.identity.evidence_key for h in hits]
    assert evidence_strength(hits[0]) >= MIN_RELEVANCE


def test_hybrid_grouping_applies_to_the_fused_list(backend: Backend) -> None:
    """Grouping cuts the fused list; it does not change how a hit was fused. (Lists
    grouped before fusion would keep different chunks of a document in each list.)"""
    query = "kafka consumer lag"
    plain = run(backend, request_for(SearchMode.HYBRID, query, 6))  # 6 hits from each list
    grouped = run(backend, request_for(SearchMode.HYBRID, query, 3, group_size=2))  # 3 * 2
    fused = {h.identity.evidence_key: h for h in plain}
    assert [h.identity.evidence_key for h in grouped[:2]] == [
        h.identity.evidence_key for h in plain[:2]
    ]
    for hit in grouped:
        key = hit.identity.evidence_key
        if key not in fused:
            continue  # below the plain top 6, kept because its document was still open
        assert hit.score == pytest.approx(fused[key].score, rel=1e-6)
        assert dict(hit.component_scores) == pytest.approx(dict(fused[key].component_scores))


def test_top_k_bounds_the_hits(backend: Backend) -> None:
    assert len(backend.search.search(dense_request("kafka consumer lag", 2))) == 2
    assert len(backend.search.search(dense_request("kafka consumer lag", 1))) == 1


@pytest.mark.parametrize("mode", list(SearchMode))
def test_group_size_limits_chunks_per_document(backend: Backend, mode: SearchMode) -> None:
    one = run(backend, request_for(mode, "kafka consumer lag", 3, group_size=1))
    docs = [h.identity.doc_id for h in one]
    assert len(docs) == len(set(docs)), docs
    assert len(docs) <= 3

    two = run(backend, request_for(mode, "kafka consumer lag", 3, group_size=2))
    per_doc = Counter(h.identity.doc_id for h in two)
    assert max(per_doc.values()) <= 2
    assert per_doc[KAFKA] == 2, per_doc  # it has four matching chunks
    assert len(per_doc) <= 3
    # Without grouping, the same top-k is dominated by the one document.
    plain = run(backend, request_for(mode, "kafka consumer lag", 4))
    assert Counter(h.identity.doc_id for h in plain)[KAFKA] >= 3


@pytest.mark.parametrize("mode", list(SearchMode))
def test_include_content_false_then_fetch_content(backend: Backend, mode: SearchMode) -> None:
    light = run(backend, request_for(mode, "kafka consumer lag", 5, include_content=False))
    assert light
    assert all(h.content is None for h in light)
    keys = [h.identity.evidence_key for h in light]
    fetched = backend.search.fetch_content([*keys, "missing/doc.md#chunk-0"])
    assert fetched == {k: TEXT_BY_KEY[k] for k in keys}

    full = run(backend, request_for(mode, "kafka consumer lag", 5))
    assert [h.identity.evidence_key for h in full] == keys
    assert all(h.content == TEXT_BY_KEY[h.identity.evidence_key] for h in full)


def test_fetch_content_with_hostile_keys_returns_only_real_rows(backend: Backend) -> None:
    hostile_keys = [
        'x" or 1==1 or "',
        "a\\",
        '"',
        "",
        "line\nbreak#chunk-0",
        "nul\x00#chunk-0",
        "k" * 5000,
        f"{KAFKA}#chunk-0",
    ]
    assert backend.search.fetch_content(hostile_keys) == {
        f"{KAFKA}#chunk-0": TEXT_BY_KEY[f"{KAFKA}#chunk-0"]
    }
    assert backend.search.fetch_content([]) == {}


@pytest.mark.parametrize("index", range(len(HOSTILE_STORED)))
def test_hostile_filter_values_match_literally(backend: Backend, index: int) -> None:
    value = HOSTILE_STORED[index]
    hits = backend.search.search(dense_request("hostile marker text", 50, category_filter=value))
    assert [h.identity.doc_id for h in hits] == [hostile_doc(index)]
    assert hits[0].metadata["category"] == value


@pytest.mark.parametrize("value", HOSTILE_ABSENT, ids=lambda v: repr(v)[:24])
def test_hostile_filter_values_never_widen_the_search(backend: Backend, value: str) -> None:
    try:
        hits = backend.search.search(dense_request("kafka consumer lag", 50, category_filter=value))
    except (InvalidInputError, SearchBadRequest):
        return  # rejected: as good as matching nothing
    assert hits == []


def test_unknown_category_matches_nothing(backend: Backend) -> None:
    assert backend.search.search(dense_request("kafka", 10, category_filter="nope")) == []


def test_unsupported_modes_fail_with_a_clear_error(backend: Backend) -> None:
    caps = backend.search.capabilities()
    missing = [m for m in SearchMode if m not in caps.modes]
    if backend.expected_modes is not None:
        assert set(missing) == set(ALL_MODES - backend.expected_modes)
    for mode in missing:
        with pytest.raises(UnsupportedSearchMode, match=r"Milvus >= 2\.5") as info:
            backend.search.search(request_for(mode, "kafka", 3))
        assert "mode=dense" in str(info.value)


def test_query_vector_of_the_wrong_dimension_is_a_schema_mismatch(backend: Backend) -> None:
    request = KnowledgeSearchRequest(
        query_text="kafka", top_k=3, mode=SearchMode.DENSE, query_vector=(0.1,) * (DIM + 1)
    )
    with pytest.raises(SchemaMismatch, match=str(DIM)):
        backend.search.search(request)


def test_a_broken_driver_surfaces_as_search_unavailable(backend: Backend) -> None:
    broken = backend.make_broken()
    with pytest.raises(SearchUnavailable) as info:
        broken.search(dense_request("kafka", 3))
    if backend.driver_cause:
        cause = info.value.__cause__
        assert cause is not None
        assert type(cause).__module__.startswith(("pymilvus", "grpc"))
    with pytest.raises(SearchUnavailable):
        broken.fetch_content([f"{KAFKA}#chunk-0"])


@pytest.mark.parametrize("mode", list(SearchMode))
def test_grouping_keeps_documents_with_fewer_chunks_than_the_group_size(
    backend: Backend, mode: SearchMode
) -> None:
    """Grouped top-k = the first k documents of the plain ranking, however many chunks
    each has (Milvus Lite 3.2's own grouping dropped single-chunk documents)."""
    query = "kafka consumer lag"
    wide = run(backend, request_for(mode, query, 40))
    first_docs = list(dict.fromkeys(h.identity.doc_id for h in wide))[:4]
    grouped = run(backend, request_for(mode, query, 4, group_size=3))
    assert list(dict.fromkeys(h.identity.doc_id for h in grouped)) == first_docs


# ---------------------------------------------------------------------------- ownership and
# embedder identity (issue 10): the in-memory knowledge base and Milvus Lite alike


@pytest.fixture(params=["memory", "milvus-lite"])
def fresh_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[KnowledgeStore, KnowledgeSearchPort]]:
    if request.param == "memory":
        kb = InMemoryKnowledgeBase()
        yield kb, kb
        kb.close()
        return
    connection = MilvusConnection(str(tmp_path / "owners.db"), timeout_s=30.0)
    collection = f"owners_{uuid.uuid4().hex[:12]}"
    yield (
        MilvusKnowledgeStore(connection, collection=collection),
        MilvusKnowledgeSearch(connection, collection=collection, consistency_level="Strong"),
    )
    connection.close()


def test_documents_report_their_hash_and_owning_source(
    fresh_store: tuple[KnowledgeStore, KnowledgeSearchPort],
) -> None:
    store, _search = fresh_store
    store.ensure_collection(DIM, EMBEDDER.identity)
    owned = [replace(r, source_name="team-a") for r in CORPUS if r.doc_id == KAFKA]
    store.upsert_chunks(owned)
    [(doc_id, stored)] = store.documents().items()
    assert (doc_id, stored.source_name, stored.content_hash) == (KAFKA, "team-a", f"hash-{KAFKA}")
    assert store.document_hashes([KAFKA]) == {KAFKA: f"hash-{KAFKA}"}


def test_a_dry_run_creates_no_collection(
    fresh_store: tuple[KnowledgeStore, KnowledgeSearchPort],
) -> None:
    store, _search = fresh_store
    store.ensure_collection(DIM, EMBEDDER.identity, create=False)
    assert store.documents() == {}
    assert store.count() == 0
    with pytest.raises(IngestError):
        store.upsert_chunks(CORPUS[:1])


def test_another_embedder_of_the_same_dimension_is_a_schema_mismatch(
    fresh_store: tuple[KnowledgeStore, KnowledgeSearchPort],
) -> None:
    store, search = fresh_store
    store.ensure_collection(DIM, EMBEDDER.identity)
    store.upsert_chunks(CORPUS[:3])
    other = HashingEmbedder(DIM, bigrams=False).identity
    assert other != EMBEDDER.identity
    assert other.dimension == DIM
    store.ensure_collection(DIM, EMBEDDER.identity)  # the same one again is fine
    with pytest.raises(SchemaMismatch, match="embedder"):
        store.ensure_collection(DIM, other)
    vector = tuple(EMBEDDER.embed_query("kafka"))
    for mode in (SearchMode.DENSE, SearchMode.HYBRID):
        if mode not in search.capabilities().modes:
            continue
        with pytest.raises(SchemaMismatch, match="embedder"):
            search.search(
                KnowledgeSearchRequest("kafka", 3, mode, query_vector=vector, embedder=other)
            )
        assert search.search(
            KnowledgeSearchRequest(
                "kafka", 3, mode, query_vector=vector, embedder=EMBEDDER.identity
            )
        )
    # BM25 needs no embedder: a sparse search is not refused.
    if SearchMode.SPARSE in search.capabilities().modes:
        search.search(KnowledgeSearchRequest("kafka", 3, SearchMode.SPARSE, embedder=other))
