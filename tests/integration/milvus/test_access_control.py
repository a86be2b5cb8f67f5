"""Access control end to end on Milvus Lite (issue 14, "Done when"): two tenants ingest
documents with the same doc paths; each tenant's lookups return only its own chunks in
every mode (dense, sparse, hybrid; engine grouping, late materialisation, the unfiltered
retry); the audit store names the principal on every row; citing the other tenant's
document is ``forbidden``. Plus the hostile values and the pre-access collection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.milvus import MilvusConnection, MilvusKnowledgeSearch
from lookup_knowledge.adapters.milvus.filters import access_filter, string_literal
from lookup_knowledge.application.ports import InvocationFilter, KnowledgeSearchRequest
from lookup_knowledge.domain.access import AccessMode, AccessScope, DocumentAccess, Principal
from lookup_knowledge.domain.errors import IngestError, SchemaMismatch
from lookup_knowledge.domain.model import SearchMode

ACME = Principal("acme", "alice", frozenset({"staff"}))
GLOBEX = Principal("globex", "bob", frozenset({"staff"}))
HOSTILE_TENANTS = [
    'acme" or 1==1 or "',
    "acme' or 1==1 or '",
    'acme\\" or tenant != "',
    "acme\\",
    "\u0430cme",  # a Cyrillic a: looks like acme, is not acme
    "x" * 128,
]


def _tenant_folder(root: Path, tenant: str, marker: str) -> Path:
    """The same doc paths for every tenant (``kb/...``); the text carries ``marker``."""
    folder = root / tenant / "kb"
    (folder / "database").mkdir(parents=True)
    (folder / "network").mkdir()
    (folder / "database" / "pool.md").write_text(
        f"# Connection pool\n\n## Sizing\n\nRaise pool_size in PgBouncer ({marker}).\n\n"
        f"## Replication\n\nReplication lag pages the on-call ({marker}).\n",
        encoding="utf-8",
    )
    (folder / "network" / "dns.md").write_text(
        f"# DNS\n\nInternal zones resolve through the resolver ({marker}).\n", encoding="utf-8"
    )
    (folder / "network" / "hr-only.md").write_text(
        f"---\nallowed_groups: [hr]\n---\n# Salaries\n\nThe salary bands ({marker}).\n",
        encoding="utf-8",
    )
    return folder


def _app(tmp_path: Path, **overrides: object) -> LookupApp:
    return create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
            "access.mode": "enforced",
            "rag.domains": {"database": ["postgres", "pgbouncer"]},
            **overrides,
        }
    )


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LookupApp, Path]]:
    root = tmp_path_factory.mktemp("acl")
    app = _app(root)
    for tenant in ("acme", "globex"):
        folder = _tenant_folder(root / "src", tenant, f"{tenant}-marker")
        report = app.ingest([folder], tenant=tenant)
        assert not report.failures, report.failures
    # A public document, and one without any ACL (written with access off).
    public = root / "src" / "public" / "kb-public"
    public.mkdir(parents=True)
    (public / "handbook.md").write_text(
        "# Handbook\n\nPgBouncer and DNS basics for everyone (public-marker).\n", encoding="utf-8"
    )
    app.ingest([public], public=True)
    bare = root / "src" / "bare" / "kb-bare"
    bare.mkdir(parents=True)
    (bare / "orphan.md").write_text(
        "# Orphan\n\nPgBouncer DNS notes nobody owns (orphan-marker).\n", encoding="utf-8"
    )
    app.ingest([bare])
    app.seal_knowledge_store()
    yield app, root
    app.close()


def _texts(app: LookupApp, principal: Principal | None, query: str, **kw: object) -> list[str]:
    result = app.lookup_result(
        query,
        session_id=f"s-{principal.tenant if principal else 'anon'}",
        principal=principal,
        **kw,
    )
    assert result.error_code is None, result.message
    return [b.content for b in result.evidence_blocks]


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
@pytest.mark.parametrize("query", ["pgbouncer pool size", "dns resolver", "salary bands"])
def test_each_tenant_sees_only_its_own_chunks_and_public_ones(
    two_tenants: tuple[LookupApp, Path], mode: str, query: str
) -> None:
    app, _root = two_tenants
    for me, other in ((ACME, "globex"), (GLOBEX, "acme")):
        texts = _texts(app, me, query, mode=mode)
        if query != "salary bands":  # only hr-only documents hold those words
            assert texts, (mode, query)
        joined = " ".join(texts)
        assert f"{other}-marker" not in joined
        assert "orphan-marker" not in joined  # no ACL: nobody, under enforced
        assert all(f"{me.tenant}-marker" in t or "public-marker" in t for t in texts)
        assert "salary" not in joined.lower()  # hr-only: neither principal is in hr


def test_the_unfiltered_retry_carries_the_tenant_filter(tmp_path: Path) -> None:
    # Only globex has a "database" document: acme's filtered pass is empty, the retry runs
    # unfiltered by category, and still sees nothing of globex's.
    app = _app(tmp_path)
    try:
        acme = tmp_path / "src" / "acme" / "kb"
        (acme / "network").mkdir(parents=True)
        (acme / "network" / "dns.md").write_text("# DNS\n\nacme-marker resolver.\n", "utf-8")
        app.ingest([acme], tenant="acme")
        app.ingest([_tenant_folder(tmp_path / "src", "globex", "globex-marker")], tenant="globex")
        app.seal_knowledge_store()
        result = app.lookup_result("postgres pgbouncer", session_id="retry", principal=ACME)
        trace = result.retrieval_trace
        assert trace["fallbackReason"] == "filtered_pass_empty"
        assert len(trace["passes"]) == 2
        assert trace["passes"][0]["hits"] == 0  # globex's database docs are not acme's
        assert all("globex-marker" not in b.content for b in result.evidence_blocks)
        assert [b.content for b in result.evidence_blocks]
    finally:
        app.close()


def test_grouping_and_late_materialisation_carry_the_filter(tmp_path: Path) -> None:
    app = _app(tmp_path, **{"rag.engine-grouping": True, "rag.late-materialisation": True})
    try:
        for tenant in ("acme", "globex"):
            app.ingest(
                [_tenant_folder(tmp_path / "src", tenant, f"{tenant}-marker")], tenant=tenant
            )
        app.seal_knowledge_store()
        for mode in ("dense", "sparse", "hybrid"):
            texts = _texts(app, ACME, "pgbouncer replication", mode=mode)
            assert texts, mode
            assert all("acme-marker" in t for t in texts), mode
    finally:
        app.close()


def test_without_a_principal_only_public_documents(two_tenants: tuple[LookupApp, Path]) -> None:
    app, _root = two_tenants
    texts = _texts(app, None, "pgbouncer dns")
    assert texts
    assert all("public-marker" in t for t in texts)


def test_group_restricted_documents_need_the_group(two_tenants: tuple[LookupApp, Path]) -> None:
    app, _root = two_tenants
    hr = Principal("acme", "carol", frozenset({"hr"}))
    texts = _texts(app, hr, "salary bands")
    assert any("salary" in t.lower() and "acme-marker" in t for t in texts)
    assert all("globex-marker" not in t for t in texts)


def test_the_audit_store_names_the_principal_on_every_row(
    two_tenants: tuple[LookupApp, Path],
) -> None:
    app, _root = two_tenants
    app.lookup("dns resolver", session_id="audit-acme", principal=ACME)
    app.lookup("dns resolver", session_id="audit-globex", principal=GLOBEX)
    app.flush()
    for principal in (ACME, GLOBEX):
        page = app.audit.list_invocations(
            InvocationFilter(tenant=principal.tenant, traffic="all", limit=500)
        )
        assert page.items
        for item in page.items:  # every lookup of this module made for the tenant
            assert item.principal_tenant == principal.tenant
            assert item.principal_user
            assert item.principal_groups_hash
            assert item.access_mode == "enforced"
            if item.session_id == f"audit-{principal.tenant}":
                assert item.principal_user == principal.user
                assert item.principal_groups_hash == principal.groups_hash()
            assert item.access_filter
            assert f'"{principal.tenant}"' in item.access_filter
    stats = app.audit.quality_summary(InvocationFilter().time_range, traffic=None, tenant="acme")
    assert stats.count == len(
        app.audit.list_invocations(InvocationFilter(tenant="acme", traffic="all", limit=500)).items
    )


def test_citing_the_other_tenants_document_is_forbidden(
    two_tenants: tuple[LookupApp, Path],
) -> None:
    app, _root = two_tenants
    result = app.lookup("dns resolver", session_id="cite-acme", principal=ACME)
    own = [b["document_id"] for b in result["evidenceBlocks"]]
    assert "kb/network/dns.md#chunk-0" in own
    # Same path in both tenants: acme's own citation of it is valid. The hr-only doc
    # of globex (and acme's own hr-only doc: acme/alice is not in hr) are forbidden;
    # an id nobody holds is unknown.
    report = app.verify_citations(
        "cite-acme",
        ["kb/network/dns.md#chunk-0", "kb/network/hr-only.md#chunk-0", "kb/none.md#chunk-0"],
        groups=["staff"],
    )
    assert report.valid_ids == ("kb/network/dns.md#chunk-0",)
    assert report.forbidden == ("kb/network/hr-only.md#chunk-0",)
    assert report.unknown == ("kb/none.md#chunk-0",)


def test_a_document_only_the_other_tenant_holds_is_forbidden(tmp_path: Path) -> None:
    app = _app(tmp_path)
    try:
        (tmp_path / "a" / "kb").mkdir(parents=True)
        (tmp_path / "a" / "kb" / "x.md").write_text("# X\n\nacme text about dns.\n", "utf-8")
        (tmp_path / "b" / "kb").mkdir(parents=True)
        (tmp_path / "b" / "kb" / "secret.md").write_text("# S\n\nglobex secret.\n", "utf-8")
        app.ingest([tmp_path / "a" / "kb"], tenant="acme")
        app.ingest([tmp_path / "b" / "kb"], tenant="globex")
        app.lookup("dns", session_id="only", principal=ACME)
        report = app.verify_citations("only", ["kb/secret.md#chunk-0"])
        assert report.forbidden == ("kb/secret.md#chunk-0",)
        assert report.unknown == ()
    finally:
        app.close()


@pytest.mark.parametrize("hostile", HOSTILE_TENANTS)
def test_hostile_tenant_values_stay_values(
    two_tenants: tuple[LookupApp, Path], hostile: str
) -> None:
    app, _root = two_tenants
    # As a principal: matches no stored tenant, so only the public document.
    texts = _texts(app, Principal(hostile, groups=frozenset({'hr" or 1==1 or "', "\\"})), "dns")
    assert all("public-marker" in t for t in texts)
    # As an expression: the whole value is one escaped literal.
    expression = access_filter(AccessScope(AccessMode.ENFORCED, Principal(hostile)))
    assert expression is not None
    assert f"(tenant == {string_literal(hostile)})" in expression


def test_a_hostile_tenant_is_a_tenant_of_its_own(tmp_path: Path) -> None:
    app = _app(tmp_path)
    try:
        for i, tenant in enumerate(HOSTILE_TENANTS):
            folder = tmp_path / f"t{i}" / "kb"
            folder.mkdir(parents=True)
            (folder / "doc.md").write_text(f"# Doc\n\nshared words marker{i}.\n", "utf-8")
            assert not app.ingest([folder], tenant=tenant).failures
        app.seal_knowledge_store()
        for i, tenant in enumerate(HOSTILE_TENANTS):
            for mode in ("dense", "sparse", "hybrid"):
                texts = _texts(app, Principal(tenant), "shared words", mode=mode)
                assert texts == [f"shared words marker{i}."] or all(
                    f"marker{i}." in t for t in texts
                ), (tenant, mode, texts)
    finally:
        app.close()


def test_front_matter_values_are_validated(tmp_path: Path) -> None:
    app = _app(tmp_path)
    try:
        folder = tmp_path / "kb"
        folder.mkdir()
        (folder / "bad.md").write_text("---\ntenant: ' spaced'\n---\n# B\n\nx\n", "utf-8")
        (folder / "groups.md").write_text("---\nallowed_groups: 5\n---\n# G\n\nx\n", "utf-8")
        (folder / "public.md").write_text("---\npublic: maybe\n---\n# P\n\nx\n", "utf-8")
        (folder / "long.md").write_text(f"---\ntenant: {'t' * 129}\n---\n# L\n\nx\n", "utf-8")
        report = app.ingest([folder])
        assert sorted(f.source for f in report.failures) == [
            "bad.md",
            "groups.md",
            "long.md",
            "public.md",
        ]
        assert all("access metadata" in f.reason for f in report.failures)
    finally:
        app.close()


# ----------------------------------------------------------------------------- schema 2


def _version_2_collection(connection: MilvusConnection, name: str) -> None:
    """The layout before access control: schema version 2, no access fields."""
    from pymilvus import DataType

    client = connection.client()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("evidence_key", DataType.VARCHAR, is_primary=True, max_length=2200)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=2048)
    schema.add_field("chunk_index", DataType.INT64)
    for field in ("category", "source", "title", "breadcrumb", "source_type", "source_name"):
        schema.add_field(field, DataType.VARCHAR, max_length=512)
    schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
    schema.add_field("ingested_at", DataType.INT64)
    schema.add_field("text", DataType.VARCHAR, max_length=65535)
    schema.add_field("dense_vector", DataType.FLOAT_VECTOR, dim=384)
    index = client.prepare_index_params()
    index.add_index(field_name="dense_vector", index_type="FLAT", metric_type="COSINE")
    client.create_collection(
        name,
        schema=schema,
        index_params=index,
        properties={"lookup_knowledge.schema_version": "2"},
    )
    client.insert(
        name,
        [
            {
                "evidence_key": "kb/a.md#chunk-0",
                "doc_id": "kb/a.md",
                "chunk_index": 0,
                "category": "",
                "source": "a.md",
                "title": "A",
                "breadcrumb": "",
                "source_type": "markdown",
                "source_name": "kb",
                "content_hash": "h",
                "ingested_at": 0,
                "text": "legacy text",
                "dense_vector": [1.0] + [0.0] * 383,
            }
        ],
    )


def test_a_collection_before_access_control_works_off_and_is_refused_enforced(
    tmp_path: Path,
) -> None:
    connection = MilvusConnection(str(tmp_path / "legacy.db"))
    try:
        _version_2_collection(connection, "legacy")
        search = MilvusKnowledgeSearch(connection, collection="legacy")
        request = KnowledgeSearchRequest(
            query_text="x", top_k=3, mode=SearchMode.DENSE, query_vector=(1.0,) + (0.0,) * 383
        )
        assert [h.identity.evidence_key for h in search.search(request)] == ["kb/a.md#chunk-0"]
        enforced = AccessScope(AccessMode.ENFORCED, ACME)
        with pytest.raises(SchemaMismatch, match="no access fields"):
            search.search(
                KnowledgeSearchRequest(
                    query_text="x",
                    top_k=3,
                    mode=SearchMode.DENSE,
                    query_vector=(1.0,) + (0.0,) * 383,
                    access=enforced,
                )
            )
        with pytest.raises(SchemaMismatch, match="no access fields"):
            search.fetch_content(["kb/a.md#chunk-0"], enforced)
    finally:
        connection.close()
    app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "milvus.uri": str(tmp_path / "legacy.db"),
            "milvus.collection": "legacy",
            "embedder.provider": "hashing",
        }
    )
    try:
        folder = tmp_path / "kb"
        folder.mkdir()
        (folder / "b.md").write_text("# B\n\nnew text\n", "utf-8")
        with pytest.raises(IngestError, match="no access fields"):
            app.ingest([folder], tenant="acme")
        assert not app.ingest([folder]).failures  # without access metadata: as before
    finally:
        app.close()


def test_document_access_of_rows(two_tenants: tuple[LookupApp, Path]) -> None:
    app, _root = two_tenants
    search = app._container.search()
    held = search.document_access(["kb/network/dns.md#chunk-0", "kb/none.md#chunk-0"])
    assert sorted(a.tenant for a in held["kb/network/dns.md#chunk-0"]) == ["acme", "globex"]
    assert "kb/none.md#chunk-0" not in held
    assert DocumentAccess("acme") in held["kb/network/dns.md#chunk-0"]
