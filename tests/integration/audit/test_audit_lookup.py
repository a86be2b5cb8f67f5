"""The real ``LookupKnowledge`` use case records through ``SqlToolInvocationRecorder``;
``VerifyCitations`` then accepts exactly what it returned."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Engine

from lookup_knowledge.adapters.audit import (
    AuditSessionState,
    SqlAuditQueries,
    SqlToolInvocationRecorder,
    build_sql_recorder,
    create_audit_engine,
)
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.lookup import LookupKnowledge
from lookup_knowledge.application.ports import (
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    RecordOutcome,
    SearchCapabilities,
)
from lookup_knowledge.application.verify_citations import VerifyCitations
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope
from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import ScoreKind
from tests.fakes import FakeEmbedder, make_lookup
from tests.support.audit_data import session
from tests.support.tcp_proxy import closed_port

CHUNKS = {
    "refund-policy#chunk-0": ("refund-policy", 0, "billing", "Refunds are issued within 14 days."),
    "refund-policy#chunk-1": ("refund-policy", 1, "billing", "Refunds go to the original card."),
    "vpn-guide#chunk-0": ("vpn-guide", 0, "network", "Connect the VPN before the portal."),
}


class TinySearch(KnowledgeSearchPort):
    """Returns every chunk whose text shares a word with the query, cosine-scored."""

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        words = set(request.query_text.lower().replace("?", "").split())
        hits = []
        for key, (doc, chunk, category, content) in CHUNKS.items():
            if request.category_filter and category != request.category_filter:
                continue
            overlap = len(words & set(content.lower().rstrip(".").split()))
            if overlap:
                hits.append(
                    KnowledgeSearchHit(
                        id=key,
                        score=min(0.99, 0.5 + 0.1 * overlap),
                        score_kind=ScoreKind.COSINE,
                        identity=EvidenceIdentity(key, doc, chunk),
                        content=content if request.include_content else None,
                        metadata={
                            "doc_id": doc,
                            "chunk_index": chunk,
                            "category": category,
                            "source": f"{doc}.md",
                            "title": doc,
                        },
                    )
                )
        return sorted(hits, key=lambda h: -h.score)[: request.top_k]

    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        return {k: CHUNKS[k][3] for k in evidence_keys if k in CHUNKS}

    def capabilities(self) -> SearchCapabilities:
        return SearchCapabilities(modes=frozenset({SearchMode.DENSE}), grouping=False)


def sql_lookup(engine: Engine, spool: Path) -> tuple[LookupKnowledge, SqlToolInvocationRecorder]:
    """The use case over the SQL audit store: its recorder and its session state."""
    recorder = build_sql_recorder(engine, spool, backoff_initial_s=0.0)
    built = make_lookup(
        TinySearch(),
        domains={"billing": ["refund", "refunds"], "network": ["vpn"]},
        recorder=recorder,
        session_state=AuditSessionState(SqlAuditQueries(engine)),
        clock=SystemClock(),
        embedder=FakeEmbedder(),  # TinySearch ignores the vector
    )
    return built.lookup, recorder


def test_lookup_records_and_citations_verify(audit_engine: Engine, tmp_path: Path) -> None:
    lookup, recorder = sql_lookup(audit_engine, tmp_path / "spool")
    sid = session()

    first = lookup.execute("how are refunds issued?", session_id=sid, step_id="plan")
    second = lookup.execute("connect the vpn", session_id=sid, step_id="act")

    assert first.record_outcome is RecordOutcome.COMMITTED
    assert second.record_outcome is RecordOutcome.COMMITTED
    returned = [b.document_id for b in first.evidence_blocks]
    assert "refund-policy#chunk-0" in returned
    assert [b.document_id for b in second.evidence_blocks] == ["vpn-guide#chunk-0"]

    queries = SqlAuditQueries(audit_engine)
    report = VerifyCitations(queries, recorder).execute(
        sid, [*returned, "vpn-guide#chunk-0", "made-up-doc#chunk-9"]
    )
    assert report.valid_ids == (*returned, "vpn-guide#chunk-0")
    assert report.unknown == ("made-up-doc#chunk-9",)
    assert report.conclusive
    sources = {v.document_id: v for v in report.valid}
    assert sources["vpn-guide#chunk-0"].step_id == "act"
    assert sources["vpn-guide#chunk-0"].seq == 2
    assert sources["vpn-guide#chunk-0"].invocation_id == second.invocation_id
    assert sources[returned[0]].invocation_id == first.invocation_id

    detail = queries.get_invocation(first.invocation_id)
    assert detail.summary.status == "ok"
    assert detail.summary.filter_applied == "billing"
    assert detail.retrieval_details["version"] == 1
    assert "retrievalTrace" in detail.retrieval_details
    assert [e.document_id for e in detail.evidence if e.projected] == returned
    # the other session cannot cite what this one saw
    other = VerifyCitations(queries, recorder).execute(session(), returned)
    assert other.valid == ()
    recorder.close()


def test_retrieved_domains_come_from_the_store_across_processes(
    audit_engine: Engine, tmp_path: Path
) -> None:
    sid = session()
    lookup, recorder = sql_lookup(audit_engine, tmp_path / "spool-1")
    lookup.execute("how are refunds issued?", session_id=sid)
    recorder.close()

    restarted, recorder2 = sql_lookup(audit_engine, tmp_path / "spool-2")  # a fresh process
    result = restarted.execute("connect the vpn", session_id=sid)
    assert result.retrieved_domains_this_session == ("billing", "network")
    recorder2.close()


def test_lookup_succeeds_while_the_audit_database_is_down(tmp_path: Path) -> None:
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    lookup, recorder = sql_lookup(dead, tmp_path / "spool")
    sid = session()

    result = lookup.execute("how are refunds issued?", session_id=sid)

    assert result.found
    assert result.record_outcome is RecordOutcome.JOURNALED_OFFLINE
    assert recorder.pending_count(sid) == 1
    assert recorder.failure_count() >= 1
    recorder.close()
    dead.dispose()


def test_session_state_falls_back_to_memory_when_the_store_is_down() -> None:
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    state = AuditSessionState(SqlAuditQueries(dead))
    sid = session()
    state.add_retrieved_domains(sid, ["billing", "", "billing", "network"])
    assert state.retrieved_domains(sid) == ("billing", "network")
    dead.dispose()


def test_session_state_merges_stored_and_new_domains(audit_engine: Engine, tmp_path: Path) -> None:
    sid = session()
    lookup, recorder = sql_lookup(audit_engine, tmp_path / "spool")
    lookup.execute("connect the vpn", session_id=sid)
    recorder.close()
    state = AuditSessionState(SqlAuditQueries(audit_engine), max_sessions=1)
    state.add_retrieved_domains(sid, ["billing"])
    assert state.retrieved_domains(sid) == ("network", "billing")
    state.retrieved_domains(session())  # evicts the first session (max_sessions=1)
    assert state.retrieved_domains(sid) == ("network",)  # reloaded from the store
