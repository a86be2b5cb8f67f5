"""Access control in the lookup use case: every pass carries the scope, the
defence-in-depth check drops what the engine should not have returned, the audit
record names the principal, and verification tells ``forbidden`` from ``unknown``."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.answer_check import SearchChunkText
from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.application.ingest import IngestDocuments, StaticDocumentSource
from lookup_knowledge.application.lookup import LookupConfig, LookupOptions
from lookup_knowledge.application.lookup.retriever import ACCESS_DENIED
from lookup_knowledge.application.ports import SourceDocument
from lookup_knowledge.application.verify_citations import VerifyCitations
from lookup_knowledge.domain.access import (
    AccessMode,
    AccessScope,
    DocumentAccess,
    Principal,
    can_see,
    storage_key,
)
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.fakes import FakeClock, FakeSearch, LookupFixture, chunk, make_lookup

ENFORCED = LookupConfig(access_mode=AccessMode.ENFORCED)
ACME = Principal("acme", "alice", frozenset({"hr"}))
GLOBEX = Principal("globex", "bob")
DOMAINS = {"database": ["postgres"]}


def acl(row_chunk: object, access: DocumentAccess) -> object:
    return replace(row_chunk, access=access)  # type: ignore[type-var]


def rows() -> list[object]:
    return [
        acl(chunk("kb/a.md", 0, 0.9, category="database"), DocumentAccess("acme")),
        acl(chunk("kb/b.md", 0, 0.85, category="other"), DocumentAccess("globex")),
        acl(chunk("kb/c.md", 0, 0.8, category="other"), DocumentAccess(public=True)),
        acl(
            chunk("kb/d.md", 0, 0.75, category="other"), DocumentAccess("acme", frozenset({"ops"}))
        ),
        chunk("kb/e.md", 0, 0.7, category="other"),  # no ACL fields at all
    ]


def returned(fx: LookupFixture, principal: Principal | None, query: str = "anything") -> set[str]:
    result = fx.lookup.execute(query, session_id="s", options=LookupOptions(principal=principal))
    return {b.document_id for b in result.evidence_blocks}


def test_enforced_returns_the_tenant_public_and_nothing_else() -> None:
    fx = make_lookup(FakeSearch(rows()), config=ENFORCED)  # type: ignore[arg-type]
    assert returned(fx, ACME) == {"kb/a.md#chunk-0", "kb/c.md#chunk-0"}
    assert returned(fx, GLOBEX) == {"kb/b.md#chunk-0", "kb/c.md#chunk-0"}
    assert returned(fx, Principal("acme", groups=frozenset({"ops"}))) == {
        "kb/a.md#chunk-0",
        "kb/c.md#chunk-0",
        "kb/d.md#chunk-0",
    }


def test_without_a_principal_only_public_documents_are_seen() -> None:
    fx = make_lookup(FakeSearch(rows()), config=ENFORCED)  # type: ignore[arg-type]
    assert returned(fx, None) == {"kb/c.md#chunk-0"}


def test_a_document_without_acl_fields_is_seen_by_nobody_under_enforced() -> None:
    fx = make_lookup(FakeSearch(rows()), config=ENFORCED)  # type: ignore[arg-type]
    for principal in (ACME, GLOBEX, None):
        assert "kb/e.md#chunk-0" not in returned(fx, principal)


def test_off_sees_everything_whatever_the_principal() -> None:
    fx = make_lookup(
        FakeSearch(rows()), config=LookupConfig(retrieval=RetrievalSettings(return_n=10))
    )  # type: ignore[arg-type]
    assert len(returned(fx, GLOBEX)) == 5


def test_every_pass_carries_the_scope_including_the_unfiltered_retry() -> None:
    search = FakeSearch(rows())  # type: ignore[arg-type]
    fx = make_lookup(search, config=ENFORCED, domains=DOMAINS)
    result = fx.lookup.execute(
        "postgres tuning", session_id="s", options=LookupOptions(principal=GLOBEX)
    )
    # acme's database chunk is the only one in the category: globex's filtered pass is
    # empty, the unfiltered retry runs, and both carry globex's scope.
    assert [r.category_filter for r in search.requests] == ["database", None]
    assert {r.access for r in search.requests} == {AccessScope(AccessMode.ENFORCED, GLOBEX)}
    assert result.retrieval_trace["fallbackReason"] == "filtered_pass_empty"
    assert "kb/a.md#chunk-0" not in {b.document_id for b in result.evidence_blocks}


def test_late_materialisation_fetches_with_the_scope() -> None:
    config = replace(ENFORCED, late_materialisation=True)
    search = FakeSearch(rows())  # type: ignore[arg-type]
    fx = make_lookup(search, config=config)
    assert returned(fx, ACME) == {"kb/a.md#chunk-0", "kb/c.md#chunk-0"}
    assert search.fetches  # content came from fetch_content, filtered by the same scope


def test_a_broken_engine_returning_another_tenants_chunk_is_caught_and_recorded() -> None:
    search = FakeSearch(rows(), broken_access=True)  # type: ignore[arg-type]
    fx = make_lookup(search, config=ENFORCED)
    result = fx.lookup.execute("anything", session_id="s", options=LookupOptions(principal=ACME))
    shown = {b.document_id for b in result.evidence_blocks}
    assert shown == {"kb/a.md#chunk-0", "kb/c.md#chunk-0"}
    trace = result.retrieval_trace
    assert trace["access"]["droppedByCheck"] == 3
    assert trace["passes"][0]["accessDropped"] == 3
    dropped = {d["document_id"]: d["reason"] for d in trace["dropped"]}
    assert dropped == dict.fromkeys(
        ("kb/b.md#chunk-0", "kb/d.md#chunk-0", "kb/e.md#chunk-0"), ACCESS_DENIED
    )
    record = fx.records[0]
    assert record.retrieval_details["retrievalTrace"]["access"]["droppedByCheck"] == 3
    assert {e.document_id for e in record.evidence} == shown


def test_the_audit_record_names_the_principal_and_the_filter() -> None:
    fx = make_lookup(FakeSearch(rows()), config=ENFORCED)  # type: ignore[arg-type]
    fx.lookup.execute("anything", session_id="s", options=LookupOptions(principal=ACME))
    fx.lookup.execute("anything", session_id="t")
    with_principal, without = fx.records
    assert with_principal.principal_tenant == "acme"
    assert with_principal.principal_user == "alice"
    assert with_principal.principal_groups_hash == ACME.groups_hash()
    assert with_principal.access_mode == "enforced"
    assert with_principal.access_filter is not None
    assert '"acme"' in with_principal.access_filter
    assert without.principal_tenant is None
    assert without.access_filter == "public"


def test_off_records_the_principal_but_no_filter() -> None:
    fx = make_lookup(FakeSearch(rows()))  # type: ignore[arg-type]
    fx.lookup.execute("anything", session_id="s", options=LookupOptions(principal=ACME))
    assert fx.records[0].principal_tenant == "acme"
    assert fx.records[0].access_mode == "off"
    assert fx.records[0].access_filter is None


def off_row_tenants(stored: list[object], late: bool) -> dict[str, str | None]:
    """document_id -> recorded row_tenant of one lookup with access off over ``stored``."""
    config = LookupConfig(retrieval=RetrievalSettings(return_n=10), late_materialisation=late)
    off = make_lookup(FakeSearch(stored), config=config)  # type: ignore[arg-type]
    off.lookup.execute("anything", session_id="t")
    return {e.document_id: e.row_tenant for e in off.records[0].evidence}


def test_each_shown_block_records_the_tenant_of_its_row() -> None:
    # enforced: acme's own row and a public row without a tenant; off without a
    # principal: every tenant's rows, each named ("" for a row without a tenant).
    enforced = make_lookup(FakeSearch(rows()), config=ENFORCED)  # type: ignore[arg-type]
    enforced.lookup.execute("anything", session_id="s", options=LookupOptions(principal=ACME))
    assert {e.document_id: e.row_tenant for e in enforced.records[0].evidence} == {
        "kb/a.md#chunk-0": "acme",
        "kb/c.md#chunk-0": "",
    }
    for late in (False, True):
        assert off_row_tenants(rows(), late) == {
            "kb/a.md#chunk-0": "acme",
            "kb/b.md#chunk-0": "globex",
            "kb/c.md#chunk-0": "",
            "kb/d.md#chunk-0": "acme",
            "kb/e.md#chunk-0": "",
        }


def test_a_row_whose_access_fields_cannot_be_read_records_the_tenant_its_key_carries() -> None:
    # The engine gave no readable ACL (NO_ACL: served only with access off), but the
    # stored key says whose row it is; the Verifier's re-read must address that row.
    tenanted = chunk("kb/f.md", 0, 0.9, vector_id=storage_key("acme", "kb/f.md#chunk-0"))
    malformed = chunk("kb/g.md", 0, 0.8, vector_id="\tno-separator")
    plain = chunk("kb/h.md", 0, 0.7, vector_id="kb/h.md#chunk-0")
    # A tenant no row could be written with (too long): the record must stay valid.
    invalid = chunk("kb/i.md", 0, 0.6, vector_id="\t" + "x" * 200 + "\tkb/i.md#chunk-0")
    for late in (False, True):
        assert off_row_tenants([tenanted, malformed, plain, invalid], late) == {
            "kb/f.md#chunk-0": "acme",
            "kb/g.md#chunk-0": "",
            "kb/h.md#chunk-0": "",
            "kb/i.md#chunk-0": "",
        }


# ----------------------------------------------------------------------------- verify


def _two_tenant_base() -> InMemoryKnowledgeBase:
    kb = InMemoryKnowledgeBase()
    ingest = IngestDocuments(
        store=kb,
        chunker=MarkdownChunker(chunk_size=400),
        clock=FakeClock(),
        embedder=HashingEmbedder(32),
    )
    for tenant, word in (("acme", "anvils"), ("globex", "globes")):
        docs = [
            SourceDocument(
                doc_id="kb/guide.md", text=f"# Guide\n\nAll about {word} and more {word}."
            ),
            SourceDocument(doc_id=f"kb/{tenant}-only.md", text=f"# Only\n\nSecret {word} plan."),
        ]
        ingest.execute(StaticDocumentSource(docs, access=DocumentAccess(tenant)))
    return kb


def test_two_tenants_hold_the_same_doc_path_without_overwriting_each_other() -> None:
    kb = _two_tenant_base()
    keys = sorted(r.storage_key for r in kb.records())
    assert len(keys) == 4
    fx = make_lookup(kb, config=ENFORCED, embedder=HashingEmbedder(32))
    for principal, word in ((ACME, "anvils"), (GLOBEX, "globes")):
        result = fx.lookup.execute(
            "guide", session_id=principal.tenant, options=LookupOptions(principal=principal)
        )
        texts = [b.content for b in result.evidence_blocks]
        assert texts
        assert all(word in t for t in texts)


def test_citing_another_tenants_document_is_forbidden_not_unknown() -> None:
    kb = _two_tenant_base()
    fx = make_lookup(kb, config=ENFORCED, embedder=HashingEmbedder(32))
    fx.lookup.execute("guide", session_id="a", options=LookupOptions(principal=ACME))
    assert fx.audit is not None
    verify = VerifyCitations(fx.audit, fx.recorder, search=kb)
    report = verify.execute(
        "a", ["kb/guide.md#chunk-0", "kb/globex-only.md#chunk-0", "kb/nowhere.md#chunk-0"]
    )
    assert report.valid_ids == ("kb/guide.md#chunk-0",)
    assert report.forbidden == ("kb/globex-only.md#chunk-0",)
    assert report.unknown == ("kb/nowhere.md#chunk-0",)
    assert not report.all_valid


def test_with_access_off_nothing_is_forbidden() -> None:
    kb = _two_tenant_base()
    fx = make_lookup(kb, embedder=HashingEmbedder(32))
    fx.lookup.execute("guide", session_id="a", options=LookupOptions(principal=ACME))
    assert fx.audit is not None
    report = VerifyCitations(fx.audit, fx.recorder, search=kb).execute(
        "a", ["kb/globex-only.md#chunk-0"]
    )
    assert report.forbidden == ()
    assert report.unknown == ("kb/globex-only.md#chunk-0",)


# ----------------------------------------------------------------------------- property

names = st.sampled_from(["acme", "globex", "acme ", "\u0430cme", 'x" or 1==1 or "', "a\\"])
groups = st.frozensets(st.sampled_from(["hr", "ops", "HR", "h'r"]), max_size=2)
accesses = st.one_of(
    st.just(DocumentAccess()),
    st.builds(DocumentAccess, public=st.just(True)),
    st.builds(DocumentAccess, tenant=names.filter(lambda n: n == n.strip()), allowed_groups=groups),
)
principals = st.one_of(
    st.none(),
    st.builds(Principal, tenant=names.filter(lambda n: n == n.strip()), groups=groups),
)
words = st.sampled_from(["disk", "kafka", "postgres", "dns", "refund"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(words, accesses), min_size=1, max_size=8),
    principals,
    words,
    st.sampled_from(list(SearchMode)),
    st.booleans(),
    st.booleans(),
)
def test_no_result_ever_contains_a_chunk_the_principal_may_not_see(
    corpus: list[tuple[str, DocumentAccess]],
    principal: Principal | None,
    query: str,
    mode: SearchMode,
    broken: bool,
    late: bool,
) -> None:
    access_of: dict[str, DocumentAccess] = {}
    if broken:
        fake_rows = []
        for i, (word, access) in enumerate(corpus):
            row = replace(chunk(f"d{i}", 0, 0.9 - i * 0.01, content=f"{word} notes"), access=access)
            fake_rows.append(row)
            access_of[f"d{i}#chunk-0"] = access
        search: object = FakeSearch(fake_rows, broken_access=True)
    else:
        kb = InMemoryKnowledgeBase()
        ingest = IngestDocuments(
            store=kb,
            chunker=MarkdownChunker(chunk_size=400),
            clock=FakeClock(),
            embedder=HashingEmbedder(32),
        )
        for i, (word, access) in enumerate(corpus):
            ingest.execute(
                StaticDocumentSource(
                    [SourceDocument(doc_id=f"d{i}", text=f"# {word}\n\n{word} notes")],
                    access=access,
                    source_name=f"s{i}",
                )
            )
            access_of[f"d{i}#chunk-0"] = access
        search = kb
    config = replace(
        ENFORCED,
        mode=mode,
        late_materialisation=late,
        retrieval=RetrievalSettings(return_n=10, min_relevance=0.0),
    )
    fx = make_lookup(search, config=config, embedder=HashingEmbedder(32))  # type: ignore[arg-type]
    result = fx.lookup.execute(query, session_id="p", options=LookupOptions(principal=principal))
    for block in result.evidence_blocks:
        assert can_see(principal, access_of[block.document_id], AccessMode.ENFORCED)
    for record in fx.records:
        for evidence in record.evidence:
            assert can_see(principal, access_of[evidence.document_id], AccessMode.ENFORCED)
            assert evidence.row_tenant == access_of[evidence.document_id].tenant


def test_current_chunk_text_reads_the_given_tenants_rows_by_document_id() -> None:
    # The answer checker's and the console's re-read: a tenant's rows are stored under
    # its storage keys, and the answer comes back keyed by the bare document_id.
    kb = _two_tenant_base()
    chunk_text = SearchChunkText(kb)
    ids = ["kb/guide.md#chunk-0", "kb/acme-only.md#chunk-0", "kb/nowhere.md#chunk-0"]
    acme = chunk_text.fetch_content(ids, "acme")
    assert set(acme) == {"kb/guide.md#chunk-0", "kb/acme-only.md#chunk-0"}
    assert all("anvils" in t for t in acme.values())
    globex = chunk_text.fetch_content(ids, "globex")
    assert set(globex) == {"kb/guide.md#chunk-0"}
    assert "globes" in globex["kb/guide.md#chunk-0"]
    assert chunk_text.fetch_content(ids) == {}  # no row without a tenant holds them
    assert chunk_text.fetch_content([], "acme") == {}
