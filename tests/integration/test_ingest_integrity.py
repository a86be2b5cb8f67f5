"""Ingest integrity (ownership, ids, recordable evidence, embedder identity, odd files),
through the real adapters: Milvus Lite
for the knowledge base, SQLite and PostgreSQL for the audit store.

Each test is named after the item it pins down and fails on the code before the fix.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.adapters.milvus import MilvusConnection, MilvusKnowledgeStore
from lookup_knowledge.adapters.milvus.schema import DEFAULT_COLLECTION
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import IngestReport, StaticDocumentSource
from lookup_knowledge.application.ports import ChunkRecord, SourceDocument
from lookup_knowledge.domain.errors import IngestConflict, SchemaMismatch
from tests.support.postgres import POSTGRES, isolated_schema

HASHING_DIM = 64
COLLECTION = "knowledge"  # the configured default (milvus.collection)


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _overrides(data: Path, **more: object) -> dict[str, object]:
    return {
        "data-dir": str(data),
        "search.backend": "milvus",
        "embedder.provider": "hashing",
        "embedder.hashing.dimension": HASHING_DIM,
        # Every hit is returned: these tests are about ids and records, not relevance
        # (no found threshold, and no block dropped for being far below the best).
        "rag.min-relevance": 0.0,
        "rag.relevance.min-share-of-best": 0.0,
        **more,
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def app(data: Path) -> Iterator[LookupApp]:
    with create_app(overrides=_overrides(data)) as built:
        yield built


def _doc_ids(app: LookupApp) -> dict[str, str]:
    """doc_id -> owning source, as the knowledge store holds them."""
    return {d: s.source_name for d, s in app._container.store().documents().items()}


# --------------------------------------------------------------------------- items 1 and 2


def test_sync_never_deletes_another_sources_documents(app: LookupApp, tmp_path: Path) -> None:
    corpus, other = tmp_path / "corpus", tmp_path / "other"
    _write(corpus, "database/failover.md", "# Failover\n\nPromote the replica.\n")
    _write(corpus, "network/vpn.md", "# VPN\n\nReconnect the tunnel.\n")
    _write(other, "notes.md", "# Notes\n\nUnrelated notes.\n")
    assert app.ingest([corpus]).added == 2
    report = app.ingest([other], sync=True)
    assert (report.added, report.deleted, report.source_name) == (1, 0, "other")
    assert _doc_ids(app) == {
        "corpus/database/failover.md": "corpus",
        "corpus/network/vpn.md": "corpus",
        "other/notes.md": "other",
    }
    # Its own vanished documents are still deleted by sync, and only those.
    (other / "notes.md").unlink()
    _write(other, "new.md", "# New\n\nNew notes.\n")
    report = app.ingest([other], sync=True)
    assert (report.added, report.deleted) == (1, 1)
    assert set(_doc_ids(app)) == {
        "corpus/database/failover.md",
        "corpus/network/vpn.md",
        "other/new.md",
    }


def test_ingest_docs_sync_after_the_quickstart_keeps_the_sample_corpus(
    app: LookupApp, tmp_path: Path
) -> None:
    from lookup_knowledge.sample_corpus import corpus_path

    corpus = corpus_path()
    categories = sorted(p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("_"))
    first = app.ingest(categories, root=corpus, sync=True)  # as the quickstart does
    assert first.added == 32
    docs = tmp_path / "docs"
    _write(docs, "mine.md", "# Mine\n\nMy own notes.\n")
    report = app.ingest([docs], sync=True)  # the README's next step
    assert (report.added, report.deleted) == (1, 0)
    owners = _doc_ids(app)
    assert len(owners) == 33
    assert sum(1 for o in owners.values() if o == first.source_name) == 32
    again = app.ingest(categories, root=corpus, sync=True)
    assert (again.unchanged, again.deleted) == (32, 0)


def test_a_document_another_source_owns_is_refused_before_anything_is_written(
    app: LookupApp, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    _write(kb, "guides/deploy.md", "# Deploy\n\nRun the pipeline.\n")
    app.ingest([kb])
    before = app._container.store().count()
    host = StaticDocumentSource(
        [
            SourceDocument("host/new.md", "# New\n\nfresh text\n"),
            SourceDocument("kb/guides/deploy.md", "# Deploy\n\nreplaced by the host\n"),
        ],
        source_name="host",
    )
    with pytest.raises(IngestConflict) as refused:
        app.ingest_source(host)
    assert refused.value.code == "ingest_conflict"
    assert "kb/guides/deploy.md" in refused.value.message
    assert "'kb'" in refused.value.message
    assert "\n" not in refused.value.message
    assert refused.value.conflicts == (("kb/guides/deploy.md", "kb"),)
    # Nothing was written: not even the document that did not conflict.
    assert app._container.store().count() == before
    assert set(_doc_ids(app)) == {"kb/guides/deploy.md"}
    # A file given an explicit doc_id owned by another source is refused the same way.
    loose = _write(tmp_path / "loose", "deploy.md", "# Deploy\n\nanother text\n")
    with pytest.raises(IngestConflict):
        app.ingest([loose], doc_id="kb/guides/deploy.md")


def test_dry_run_lists_what_would_change_and_writes_nothing(app: LookupApp, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    _write(kb, "a.md", "# A\n\nalpha\n")
    _write(kb, "b.md", "# B\n\nbeta\n")
    first = app.ingest([kb], dry_run=True)
    assert first.dry_run
    assert first.wrote_nothing
    assert first.plan is not None
    assert first.plan.added == ("kb/a.md", "kb/b.md")
    assert app._container.store().count() == 0
    app.ingest([kb])
    (kb / "b.md").unlink()
    _write(kb, "a.md", "# A\n\nalpha, changed\n")
    _write(kb, "c.md", "# C\n\ngamma\n")
    rows = app._container.store().count()
    plan = app.ingest([kb], sync=True, dry_run=True)
    assert plan.plan is not None
    assert (plan.plan.added, plan.plan.updated, plan.plan.deleted) == (
        ("kb/c.md",),
        ("kb/a.md",),
        ("kb/b.md",),
    )
    assert (plan.added, plan.updated, plan.deleted) == (1, 1, 1)
    assert app._container.store().count() == rows
    assert set(_doc_ids(app)) == {"kb/a.md", "kb/b.md"}
    assert json.loads(json.dumps(plan.as_dict()))["plan"]["deleted"] == ["kb/b.md"]
    # A conflict is listed by a dry run, not raised.
    host = StaticDocumentSource([SourceDocument("kb/a.md", "x")], source_name="host")
    listed = app.ingest_source(host, dry_run=True)
    assert listed.plan is not None
    assert listed.plan.conflicts == (("kb/a.md", "kb"),)


def test_two_folders_with_the_same_file_names_keep_apart(app: LookupApp, tmp_path: Path) -> None:
    for team in ("teamA", "teamB"):
        _write(tmp_path / team, "README.md", f"# {team}\n\nThe {team} readme.\n")
    assert app.ingest([tmp_path / "teamA"]).added == 1
    second = app.ingest([tmp_path / "teamB"])
    assert (second.added, second.updated) == (1, 0)
    assert _doc_ids(app) == {"teamA/README.md": "teamA", "teamB/README.md": "teamB"}
    found = app.lookup("The teamA readme", session_id="teams")
    ids = [b["document_id"] for b in found["evidenceBlocks"]]
    assert "teamA/README.md#chunk-0" in ids
    assert "teamB/README.md#chunk-0" in ids


def test_a_subfolder_ingested_later_keeps_its_ids(app: LookupApp, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    _write(kb, "guides/deploy.md", "# Deploy\n\nRun the pipeline.\n")
    _write(kb, "guides/old.md", "# Old\n\nRetired guide.\n")
    _write(kb, "runbooks/disk.md", "# Disk\n\nFree space.\n")
    app.ingest([kb])
    session = "cite"
    cited = app.lookup("Run the pipeline", session_id=session)["evidenceBlocks"][0]
    assert cited["document_id"] == "kb/guides/deploy.md#chunk-0"
    (kb / "guides" / "old.md").unlink()
    report = app.ingest([kb / "guides"], sync=True)
    assert (report.source_name, report.unchanged, report.deleted, report.added) == (
        "kb",
        1,
        1,
        0,
    )
    assert _doc_ids(app) == {"kb/guides/deploy.md": "kb", "kb/runbooks/disk.md": "kb"}
    # The citation made before still resolves to the same excerpt.
    again = app.lookup("Run the pipeline", session_id=session)["evidenceBlocks"][0]
    assert again["document_id"] == cited["document_id"]
    assert app.verify_citations(session, [cited["document_id"]]).valid_ids == (
        cited["document_id"],
    )


def test_a_collection_written_before_ownership_asks_for_a_reingest(
    tmp_path: Path,
) -> None:
    from pymilvus import DataType

    uri = str(tmp_path / "old.db")
    connection = MilvusConnection(uri)
    try:
        client = connection.client()
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("evidence_key", DataType.VARCHAR, is_primary=True, max_length=2200)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=2048)
        schema.add_field("chunk_index", DataType.INT64)
        for name in ("category", "source", "title", "breadcrumb", "source_type", "content_hash"):
            schema.add_field(name, DataType.VARCHAR, max_length=2048)
        schema.add_field("ingested_at", DataType.INT64)
        schema.add_field("text", DataType.VARCHAR, max_length=65535)
        schema.add_field("dense_vector", DataType.FLOAT_VECTOR, dim=8)
        index = client.prepare_index_params()
        index.add_index(field_name="dense_vector", index_type="AUTOINDEX", metric_type="COSINE")
        client.create_collection(DEFAULT_COLLECTION, schema=schema, index_params=index)
        store = MilvusKnowledgeStore(connection)
        with pytest.raises(SchemaMismatch, match=r"(?i)ingest (the documents )?again") as mismatch:
            store.ensure_collection(8)
        assert "drop this collection and ingest again" in mismatch.value.message
    finally:
        connection.close()


# --------------------------------------------------------------------------- item 3


def test_ingest_refuses_documents_whose_evidence_could_not_be_recorded(
    app: LookupApp, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    _write(kb, "good.md", "# Good\n\nfine\n")
    _write(kb, "long-category.md", f"---\ncategory: {'c' * 256}\n---\n# Long\n\nbody\n")
    report = app.ingest([kb])
    assert report.added == 1
    [failure] = report.failures
    assert failure.source == "long-category.md"
    assert "category" in failure.reason
    assert "255" in failure.reason
    assert set(_doc_ids(app)) == {"kb/good.md"}
    with pytest.raises(Exception, match="doc_id"):
        SourceDocument("d" * 600, "text")
    with pytest.raises(Exception, match="NUL"):
        SourceDocument("doc", "text", category="a\x00b")


def _raw_row(
    embedder: HashingEmbedder, pk: str, doc_id: str, chunk_index: int, text: str, **more: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "evidence_key": pk,
        "doc_id": doc_id,
        "chunk_index": chunk_index,
        "category": "",
        "source": f"{doc_id[:40]}.md",
        "title": "written by another tool",
        "breadcrumb": "",
        "source_type": "markdown",
        "source_name": "other-tool",
        "text": text,
        "bm25_text": text,  # another tool's row: not analysed like ours, still searchable
        "content_hash": "x",
        "ingested_at": 0,
        "dense_vector": embedder.embed_documents([f"\n{text}"])[0],
        # schema 3's access fields: no tenant, no groups, not public (access off here)
        "tenant": "",
        "allowed_groups": [],
        "allowed_groups_key": "",
        "access_public": False,
    }
    row.update(more)
    return row


def _insert(data: Path, rows: list[dict[str, Any]]) -> None:
    connection = MilvusConnection(str(data / "milvus.db"))
    try:
        client = connection.client()
        client.insert(COLLECTION, data=rows)
        client.flush(COLLECTION)
    finally:
        connection.close()


@pytest.fixture(params=["sqlite", POSTGRES])
def audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'audit.db'}"
        return
    with isolated_schema() as url:
        yield url.render_as_string(hide_password=False)


QUERY = "pager rotation escalation policy"


def test_every_answered_lookup_of_unrecordable_rows_has_one_audit_row_with_the_ids_shown(
    tmp_path: Path, audit_url: str
) -> None:
    data = tmp_path / "data"
    kb = tmp_path / "kb"
    _write(kb, "oncall.md", f"# On-call\n\n{QUERY} for the good document.\n")
    overrides = _overrides(data, **{"audit.database-url": audit_url})
    with create_app(overrides=overrides) as first:
        first.ingest([kb])
    embedder = HashingEmbedder(HASHING_DIM)
    text = f"{QUERY} written by another tool."
    _insert(
        data,
        [
            _raw_row(embedder, "long-cat#chunk-0", "long-cat", 0, text, category="c" * 300),
            _raw_row(embedder, f"big#chunk-{2**31}", "big", 2**31, text),
            _raw_row(embedder, "long#chunk-0", "l" * 1500, 0, text),
            _raw_row(embedder, "nul\x00id#chunk-0", "nul\x00id", 0, text),
            _raw_row(embedder, "fine#chunk-0", "fine", 0, text),
        ],
    )
    for mode in ("dense", "sparse", "hybrid"):
        for late in (False, True):
            options = {**overrides, "rag.search-mode": mode, "rag.late-materialisation": late}
            with create_app(overrides=options) as app:
                session = f"item3-{mode}-{late}"
                result = app.lookup(QUERY, session_id=session)
                assert result["found"], (mode, late)
                shown = [b["document_id"] for b in result["evidenceBlocks"]]
                assert set(shown) == {"kb/oncall.md#chunk-0", "fine#chunk-0"}
                # The agent's JSON names none of the dropped rows.
                payload = json.dumps(result, ensure_ascii=False)
                for dropped_id in ("long-cat#", "big#", "llll", "nul\\u0000id"):
                    assert dropped_id not in payload
                app.flush()
                page = app.audit.list_invocations(_filter(session))
                assert len(page.items) == 1
                detail = app.audit.get_invocation(page.items[0].id)
                # Why each was dropped is in the recorded retrieval trace.
                trace = detail.retrieval_details["retrievalTrace"]
                assert isinstance(trace, dict)
                reasons = {d["reason"] for d in trace["dropped"]}
                assert any("category" in r for r in reasons), (mode, late, reasons)
                assert any("chunk_index" in r for r in reasons), reasons
                assert any("document_id" in r and "1024" in r for r in reasons), reasons
                assert any("NUL" in r for r in reasons)
                recorded = [e.document_id for e in sorted(detail.evidence, key=lambda e: e.rank)]
                assert [e for e in recorded if e in shown] == recorded
                projected = [
                    e.document_id
                    for e in sorted(detail.evidence, key=lambda e: e.rank)
                    if e.projected
                ]
                assert projected == shown


def _filter(session: str) -> Any:
    from lookup_knowledge.application.ports import InvocationFilter

    return InvocationFilter(session_id=session)


def test_a_lone_surrogate_id_is_dropped_never_shown_altered(tmp_path: Path) -> None:
    """Milvus cannot even store a lone surrogate; the in-memory knowledge base (and any
    engine a host plugs in) can: the hit is dropped with its reason, never shown."""
    from lookup_knowledge.adapters.audit import (
        SqlAuditQueries,
        build_sql_recorder,
        create_audit_engine,
        upgrade_database,
    )
    from lookup_knowledge.adapters.runtime import InMemorySessionState
    from lookup_knowledge.application.lookup import LookupKnowledge
    from lookup_knowledge.application.lookup.config import PayloadProfile
    from lookup_knowledge.application.query_transformer import QueryTransformer

    embedder = HashingEmbedder(HASHING_DIM)
    kb = InMemoryKnowledgeBase()
    kb.ensure_collection(HASHING_DIM)
    now = SystemClock().now()
    text = f"{QUERY} text"
    vector = tuple(embedder.embed_documents([text])[0])
    kb.upsert_chunks(
        [
            ChunkRecord(f"{d}#chunk-0", d, 0, text, "", f"{d}.md", "", "", "", "h", now, vector)
            for d in ("bad\ud800id", "good")
        ]
    )
    engine = create_audit_engine(f"sqlite:///{tmp_path / 'audit.db'}")
    upgrade_database(engine)
    recorder = build_sql_recorder(engine, tmp_path / "spool")
    lookup = LookupKnowledge(
        search=kb,
        transformer=QueryTransformer({}),
        recorder=recorder,
        session_state=InMemorySessionState(),
        clock=SystemClock(),
        embedder=embedder,
    )
    result = lookup.execute(QUERY, session_id="surrogate").to_tool_json(PayloadProfile.FULL)
    assert [b["document_id"] for b in result["evidenceBlocks"]] == ["good#chunk-0"]
    [dropped] = result["retrievalTrace"]["dropped"]
    assert "surrogate" in dropped["reason"]
    assert "\\ud800" in dropped["document_id"]
    json.dumps(result, ensure_ascii=False).encode("utf-8")
    [row] = SqlAuditQueries(engine).list_invocations(_filter("surrogate")).items
    detail = SqlAuditQueries(engine).get_invocation(row.id)
    assert [e.document_id for e in detail.evidence] == ["good#chunk-0"]
    recorder.close()
    engine.dispose()


# --------------------------------------------------------------------------- item 4


def test_rows_whose_key_differs_from_their_evidence_key_are_fetched_by_it(
    tmp_path: Path,
) -> None:
    data, kb = tmp_path / "data", tmp_path / "kb"
    _write(kb, "good.md", f"# Good\n\n{QUERY} in the good document.\n")
    overrides = _overrides(
        data, **{"rag.late-materialisation": True, "rag.payload.profile": "full"}
    )
    with create_app(overrides=overrides) as first:
        first.ingest([kb])
    embedder = HashingEmbedder(HASHING_DIM)
    text = f"{QUERY} in a row another tool keyed its own way."
    _insert(
        data,
        [
            _raw_row(embedder, "legacy-row-17", "legacy.md", 0, text),
            _raw_row(embedder, "blank#chunk-0", "blank", 0, "   \n"),
        ],
    )
    for mode in ("dense", "hybrid"):
        with create_app(overrides={**overrides, "rag.search-mode": mode}) as app:
            result = app.lookup(QUERY, session_id=f"item4-{mode}")
            blocks = {b["document_id"]: b for b in result["evidenceBlocks"]}
            assert "legacy.md#chunk-0" in blocks, result["retrievalTrace"]
            assert blocks["legacy.md#chunk-0"]["content"].startswith(QUERY)
            assert "blank#chunk-0" not in blocks
            reasons = {d["document_id"]: d["reason"] for d in result["retrievalTrace"]["dropped"]}
            assert reasons == {"blank#chunk-0": "empty text"}
    # Early materialisation serves no empty row either.
    with create_app(overrides={**overrides, "rag.late-materialisation": False}) as app:
        result = app.lookup(QUERY, session_id="item4-early")
        assert "blank#chunk-0" not in {b["document_id"] for b in result["evidenceBlocks"]}
        assert {d["reason"] for d in result["retrievalTrace"]["dropped"]} == {"empty text"}


# --------------------------------------------------------------------------- item 5


def test_a_collection_built_with_another_embedder_is_a_schema_mismatch(
    tmp_path: Path,
) -> None:
    data, kb = tmp_path / "data", tmp_path / "kb"
    _write(kb, "a.md", "# Failover\n\nPromote the replica when the primary fails.\n")
    minilm = {"data-dir": str(data), "search.backend": "milvus", "embedder.provider": "onnx-minilm"}
    with create_app(overrides=minilm) as app:
        app.ingest([kb])
        assert app.lookup("promote the replica", session_id="ok")["found"]
    hashing = {**minilm, "embedder.provider": "hashing", "embedder.hashing.dimension": 384}
    with create_app(overrides=hashing) as app:
        for mode in ("dense", "hybrid"):
            result = app.lookup("promote the replica", session_id="wrong", mode=mode)
            assert not result["found"]
            assert "schema_mismatch" in json.dumps(result)
            assert "embedder.provider=onnx-minilm" in result["message"], result["message"]
        with pytest.raises(SchemaMismatch, match=r"embedder\.provider=onnx-minilm"):
            app.ingest([kb])
    # The collection says which embedder built it.
    with create_app(overrides=minilm) as app:
        assert "onnx-minilm" in str(app._container.store().describe()["embedder"])


# --------------------------------------------------------------------------- item 7


def _ingest_bounded(app: LookupApp, paths: list[Path], **kwargs: Any) -> IngestReport:
    """Ingest in a thread with a deadline: a run that blocks fails the test, not the suite."""
    out: list[IngestReport | BaseException] = []

    def run() -> None:
        try:
            out.append(app.ingest(paths, **kwargs))
        except BaseException as error:
            out.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "ingest blocked"
    [result] = out
    if isinstance(result, BaseException):
        raise result
    return result


def test_a_file_with_a_non_utf8_name_is_a_failure_and_the_rest_is_ingested(
    app: LookupApp, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    _write(kb, "good.md", "# Good\n\nfine\n")
    with open(os.path.join(os.fsencode(kb), b"bad\xff.md"), "wb") as handle:
        handle.write(b"# Bad name\n\nbody\n")
    report = _ingest_bounded(app, [kb], sync=True)
    assert (report.added, report.failed) == (1, 1)
    [failure] = report.failures
    assert failure.source == "bad\\xff.md"
    assert "not valid UTF-8" in failure.reason
    json.dumps(report.as_dict(), ensure_ascii=False).encode("utf-8")
    assert set(_doc_ids(app)) == {"kb/good.md"}


def test_a_named_pipe_is_skipped_and_never_blocks(app: LookupApp, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    _write(kb, "good.md", "# Good\n\nfine\n")
    os.mkfifo(kb / "pipe.md")
    report = _ingest_bounded(app, [kb])
    assert report.added == 1
    [failure] = report.failures
    assert (failure.source, failure.reason) == (
        "pipe.md",
        "not a regular file (a named pipe); skipped",
    )
    # Named explicitly, too.
    again = _ingest_bounded(app, [kb / "pipe.md"], root=kb)
    assert [f.reason for f in again.failures] == ["not a regular file (a named pipe); skipped"]


def test_failure_reasons_are_one_line(app: LookupApp, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    _write(kb, "good.md", "# Good\n\nfine\n")
    _write(kb, "bad-front.md", "---\ntitle: [unclosed\nother: {\n---\nbody\n")
    report = _ingest_bounded(app, [kb])
    [failure] = report.failures
    assert "front matter" in failure.reason
    assert "\n" not in failure.reason
    assert "\r" not in failure.reason
    assert report.added == 1
