"""Re-reading a tenant's blocks on Milvus Lite (a leftover of issue 14): a tenant's rows
are stored under ``storage_key(tenant, document_id)`` while the audit record, the agent
and the auditor see the bare ``document_id``. With ``audit.keep-shown-text`` false the
answer checker re-reads the shown blocks from the store, and the console shows their
current text: both must read the row each block came from (``row_tenant`` in the
record): the tenant's own, an untenanted public one, or another tenant's public row."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.application.ports import InvocationFilter
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.answer_check import Verdict
from tests.support.http import LOCAL

ACME = Principal("acme", "alice")
GLOBEX = Principal("globex", "bob")
DNS = "kb/network/dns.md#chunk-0"
HANDBOOK = "kb-public/handbook.md#chunk-0"
SHARED = "kb-shared/forwarders.md#chunk-0"  # initech's, public: under initech's key
TEXT = {
    "acme": "Internal zones resolve through the acme resolver at 10.1.1.53 (acme-marker).",
    "globex": "Internal zones resolve through the globex resolver at 10.2.2.53 (globex-marker).",
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    root = tmp_path_factory.mktemp("reread")
    app = create_app(
        overrides={
            "data-dir": str(root / "data"),
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
            "access.mode": "enforced",
            "audit.keep-shown-text": False,  # the record keeps only the hash: re-read
        }
    )
    for tenant, text in TEXT.items():  # the same doc path, each tenant its own text
        folder = root / "src" / tenant / "kb" / "network"
        folder.mkdir(parents=True)
        (folder / "dns.md").write_text(f"# DNS\n\n{text}\n", encoding="utf-8")
        report = app.ingest([folder.parent], tenant=tenant)
        assert not report.failures, report.failures
    public = root / "src" / "public" / "kb-public"
    public.mkdir(parents=True)
    (public / "handbook.md").write_text(
        "# Handbook\n\nThe resolver answers for every zone (public-marker).\n", encoding="utf-8"
    )
    app.ingest([public], public=True)  # public, without a tenant: a bare storage key
    shared = root / "src" / "initech" / "kb-shared"
    shared.mkdir(parents=True)
    (shared / "forwarders.md").write_text(
        "# Forwarders\n\nThe internal zones resolver forwards to 192.0.2.53 (initech-marker).\n",
        encoding="utf-8",
    )
    report = app.ingest([shared], tenant="initech", public=True)  # another tenant's, public
    assert not report.failures, report.failures
    app.seal_knowledge_store()
    yield app
    app.close()


def _shown(app: LookupApp, session_id: str, principal: Principal) -> dict[str, str]:
    result = app.lookup("internal zones resolver", session_id=session_id, principal=principal)
    return {b["document_id"]: b["content"] for b in result["evidenceBlocks"]}


@pytest.mark.parametrize("principal", [ACME, GLOBEX], ids=lambda p: p.tenant)
def test_the_answer_check_rereads_the_sessions_tenant_rows(
    app: LookupApp, principal: Principal
) -> None:
    session = f"check-{principal.tenant}"
    shown = _shown(app, session, principal)
    assert f"({principal.tenant}-marker)" in shown[DNS]
    assert "public-marker" in shown[HANDBOOK]
    app.flush()
    own, public = app.check_answer(
        session,
        f"Internal zones resolve through the {principal.tenant} resolver [{DNS}]. "
        f'The resolver "answers for every zone" [{HANDBOOK}].',
    ).claims
    assert own.verdict is Verdict.SUPPORTED, own.reasons
    assert own.support is not None
    assert own.support.document_id == DNS
    # the support span lies in this tenant's text, not in the other tenant's
    assert TEXT[principal.tenant] in shown[DNS]
    span = shown[DNS][own.support.start : own.support.end]
    assert f"{principal.tenant} resolver" in span
    # a public document without a tenant, shown to the tenant, is read from its bare key
    assert public.verdict is Verdict.SUPPORTED, public.reasons
    assert public.signals["quotes"] == [
        {
            "text": "answers for every zone",
            "document_id": HANDBOOK,
            "start": shown[HANDBOOK].index("answers"),
            "end": shown[HANDBOOK].index("answers") + len("answers for every zone"),
        }
    ]


def test_the_answer_check_does_not_take_the_other_tenants_text(app: LookupApp) -> None:
    _shown(app, "cross-acme", ACME)
    app.flush()
    (claim,) = app.check_answer(
        "cross-acme", f"Internal zones resolve through the resolver at 10.2.2.53 [{DNS}]."
    ).claims
    assert claim.verdict is Verdict.UNSUPPORTED  # globex's address, not in acme's text
    assert claim.signals["missing"] == ["10.2.2.53"], claim.signals


@pytest.mark.parametrize("principal", [ACME, None], ids=lambda p: p.tenant if p else "nobody")
def test_another_tenants_public_row_is_reread_from_its_own_key(
    app: LookupApp, principal: Principal | None
) -> None:
    # Neither acme's keys nor the untenanted ones hold initech's row: only the row
    # tenant in the record says where the block came from.
    session = f"shared-{principal.tenant if principal else 'nobody'}"
    result = app.lookup("internal zones resolver", session_id=session, principal=principal)
    shown = {b["document_id"]: b["content"] for b in result["evidenceBlocks"]}
    assert "initech-marker" in shown[SHARED]
    app.flush()
    (claim,) = app.check_answer(
        session, f'The internal zones resolver "forwards to 192.0.2.53" [{SHARED}].'
    ).claims
    assert claim.verdict is Verdict.SUPPORTED, claim.reasons
    assert claim.support is not None
    assert claim.support.document_id == SHARED
    (record,) = app.audit.list_invocations(InvocationFilter(session_id=session)).items
    rows = {e.document_id: e.row_tenant for e in app.audit.get_invocation(record.id).evidence}
    assert rows[SHARED] == "initech"
    assert rows[HANDBOOK] == ""
    if principal is not None:
        assert rows[DNS] == principal.tenant


def test_evidence_text_reads_the_given_tenants_rows(app: LookupApp) -> None:
    ids = [DNS, HANDBOOK, "kb/none.md#chunk-0"]
    for tenant, text in TEXT.items():
        current = app.evidence_text(ids, tenant=tenant)
        assert set(current) == {DNS}
        assert text in current[DNS]
    untenanted = app.evidence_text(ids)
    assert set(untenanted) == {HANDBOOK}
    assert "public-marker" in untenanted[HANDBOOK]


def test_the_console_shows_the_tenants_current_text(app: LookupApp) -> None:
    result = app.lookup("internal zones resolver", session_id="console-acme", principal=ACME)
    app.flush()
    blocks = {b["document_id"] for b in result["evidenceBlocks"]}
    assert {DNS, HANDBOOK, SHARED} <= blocks
    page = (
        TestClient(create_http_app(app), base_url=LOCAL)
        .get(f"/invocations/{result['invocationId']}")
        .text
    )
    assert page.count("exactly as shown (matches the recorded hash)") == len(blocks)
    assert "no longer holds this chunk" not in page
    assert "acme-marker" in page
    assert "initech-marker" in page  # another tenant's public row, read by its own key
    assert "globex-marker" not in page
    assert '<dd class="row-tenant">initech</dd>' in page
    assert '<dd class="row-tenant">none (untenanted row)</dd>' in page
