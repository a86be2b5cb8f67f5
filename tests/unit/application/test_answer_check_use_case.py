"""``CheckAnswer`` with fakes: statuses, kept and hash-only evidence, the optional judge
and embedder, records, the published JSON."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lookup_knowledge.application.answer_check import (
    AnswerCheckSettings,
    CheckAnswer,
    answer_check_json,
)
from lookup_knowledge.application.ports import (
    AnswerCheckFilter,
    AnswerFormat,
    JudgeMode,
    TimeRange,
)
from lookup_knowledge.domain.access import storage_key
from lookup_knowledge.domain.answer_check import Verdict
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.projection import ELLIPSIS
from tests.fakes import FakeClock, FakeEmbedder, InMemoryRecorder
from tests.fakes.answer_check import (
    FakeChunkText,
    FakeSessionEvidence,
    InMemoryAnswerCheckStore,
    ScriptedJudge,
    SuffixStemmer,
)

POOL = "PgBouncer keeps 20 server connections per pool. Error PG-53300 means too many clients."
FAILOVER = "Failover takes about two minutes. Announce it in the incident channel first."


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def evidence(clock: FakeClock) -> FakeSessionEvidence:
    shown = FakeSessionEvidence()
    at = clock.now()
    shown.show("s-1", "db#chunk-0", POOL, at)
    shown.show("s-1", "ops#chunk-0", FAILOVER, at)
    shown.show("s-2", "db#chunk-9", "Vacuum runs nightly at 02:00.", at)
    return shown


def checker(
    evidence: FakeSessionEvidence,
    clock: FakeClock,
    store: InMemoryAnswerCheckStore | None = None,
    **kwargs: object,
) -> CheckAnswer:
    return CheckAnswer(
        evidence=evidence,
        store=store or InMemoryAnswerCheckStore(),
        recorder=InMemoryRecorder(),
        clock=clock,
        stemmer=SuffixStemmer(),
        **kwargs,  # type: ignore[arg-type]
    )


def test_each_claim_gets_a_verdict_and_the_check_is_recorded(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    store = InMemoryAnswerCheckStore()
    check = checker(evidence, clock, store).execute(
        "s-1",
        "PgBouncer keeps 20 server connections per pool [db#chunk-0]. "
        "Failover takes about five minutes [ops#chunk-0]. "
        "Vacuum runs nightly [db#chunk-9]. "
        "Replicas lag by 16 MB [nope#chunk-1]. "
        "Error PG-53300 means too many clients.",
        step_id="7",
    )
    assert [c.verdict for c in check.claims] == [
        Verdict.SUPPORTED,
        Verdict.UNSUPPORTED,
        Verdict.INVALID_CITATION,
        Verdict.INVALID_CITATION,
        Verdict.UNCITED,
    ]
    assert check.verdict is Verdict.INVALID_CITATION
    assert check.claims[1].reasons == ('number "five minutes" is not in the cited evidence',)
    assert check.claims[2].reasons == (
        "db#chunk-9: not returned in this session (returned in session s-2)",
    )
    assert check.claims[3].citations[0].status.value == "unknown"
    assert store.get_check(check.id) == check
    (summary,) = store.list_checks(AnswerCheckFilter(session_id="s-1"))
    assert (summary.claim_count, summary.supported_count, summary.step_id) == (5, 1, "7")


def test_the_published_json_has_exactly_the_documented_shape(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    check = checker(evidence, clock).execute("s-1", "PG-53300 means too many clients [db#chunk-0].")
    data = answer_check_json(check)
    assert list(data) == ["checkId", "sessionId", "verdict", "claims"]
    (claim,) = data["claims"]
    assert list(claim) == [
        "index",
        "text",
        "start",
        "end",
        "citations",
        "verdict",
        "reasons",
        "support",
        "span",
        "judge",
    ]
    assert claim["citations"] == [{"document_id": "db#chunk-0", "status": "valid"}]
    assert claim["verdict"] == "supported"
    assert list(claim["support"]) == ["document_id", "start", "end", "score"]
    assert POOL[claim["support"]["start"] : claim["support"]["end"]] == (
        "Error PG-53300 means too many clients."
    )


def test_hash_only_evidence_is_reread_and_used_only_while_it_hashes_the_same(
    clock: FakeClock,
) -> None:
    shown = FakeSessionEvidence()
    excerpt = FAILOVER[:20] + ELLIPSIS  # a block cut to the projection budget
    shown.show("s-1", "ops#chunk-0", excerpt, clock.now(), keep_text=False)
    shown.show("s-1", "db#chunk-0", POOL, clock.now(), keep_text=False)
    current = FakeChunkText({"ops#chunk-0": FAILOVER, "db#chunk-0": POOL.replace("20", "50")})
    check = checker(shown, clock, chunk_text=current).execute(
        "s-1", "Failover takes about [ops#chunk-0]. PgBouncer keeps 20 connections [db#chunk-0]."
    )
    same, changed = check.claims
    assert same.verdict is Verdict.SUPPORTED
    assert changed.verdict is Verdict.UNSUPPORTED
    assert changed.reasons == ("db#chunk-0: evidence changed since shown",)
    assert current.fetched == [("db#chunk-0", "ops#chunk-0")]


ACME_POOL = POOL.replace("20", "30")
GLOBEX_POOL = POOL.replace("20", "40")


def _tenant_rows() -> FakeChunkText:
    # One path held by two tenants and by a row without a tenant, each its own text.
    return FakeChunkText(
        {
            "db#chunk-0": POOL,
            storage_key("acme", "db#chunk-0"): ACME_POOL,
            storage_key("globex", "db#chunk-0"): GLOBEX_POOL,
        }
    )


def test_hash_only_evidence_is_reread_from_the_tenant_it_was_shown_for(
    clock: FakeClock,
) -> None:
    shown = FakeSessionEvidence()
    shown.show("s-1", "db#chunk-0", ACME_POOL, clock.now(), keep_text=False, tenant="acme")
    current = _tenant_rows()
    (claim,) = (
        checker(shown, clock, chunk_text=current)
        .execute("s-1", "PgBouncer keeps 30 server connections per pool [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.SUPPORTED, claim.reasons
    # the tenant's rows, and the untenanted ones (a public document without a tenant)
    assert current.tenants == [None, "acme"]
    assert current.fetched == [("db#chunk-0",), ("db#chunk-0",)]


def test_a_tenants_block_from_an_untenanted_row_is_picked_by_its_hash(clock: FakeClock) -> None:
    shown = FakeSessionEvidence()
    shown.show("s-1", "db#chunk-0", POOL, clock.now(), keep_text=False, tenant="acme")
    (claim,) = (
        checker(shown, clock, chunk_text=_tenant_rows())
        .execute("s-1", "PgBouncer keeps 20 server connections per pool [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.SUPPORTED, claim.reasons


def test_each_block_is_reread_for_its_own_invocations_tenant(clock: FakeClock) -> None:
    # Nothing ties a session to one principal: each lookup names its own, and each
    # shown block is re-read from the rows of the tenant its invocation was made for.
    shown = FakeSessionEvidence()
    shown.show("s-1", "db#chunk-0", ACME_POOL, clock.now(), keep_text=False, tenant="acme")
    shown.show("s-1", "db#chunk-0", GLOBEX_POOL, clock.now(), keep_text=False, tenant="globex")
    current = _tenant_rows()
    check = checker(shown, clock, chunk_text=current).execute(
        "s-1",
        "PgBouncer keeps 30 server connections per pool [db#chunk-0]. "
        "PgBouncer keeps 40 server connections per pool [db#chunk-0]. "
        "PgBouncer keeps 50 server connections per pool [db#chunk-0].",
    )
    assert [c.verdict for c in check.claims] == [
        Verdict.SUPPORTED,
        Verdict.SUPPORTED,
        Verdict.UNSUPPORTED,
    ]
    assert all("changed since shown" not in r for c in check.claims for r in c.reasons)
    assert current.tenants == [None, "acme", "globex"]


def test_a_tenants_block_its_tenant_changed_is_changed_not_the_other_tenants_text(
    clock: FakeClock,
) -> None:
    shown = FakeSessionEvidence()
    shown.show("s-1", "db#chunk-0", GLOBEX_POOL, clock.now(), keep_text=False, tenant="acme")
    (claim,) = (
        checker(shown, clock, chunk_text=_tenant_rows())
        .execute("s-1", "PgBouncer keeps 40 server connections per pool [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.UNSUPPORTED
    assert claim.reasons == ("db#chunk-0: evidence changed since shown",)


def test_a_block_with_its_row_tenant_is_reread_from_that_row_only(clock: FakeClock) -> None:
    # acme was shown globex's (public) copy, a lookup without a principal acme's copy
    # (access off): the principal tenant cannot find them, the recorded row tenant can.
    shown = FakeSessionEvidence()
    shown.show(
        "s-1",
        "db#chunk-0",
        GLOBEX_POOL,
        clock.now(),
        keep_text=False,
        tenant="acme",
        row_tenant="globex",
    )
    shown.show("s-2", "db#chunk-0", ACME_POOL, clock.now(), keep_text=False, row_tenant="acme")
    for session, tenant, words in (("s-1", "globex", "40"), ("s-2", "acme", "30")):
        current = _tenant_rows()
        (claim,) = (
            checker(shown, clock, chunk_text=current)
            .execute(session, f"PgBouncer keeps {words} server connections per pool [db#chunk-0].")
            .claims
        )
        assert claim.verdict is Verdict.SUPPORTED, claim.reasons
        assert current.tenants == [tenant]  # exactly the recorded row, nothing else


def test_a_block_from_an_untenanted_row_is_reread_from_it_only(clock: FakeClock) -> None:
    shown = FakeSessionEvidence()
    shown.show(
        "s-1", "db#chunk-0", POOL, clock.now(), keep_text=False, tenant="acme", row_tenant=""
    )
    current = _tenant_rows()
    (claim,) = (
        checker(shown, clock, chunk_text=current)
        .execute("s-1", "PgBouncer keeps 20 server connections per pool [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.SUPPORTED, claim.reasons
    assert current.tenants == [None]


def test_a_recorded_row_that_changed_is_changed_not_another_copys_text(clock: FakeClock) -> None:
    # The untenanted copy still has the shown text, but the block came from acme's row.
    shown = FakeSessionEvidence()
    shown.show(
        "s-1", "db#chunk-0", POOL, clock.now(), keep_text=False, tenant="acme", row_tenant="acme"
    )
    (claim,) = (
        checker(shown, clock, chunk_text=_tenant_rows())
        .execute("s-1", "PgBouncer keeps 20 server connections per pool [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.UNSUPPORTED
    assert claim.reasons == ("db#chunk-0: evidence changed since shown",)


def test_hash_only_evidence_without_a_knowledge_store_is_reported(clock: FakeClock) -> None:
    shown = FakeSessionEvidence()
    shown.show("s-1", "db#chunk-0", POOL, clock.now(), keep_text=False)
    (claim,) = (
        checker(shown, clock, chunk_text=FakeChunkText())
        .execute("s-1", "PgBouncer keeps 20 connections [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.UNSUPPORTED
    assert "no longer in the store" in claim.reasons[0]


def test_evidence_shown_after_the_check_does_not_count(clock: FakeClock) -> None:
    shown = FakeSessionEvidence()
    shown.show("s-1", "db#chunk-0", POOL, clock.now() + timedelta(hours=1))
    (claim,) = (
        checker(shown, clock).execute("s-1", "PG-53300 means too many clients [db#chunk-0].").claims
    )
    assert claim.verdict is Verdict.INVALID_CITATION


def test_in_signal_mode_the_judge_sees_the_aligned_span_and_never_changes_the_verdict(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    judge = ScriptedJudge("contradicted")
    (claim,) = (
        checker(evidence, clock, judge=judge)
        .execute("s-1", "PG-53300 means too many clients [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.signals["judge"] == {"label": "contradicted", "score": 0.9, "model": "scripted"}
    # the judge is given the claim's aligned sentence, not the whole block
    assert judge.calls == [
        (
            "PG-53300 means too many clients.",
            ("Error PG-53300 means too many clients.",),
        )
    ]
    (failed,) = (
        checker(evidence, clock, judge=ScriptedJudge(fail=True))
        .execute("s-1", "PG-53300 means too many clients [db#chunk-0].")
        .claims
    )
    assert failed.verdict is Verdict.SUPPORTED
    assert failed.signals["judge"] == {"error": "judge_error: judge down"}


@pytest.mark.parametrize(
    ("label", "verdict"),
    [
        ("contradicted", Verdict.CONTRADICTED),
        ("neutral", Verdict.UNSUPPORTED),
        ("entailed", Verdict.SUPPORTED),
    ],
)
def test_in_veto_mode_a_contradicting_or_neutral_judge_overturns_supported(
    evidence: FakeSessionEvidence, clock: FakeClock, label: str, verdict: Verdict
) -> None:
    settings = AnswerCheckSettings(judge_mode=JudgeMode.VETO)
    check = checker(evidence, clock, judge=ScriptedJudge(label), settings=settings).execute(
        "s-1", "PG-53300 means too many clients [db#chunk-0]."
    )
    (claim,) = check.claims
    assert claim.verdict is verdict
    assert check.verdict is verdict
    if verdict is not Verdict.SUPPORTED:
        assert claim.reasons == (f"judge scripted: {label}",)
        assert claim.support is None


def test_in_veto_mode_a_failing_judge_leaves_the_verdict(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    settings = AnswerCheckSettings(judge_mode=JudgeMode.VETO)
    (claim,) = (
        checker(evidence, clock, judge=ScriptedJudge(fail=True), settings=settings)
        .execute("s-1", "PG-53300 means too many clients [db#chunk-0].")
        .claims
    )
    assert claim.verdict is Verdict.SUPPORTED


def test_an_embedder_adds_the_cosine(evidence: FakeSessionEvidence, clock: FakeClock) -> None:
    (claim,) = (
        checker(evidence, clock, embedder=FakeEmbedder())
        .execute("s-1", "PG-53300 means too many clients [db#chunk-0].")
        .claims
    )
    assert claim.signals["cosine"] == 1.0  # the fake embeds everything alike


def test_claude_content_blocks_are_checked_with_their_cited_text(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    def block(cited_text: str) -> dict[str, object]:
        return {
            "type": "text",
            "text": "failover takes about two minutes",
            "citations": [
                {
                    "type": "search_result_location",
                    "source": "ops#chunk-0",
                    "cited_text": cited_text,
                    "search_result_index": 0,
                    "start_block_index": 0,
                    "end_block_index": 1,
                }
            ],
        }

    use = checker(evidence, clock)
    real = use.execute("s-1", {"content": [block(FAILOVER)]}, answer_format="anthropic")
    altered = use.execute(
        "s-1", [block(FAILOVER.replace("two", "ten"))], answer_format=AnswerFormat.ANTHROPIC
    )
    assert real.verdict is Verdict.SUPPORTED
    assert altered.verdict is Verdict.UNSUPPORTED
    assert altered.claims[0].reasons[0].startswith("quote not found in the block ops#chunk-0")


def test_bad_input_is_rejected_before_anything_is_read(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    use = checker(evidence, clock)
    with pytest.raises(InvalidInputError):
        use.execute("s-1", "   ")
    with pytest.raises(InvalidInputError):
        use.execute("", "An answer [db#chunk-0].")
    with pytest.raises(InvalidInputError):
        use.execute("s-1", "An answer.", answer_format="html")
    with pytest.raises(InvalidInputError):
        use.execute("s-1", "not blocks", answer_format="anthropic")


def test_claim_counts_give_the_share_of_supported_claims(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    store = InMemoryAnswerCheckStore()
    checker(evidence, clock, store).execute(
        "s-1", "PG-53300 means too many clients [db#chunk-0]. Failover takes an hour [ops#chunk-0]."
    )
    counts = store.claim_counts(TimeRange())
    assert (counts.checks, counts.claims, counts.supported, counts.supported_share) == (
        1,
        2,
        1,
        0.5,
    )


def test_a_citation_the_sessions_principal_could_not_see_is_forbidden(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    # s-1 ran under access control for acme; db#chunk-9 (returned to s-2, globex's) and
    # hr#chunk-0 exist only for globex; nope#chunk-1 exists nowhere.
    from dataclasses import replace

    from lookup_knowledge.application.access_check import CitationAccess
    from lookup_knowledge.application.lookup import LookupConfig, LookupOptions
    from lookup_knowledge.domain.access import AccessMode, DocumentAccess, Principal
    from tests.fakes import FakeSearch, chunk, make_lookup

    rows = [
        replace(chunk("db", 9, 0.9), access=DocumentAccess("globex")),
        replace(chunk("hr", 0, 0.9), access=DocumentAccess("globex")),
    ]
    search = FakeSearch(rows)
    fx = make_lookup(search, config=LookupConfig(access_mode=AccessMode.ENFORCED))
    fx.lookup.execute(
        "anything", session_id="s-1", options=LookupOptions(principal=Principal("acme"))
    )
    assert fx.audit is not None
    search.document_access = lambda ids: {  # type: ignore[method-assign]
        f"{r.metadata['doc_id']}#chunk-{r.metadata['chunk_index']}": (r.access,) for r in rows
    }
    check = checker(evidence, clock, access=CitationAccess(fx.audit, search)).execute(
        "s-1",
        "Vacuum runs nightly [db#chunk-9]. Salaries are set yearly [hr#chunk-0]. "
        "Replicas lag [nope#chunk-1].",
    )
    statuses = [c.citations[0].status.value for c in check.claims]
    assert statuses == ["forbidden", "forbidden", "unknown"]
    assert check.claims[0].reasons == (
        "db#chunk-9: not visible to this session's principal (forbidden by access control)",
    )
    assert check.verdict is Verdict.INVALID_CITATION


# ------------------------------------------------------------------ stateless clients


def test_an_answers_sessions_are_found_from_the_ids_it_cites_among_the_callers_own(
    clock: FakeClock,
) -> None:
    """A client that keeps no session makes each call its own session: the ids its answer
    cites name them; the one that showed most of them comes first, then the newest; a
    session the caller does not own is never among them."""
    shown = FakeSessionEvidence()
    at = clock.now()
    shown.show("call-01", "db#chunk-0", POOL, at)
    shown.show("call-02", "ops#chunk-0", FAILOVER, at)
    shown.show("call-03", "db#chunk-0", POOL, at)  # the same block, shown again later
    shown.show("call-03", "ops#chunk-0", FAILOVER, at)
    shown.show("call-09", "db#chunk-0", POOL, at)  # newest, but another principal's
    shown.show("rest-1", "db#chunk-0", POOL, at)  # not a per-call session
    answer = "PgBouncer keeps 20 server connections per pool [db#chunk-0]. " + (
        "Failover takes about two minutes [ops#chunk-0]."
    )
    use_case = checker(shown, clock)
    mine = use_case.sessions_cited(answer, "call-", lambda s: s != "call-09")
    assert mine == ("call-03",)
    assert use_case.sessions_cited("Nothing cited here.", "call-", lambda s: True) == ()


def test_a_check_counts_what_its_linked_sessions_were_shown(
    evidence: FakeSessionEvidence, clock: FakeClock
) -> None:
    store = InMemoryAnswerCheckStore()
    answer = "PgBouncer keeps 20 server connections per pool [db#chunk-0]. Vacuum runs nightly [db#chunk-9]."
    alone = checker(evidence, clock, store).execute("s-1", answer)
    assert alone.verdict is Verdict.INVALID_CITATION
    linked = checker(evidence, clock, store).execute("s-1", answer, linked_sessions=("s-2",))
    assert [c.verdict for c in linked.claims] == [Verdict.SUPPORTED, Verdict.SUPPORTED]
    assert linked.session_id == "s-1"
    assert store.get_check(linked.id).session_id == "s-1"
