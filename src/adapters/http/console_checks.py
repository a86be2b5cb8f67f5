"""Answer checks on the console: the check page (each claim with its verdict, reasons,
citations, the judge's opinion, and the cited blocks as the session was shown them with
the aligned span highlighted), and the per-session / per-invocation verdicts that the
sessions and session pages show in a column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from lookup_knowledge.adapters.http.console_context import Console, console_of, render_page
from lookup_knowledge.adapters.http.render import pathpart
from lookup_knowledge.application.ports import ShownEvidence, reread_tenants
from lookup_knowledge.application.ports.answer_check import (
    AnswerCheck,
    AnswerCheckFilter,
    AnswerCheckSummary,
    CheckedClaim,
)
from lookup_knowledge.domain.answer_check.evidence import shown_text_from

CHECKS_PER_SESSION = 100
CONTEXT_CHARS = 600  # of a cited block around its highlighted span


def session_checks(console: Console, session_id: str) -> tuple[AnswerCheckSummary, ...]:
    return console.checks().list_checks(
        AnswerCheckFilter(session_id=session_id, limit=CHECKS_PER_SESSION, newest_first=True)
    )


def checks_column(
    console: Console, session_ids: Sequence[str]
) -> dict[str, tuple[AnswerCheckSummary, ...]]:
    """Each listed session's answer checks, newest first."""
    return {s: session_checks(console, s) for s in session_ids}


def invocation_verdicts(
    checks: Sequence[AnswerCheck], shown: Sequence[ShownEvidence]
) -> dict[str, list[dict[str, Any]]]:
    """For each invocation of a session: the checked claims that cite a block it showed
    (check id, claim index, verdict), in check order."""
    by_document: dict[str, list[str]] = {}
    for s in shown:
        ids = by_document.setdefault(s.evidence.document_id, [])
        if s.invocation_id not in ids:
            ids.append(s.invocation_id)
    out: dict[str, list[dict[str, Any]]] = {}
    for check in checks:
        for claim in check.claims:
            for cited in claim.cited_ids:
                for invocation_id in by_document.get(cited, ()):
                    out.setdefault(invocation_id, []).append(
                        {"check": check.id, "claim": claim.index, "verdict": claim.verdict.value}
                    )
    return out


def check_page(request: Request, check_id: str) -> Response:
    console = console_of(request)

    def build() -> str:
        check = console.checks().get_check(check_id)
        shown = console.audit().session_evidence(check.session_id)
        texts = _shown_texts(console, shown, {d for c in check.claims for d in c.cited_ids})
        claims = [_claim_view(c, texts) for c in check.claims]
        return render_page(
            "check.html",
            check=check,
            claims=claims,
            session_path=pathpart(check.session_id),
            nav="sessions",
        )

    return console.page(request, build)


def _shown_texts(
    console: Console, shown: Sequence[ShownEvidence], wanted: set[str]
) -> dict[str, dict[str, Any]]:
    """The first showing in the session of each cited block: its invocation, rank and
    the text as shown (kept by the store, or rebuilt from the knowledge base's current
    text and checked against the recorded hash; None when neither is possible)."""
    first: dict[str, ShownEvidence] = {}
    for s in shown:
        if s.evidence.document_id in wanted and s.evidence.document_id not in first:
            first[s.evidence.document_id] = s
    out: dict[str, dict[str, Any]] = {}
    for document_id, s in first.items():
        text = s.evidence.shown_text
        if text is None:
            text = _rebuilt(console, s)
        out[document_id] = {
            "invocation_id": s.invocation_id,
            "seq": s.seq,
            "rank": s.evidence.rank,
            "source": s.evidence.source,
            "text": text,
        }
    return out


def _rebuilt(console: Console, s: ShownEvidence) -> str | None:
    principal = console.audit().get_invocation(s.invocation_id).summary.principal_tenant
    for tenant in reread_tenants(s.evidence.row_tenant, principal):
        current = console.lookup_app.evidence_text([s.evidence.document_id], tenant=tenant)
        if s.evidence.document_id in current:
            return shown_text_from(current[s.evidence.document_id], s.evidence.content_hash)
    return None


def _claim_view(claim: CheckedClaim, texts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    signals: dict[str, Any] = dict(claim.signals)
    span: dict[str, Any] | None = (
        signals.get("span") if isinstance(signals.get("span"), dict) else None
    )
    if span is None and claim.support is not None:
        span = {
            "document_id": claim.support.document_id,
            "start": claim.support.start,
            "end": claim.support.end,
        }
    blocks = []
    for cited in claim.citations:
        shown = texts.get(cited.document_id)
        block: dict[str, Any] = {"citation": cited, "shown": shown, "parts": None}
        if shown is not None and shown["text"] is not None:
            block["parts"] = _highlight(shown["text"], span, cited.document_id)
        blocks.append(block)
    judge = signals.get("judge") if isinstance(signals.get("judge"), dict) else None
    quotes: list[Any] = signals["quotes"] if isinstance(signals.get("quotes"), list) else []
    return {
        "claim": claim,
        "blocks": blocks,
        "span": span,
        "judge": judge,
        "coverage": signals.get("coverage"),
        "cosine": signals.get("cosine"),
        "missing": signals.get("missing") if isinstance(signals.get("missing"), list) else [],
        "quotes": [q for q in quotes if isinstance(q, dict)],
    }


def _highlight(text: str, span: dict[str, Any] | None, document_id: str) -> dict[str, Any]:
    """The block cut in three around the aligned span (offsets into the text as shown),
    long context around it shortened; no span: the text, unmarked."""
    start, end = (span or {}).get("start"), (span or {}).get("end")
    if (
        span is None
        or span.get("document_id") != document_id
        or not isinstance(start, int)
        or not isinstance(end, int)
        or not 0 <= start <= end <= len(text)
    ):
        return {"before": text, "mark": "", "after": "", "cut_before": False, "cut_after": False}
    lead = max(0, start - CONTEXT_CHARS)
    tail = min(len(text), end + CONTEXT_CHARS)
    return {
        "before": text[lead:start],
        "mark": text[start:end],
        "after": text[end:tail],
        "cut_before": lead > 0,
        "cut_after": tail < len(text),
        "start": start,
        "end": end,
    }
