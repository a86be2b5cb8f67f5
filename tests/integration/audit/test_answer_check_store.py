"""The answer checker end to end: a real lookup on Milvus Lite, the real SQL audit store
(SQLite and PostgreSQL), ``app.check_answer``. Each named failure is caught: a changed
number, an invented quote, an invented id, an id from another session. Verdicts are
recorded and listed; hash-only and pre-0002 records still check."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import URL

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.audit import create_audit_engine, upgrade_database
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.application.answer_check import answer_check_json
from lookup_knowledge.application.ports import AnswerCheckFilter, InvocationFilter, TimeRange
from lookup_knowledge.domain.answer_check import Verdict
from tests.support.postgres import POSTGRES, isolated_schema

DOCS = {
    "database/pgbouncer.md": (
        "# PgBouncer pools\n\n"
        "PgBouncer keeps 20 server connections per pool by default. Raise default_pool_size "
        "only after checking max_connections on the primary. Error PG-53300 means too many "
        "clients are connected.\n"
    ),
    "operations/failover.md": (
        "# Database failover\n\n"
        "Failover takes about two minutes. Announce it in the incident channel with ticket "
        "OPS-1423 before you promote the standby with `patronictl failover`.\n"
    ),
    "research/myocarditis.md": (
        "# Myocarditis\n\n"
        "IFN-gamma suppressed myocarditis in mice (Fig. 2). In S. aureus carriers the risk "
        "was 2.5 times higher. Survival was 30% in controls versus 60% in treated animals. "
        "Dicer knockdown did not affect silencing in HIV-1-producing cells.\n"
    ),
    "networking/dns.md": (
        "# DNS\n\nInternal zones resolve through 10.20.0.53; the TTL of internal records is "
        "60 seconds.\n"
    ),
}
POOL_QUERY = "PgBouncer server connections per pool PG-53300"
FAILOVER_QUERY = "how long does database failover take"


def _corpus(folder: Path) -> Path:
    for relative, text in DOCS.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


def _url_text(url: str | URL) -> str:
    return url if isinstance(url, str) else url.render_as_string(hide_password=False)


@pytest.fixture(scope="module", params=["sqlite", POSTGRES])
def audit_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('audit') / 'audit.db'}"
        return
    with isolated_schema("lk_check") as url:
        yield _url_text(url)


def _app(data_dir: Path, audit_url: str, **extra: object) -> LookupApp:
    return create_app(
        overrides={
            "data-dir": str(data_dir),
            "embedder.provider": "hashing",
            "audit.database-url": audit_url,
            "rag.min-relevance": 0.0,
            **extra,
        }
    )


@pytest.fixture(scope="module")
def app(audit_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    root = tmp_path_factory.mktemp("kb")
    built = _app(root / "data", audit_url)
    try:
        corpus = _corpus(root / "corpus")
        assert not built.ingest([corpus], root=corpus).failures
        yield built
    finally:
        built.close()


def _block(
    app: LookupApp, session: str, query: str, source: str, category: str | None = None
) -> dict[str, Any]:
    result = app.lookup_result(query, session_id=session, step_id="1", category=category)
    for block in result.evidence_blocks:
        if block.source == source:  # the path under the root (ids carry the source)
            return block.as_json()
    raise AssertionError(f"{source} not returned for {query!r}: {result.evidence_blocks}")


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def test_a_changed_number_is_caught(app: LookupApp) -> None:
    session = _session()
    pool = _block(app, session, POOL_QUERY, "database/pgbouncer.md")["document_id"]
    check = app.check_answer(
        session,
        f"PgBouncer keeps 20 server connections per pool by default [{pool}]. "
        f"PgBouncer keeps 50 server connections per pool by default [{pool}].",
    )
    kept, changed = check.claims
    assert kept.verdict is Verdict.SUPPORTED
    assert changed.verdict is Verdict.UNSUPPORTED
    assert changed.reasons == ('number "50" is not in the cited evidence',)
    assert check.verdict is Verdict.UNSUPPORTED


def test_an_invented_quote_is_caught(app: LookupApp) -> None:
    session = _session()
    failover = _block(app, session, FAILOVER_QUERY, "operations/failover.md")
    cited = failover["document_id"]
    check = app.check_answer(
        session,
        f'The runbook says "Failover takes about two minutes" [{cited}]. '
        f'The runbook says "Failover never needs an announcement" [{cited}].',
    )
    real, invented = check.claims
    assert real.verdict is Verdict.SUPPORTED
    assert real.support is not None
    assert failover["content"][real.support.start : real.support.end] == (
        "Failover takes about two minutes"
    )
    # invented, and it says the opposite of its span ("Announce it in the incident channel")
    assert invented.verdict is Verdict.CONTRADICTED
    assert invented.reasons[0] == (
        'the claim says "never announcement" where the evidence says "announce"'
    )
    assert (
        'quote not found in the cited evidence: "Failover never needs an announcement"'
        in invented.reasons
    )


def test_an_invented_id_is_caught(app: LookupApp) -> None:
    session = _session()
    _block(app, session, POOL_QUERY, "database/pgbouncer.md")
    check = app.check_answer(
        session, "Error PG-53300 means too many clients [database/pgbouncer.md#chunk-99]."
    )
    (claim,) = check.claims
    assert claim.verdict is Verdict.INVALID_CITATION
    assert claim.citations[0].status.value == "unknown"
    assert claim.reasons == ("database/pgbouncer.md#chunk-99: never returned (unknown id)",)


def test_an_id_from_another_session_is_caught_and_the_session_named(app: LookupApp) -> None:
    # Other tests' sessions ("s-…") were shown this block too; "a-…" sorts first.
    mine, other = _session(), f"a-{uuid.uuid4().hex[:10]}"
    _block(app, mine, POOL_QUERY, "database/pgbouncer.md", category="database")
    dns = _block(app, other, "internal DNS resolver TTL", "networking/dns.md")["document_id"]
    check = app.check_answer(mine, f"Internal zones resolve through 10.20.0.53 [{dns}].")
    (claim,) = check.claims
    assert claim.verdict is Verdict.INVALID_CITATION
    assert claim.citations[0].status.value == "not_in_session"
    assert claim.citations[0].other_sessions[0] == other
    assert mine not in claim.citations[0].other_sessions
    assert claim.reasons[0].startswith(
        f"{dns}: not returned in this session (returned in session {other}"
    )


def test_checks_are_recorded_listed_by_session_and_time_and_summarised(app: LookupApp) -> None:
    session = _session()
    pool = _block(app, session, POOL_QUERY, "database/pgbouncer.md")["document_id"]
    first = app.check_answer(session, f"Error PG-53300 means too many clients [{pool}].")
    second = asyncio.run(
        app.acheck_answer(
            session, f"PgBouncer keeps 30 server connections per pool [{pool}]. PG-1 is fine."
        )
    )
    listed = app.answer_checks.list_checks(AnswerCheckFilter(session_id=session))
    assert [s.id for s in listed] == [first.id, second.id]
    assert [s.verdict for s in listed] == [Verdict.SUPPORTED, Verdict.UNSUPPORTED]
    assert (listed[1].claim_count, listed[1].supported_count, listed[1].uncited_count) == (2, 0, 1)
    window = TimeRange(first.created_at, second.created_at)
    assert [s.id for s in app.answer_checks.list_checks(AnswerCheckFilter(time_range=window))] == [
        first.id
    ]
    stored = app.answer_checks.get_check(second.id)
    assert answer_check_json(stored) == answer_check_json(second)
    assert stored.answer_text == second.answer_text
    summary = app.audit.quality_summary(TimeRange(started_from=first.created_at))
    assert summary.claims_checked >= 3
    assert summary.supported_claim_share is not None
    assert 0 < summary.supported_claim_share < 1


MYOCARDITIS_QUERY = "IFN-gamma myocarditis mice survival Dicer knockdown silencing"


def test_claims_are_checked_against_their_aligned_sentence_and_contradictions_stored(
    app: LookupApp,
) -> None:
    session = _session()
    block = _block(app, session, MYOCARDITIS_QUERY, "research/myocarditis.md")
    cited = block["document_id"]
    check = app.check_answer(
        session,
        f"IFN-gamma inhibited myocarditis in mice [{cited}]. "
        f"IFN-gamma enhanced myocarditis in mice [{cited}]. "
        f"Dicer knockdown affected silencing in HIV-1-producing cells [{cited}]. "
        f"Survival was 60% in controls versus 30% in treated animals [{cited}]. "
        f"IFN-gamma suppressed myocarditis in rats [{cited}]. "
        f"In S. aureus carriers the risk was 60% higher [{cited}]. "
        f"Sorafenib-treated mice had less myocarditis [{cited}].",
    )
    verdicts = [c.verdict for c in check.claims]
    assert verdicts == [
        Verdict.SUPPORTED,  # a synonym of the same direction; "S. aureus" ends no sentence
        Verdict.CONTRADICTED,  # direction reversed
        Verdict.CONTRADICTED,  # the span's negation dropped
        Verdict.UNSUPPORTED,  # numbers swapped within the sentence
        Verdict.UNSUPPORTED,  # a rare word the span does not have
        Verdict.UNSUPPORTED,  # a number from another sentence of the block
        Verdict.UNSUPPORTED,  # a drug name the block does not have
    ]
    supported, reversed_, negated, swapped, rats, elsewhere, drug = check.claims
    span = supported.signals["span"]
    assert isinstance(span, dict)
    assert block["content"][span["start"] : span["end"]] == (
        "IFN-gamma suppressed myocarditis in mice (Fig. 2)."
    )
    assert reversed_.reasons[0] == (
        'the claim says "enhanced" where the evidence says "suppressed"'
    )
    assert negated.reasons[0] == 'the claim says "affected" where the evidence says "not affect"'
    assert 'number "60%" is not what the evidence gives for "control"' in swapped.reasons[0]
    assert rats.reasons == ('word "rats" is not in the cited evidence (it says "mice")',)
    assert "not in the aligned span" in elsewhere.reasons[0]
    assert 'name "sorafenib" is not in the cited evidence' in drug.reasons
    assert check.verdict is Verdict.CONTRADICTED

    stored = app.answer_checks.get_check(check.id)
    assert [c.verdict for c in stored.claims] == verdicts
    assert answer_check_json(stored) == answer_check_json(check)
    (listed,) = app.answer_checks.list_checks(AnswerCheckFilter(session_id=session))
    assert (listed.verdict, listed.contradicted_count, listed.supported_count) == (
        Verdict.CONTRADICTED,
        2,
        1,
    )
    summary = app.audit.quality_summary(TimeRange(started_from=check.created_at))
    assert summary.claims_contradicted >= 2


def test_the_shown_text_is_what_the_agent_received(app: LookupApp) -> None:
    session = _session()
    block = _block(app, session, FAILOVER_QUERY, "operations/failover.md")
    assert app.flush(session)
    invocation = app.audit.list_invocations(InvocationFilter(session_id=session)).items[0]
    shown = {e.document_id: e.shown_text for e in app.audit.get_invocation(invocation.id).evidence}
    assert shown[block["document_id"]] == block["content"]


def test_hash_only_records_reread_milvus_and_say_when_the_block_changed(
    audit_url: str, tmp_path: Path
) -> None:
    corpus = _corpus(tmp_path / "corpus")
    with _app(tmp_path / "data", audit_url, **{"audit.keep-shown-text": False}) as lookup_app:
        lookup_app.ingest([corpus], root=corpus)
        session = _session()
        cited = _block(lookup_app, session, FAILOVER_QUERY, "operations/failover.md")["document_id"]
        answer = f"Failover takes about two minutes [{cited}]."
        assert lookup_app.flush(session)
        invocation = lookup_app.audit.list_invocations(InvocationFilter(session_id=session)).items[
            0
        ]
        assert all(
            e.shown_text is None for e in lookup_app.audit.get_invocation(invocation.id).evidence
        )
        assert lookup_app.check_answer(session, answer).verdict is Verdict.SUPPORTED

        (corpus / "operations" / "failover.md").write_text(
            DOCS["operations/failover.md"].replace("two minutes", "ten minutes"), encoding="utf-8"
        )
        lookup_app.ingest([corpus], root=corpus)
        (claim,) = lookup_app.check_answer(session, answer).claims
    assert claim.verdict is Verdict.UNSUPPORTED
    assert claim.reasons == (f"{cited}: evidence changed since shown",)


def test_an_audit_store_written_before_0002_still_verifies_and_checks(
    audit_url: str, tmp_path: Path
) -> None:
    """Records written at revision 0001 (no shown_text column) keep working after the
    upgrade: citations verify, and answers check against the block re-read from Milvus."""
    corpus = _corpus(tmp_path / "corpus")
    session = _session()
    with _app(tmp_path / "data", audit_url) as first:
        first.ingest([corpus], root=corpus)
        cited = _block(first, session, POOL_QUERY, "database/pgbouncer.md")["document_id"]
        assert first.flush(session)
        engine = create_audit_engine(audit_url)
        with engine.connect() as conn:
            head = (
                conn.execute(select(tool_invocation).where(tool_invocation.c.session_id == session))
                .mappings()
                .all()
            )
            rows = (
                conn.execute(
                    select(invocation_evidence).where(invocation_evidence.c.session_id == session)
                )
                .mappings()
                .all()
            )
        engine.dispose()

    if audit_url.startswith("sqlite"):
        old_url = f"sqlite:///{tmp_path / 'old.db'}"
        context: Any = None
    else:
        context = isolated_schema("lk_old")
        old_url = _url_text(context.__enter__())
    try:
        old = create_audit_engine(old_url)
        upgrade_database(old, "0001_audit_store")
        # traffic came in 0003, the principal and access columns in 0004 (their server
        # defaults, or NULL, fill the old rows).
        old_columns = {c.name for c in tool_invocation.columns} - {
            "recorded_at",
            "traffic",
            "principal_tenant",
            "principal_user",
            "principal_groups_hash",
            "access_mode",
            "access_filter",
        }
        # shown_text came in 0002, row_tenant in 0005 (NULL in the old rows).
        old_evidence = {c.name for c in invocation_evidence.columns} - {"shown_text", "row_tenant"}
        with old.begin() as conn:
            # Only the 0001 columns: the INSERT names no shown_text column.
            conn.execute(
                insert(tool_invocation),
                [{k: v for k, v in dict(r).items() if k in old_columns} for r in head],
            )
            conn.execute(
                insert(invocation_evidence),
                [{k: v for k, v in dict(r).items() if k in old_evidence} for r in rows],
            )
        upgrade_database(old)
        old.dispose()
        with _app(tmp_path / "data", old_url) as upgraded:
            report = upgraded.verify_citations(session, [cited, "nope#chunk-0"])
            assert report.valid_ids == (cited,)
            assert report.unknown == ("nope#chunk-0",)
            check = upgraded.check_answer(
                session, f"PgBouncer keeps 20 server connections per pool by default [{cited}]."
            )
        assert check.verdict is Verdict.SUPPORTED
    finally:
        if context is not None:
            context.__exit__(None, None, None)
