"""The Python API given hostile queries, ids and wrong argument types, on SQLite and
PostgreSQL: each call is either refused with ``InvalidInputError`` (a host's bug, said
plainly) or answered, and an answered call has exactly one audit row with exactly the
evidence ids it returned."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.application.ports import InvocationFilter
from lookup_knowledge.domain.errors import InvalidInputError
from tests.e2e.hostile.support import Backend, assert_recorded_once, evidence_ids, session_id
from tests.e2e.hostile.test_cli_lookups import DOCS


@pytest.fixture(scope="module")
def app(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    docs = tmp_path_factory.mktemp("api-docs")
    for relative, text in DOCS.items():
        (docs / relative).parent.mkdir(parents=True, exist_ok=True)
        (docs / relative).write_text(text, encoding="utf-8")
    with create_app(overrides=backend.overrides()) as built:
        report = built.ingest([docs])
        assert report.added == len(DOCS), report
        yield built


def _check_answered(app: LookupApp, session: str, payload: dict[str, Any]) -> None:
    assert app.flush(session, timeout_s=30), "recorded within the bound"
    assert_recorded_once(app.audit, session, payload["invocationId"], evidence_ids(payload))


def _rows(app: LookupApp, session: str) -> int:
    app.flush(session, timeout_s=30)
    return len(app.audit.list_invocations(InvocationFilter(session_id=session)).items)


# Queries the tool answers (found or not, or status error on its input): recorded once.
QUERIES: list[tuple[str, Any]] = [
    ("plain", "promote the standby during failover"),
    ("empty", ""),
    ("blank", " \t\r\n "),
    ("nul-inside", "fail\x00over"),
    ("only-nul", "\x00\x00"),
    ("lone-surrogate", "failover \ud800 standby"),
    ("surrogate-pair-halves", "\udbff\udfff\udc00"),
    ("escape-sequences", "\x1b[31mfailover\x1b[0m\x1b]0;title\x07"),
    ("c1-controls", "failover\x85\x9b\x9f"),
    ("delete-and-backspace", "fail\x7f\x08over"),
    ("bidi-override", "\u202eeliavof\u202c failover"),
    ("zero-width", "fail\u200bover\ufeff"),
    ("at-limit", "x" * 4000),
    ("over-limit", "failover " * 500),
    ("megabyte", "a" * 1_000_000),
    ("newlines", "failover\n" * 300),
    ("cjk", "数据库主从切换怎么做"),
    ("emoji", "🚒🔥 failover 🧯"),
    ("rtl-arabic", "تجاوز الفشل لقاعدة البيانات"),
    ("sql-injection", "'; DROP TABLE invocation_evidence; --"),
    ("like-wildcards", "%%__%% failover"),
    ("milvus-filter-syntax", 'category == "x" || doc_id != ""'),
    ("json-looking", '{"query": "failover", "category": null}'),
    ("markup", "[bold]failover[/] [/etc/hosts]"),
    ("path-traversal", "../../../../etc/passwd"),
    ("format-string", "{0} %s %(x)s ${HOME} failover"),
    ("combining-marks", "f\u0301\u0302\u0303ailover" + "\u0301" * 500),
    ("private-use", "\ue000\U000f0000 failover"),
    ("noncharacters", "\ufffe\uffff failover"),
    ("error-code-lookalike", "ERR-429 OPS-1423 PG-53300 10.0.0.1 v1.2.3"),
]


@pytest.mark.parametrize(("label", "query"), QUERIES, ids=[q[0] for q in QUERIES])
def test_a_hostile_query_is_answered_and_recorded_once(
    app: LookupApp, label: str, query: str
) -> None:
    session = session_id(label)
    payload = app.lookup(query, session_id=session)
    _check_answered(app, session, payload)
    if payload["found"] is False and label in ("empty", "blank", "only-nul", "over-limit"):
        assert "invalid_input" in payload["message"] or payload["evidenceBlocks"] == []


# The query is the agent's argument: whatever it sends is answered (status error,
# invalid_input) and recorded, so the agent learns its call was wrong.
WRONG_QUERY_TYPES: list[tuple[str, Any]] = [
    ("int", 123),
    ("none", None),
    ("bytes", b"failover"),
    ("list", ["failover"]),
    ("dict", {"query": "failover"}),
    ("float-nan", float("nan")),
]


@pytest.mark.parametrize(
    ("label", "query"), WRONG_QUERY_TYPES, ids=[w[0] for w in WRONG_QUERY_TYPES]
)
def test_a_query_of_the_wrong_type_is_answered_invalid_and_recorded(
    app: LookupApp, label: str, query: Any
) -> None:
    session = session_id(f"query-{label}")
    payload = app.lookup(query, session_id=session)
    assert payload["found"] is False
    assert "invalid_input" in payload["message"]
    _check_answered(app, session, payload)


# (label, keyword arguments, xfail reason): a host's wrong argument is InvalidInputError.
REFUSED: list[tuple[str, dict[str, Any], str | None]] = [
    ("session-empty", {"session_id": ""}, None),
    ("session-blank", {"session_id": "   "}, None),
    ("session-int", {"session_id": 42}, None),
    ("session-none", {"session_id": None}, None),
    ("session-nul", {"session_id": "s\x00"}, None),
    ("session-escape", {"session_id": "s\x1b[31m"}, None),
    ("session-surrogate", {"session_id": "s\udcff"}, None),
    ("session-huge", {"session_id": "s" * 10_000}, None),
    ("step-int", {"step_id": 7}, None),
    ("step-escape", {"step_id": "\x1b[2J"}, None),
    ("step-huge", {"step_id": "s" * 10_000}, None),
    ("tool-call-id-escape", {"tool_call_id": "call\x1b"}, None),
    ("tool-call-id-int", {"tool_call_id": 99}, None),
    ("mode-unknown", {"mode": "fuzzy"}, None),
    ("mode-int", {"mode": 5}, None),
    ("mode-list", {"mode": ["dense"]}, None),
    ("category-int", {"category": 123}, None),
    ("category-empty", {"category": ""}, None),
    ("category-blank", {"category": "  "}, None),
    ("category-list", {"category": ["operations"]}, None),
]


@pytest.mark.parametrize(
    ("label", "kwargs"),
    [
        pytest.param(
            lab,
            kw,
            id=lab,
            marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [],
        )
        for lab, kw, why in REFUSED
    ],
)
def test_a_wrong_argument_is_invalid_input(
    app: LookupApp, label: str, kwargs: dict[str, Any]
) -> None:
    session = session_id(label)
    call: dict[str, Any] = {"query": "failover", "session_id": session, **kwargs}
    try:
        payload = app.lookup(**call)
    except InvalidInputError:
        return  # refused, as it should be
    # answered after all: then it is a real answer, recorded once, not an internal error
    assert "internal_error" not in payload["message"], payload["message"]
    pytest.fail(f"{label}: answered instead of refused: {payload['message']}")


# Answered with these options: recorded once, and the filter is what was asked.
OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("mode-upper-case", {"mode": "DENSE"}),
    ("mode-padded", {"mode": "dense"}),
    ("category-existing", {"category": "operations"}),
    ("category-unknown", {"category": "nope"}),
    ("category-quote", {"category": 'x" || doc_id != "'}),
    ("category-backslash", {"category": "\\\\"}),
    ("category-unicode", {"category": "运维"}),
    ("category-long", {"category": "c" * 300}),
    ("tool-call-id-unicode", {"tool_call_id": "call_✓"}),
    ("step-unicode", {"step_id": "步骤-1"}),
]


@pytest.mark.parametrize(("label", "kwargs"), OPTIONS, ids=[o[0] for o in OPTIONS])
def test_hostile_options_are_answered_and_recorded_once(
    app: LookupApp, label: str, kwargs: dict[str, Any]
) -> None:
    session = session_id(label)
    try:
        payload = app.lookup("failover", session_id=session, **kwargs)
    except InvalidInputError:
        assert _rows(app, session) == 0, "a refused call records nothing"
        return
    _check_answered(app, session, payload)
    category = kwargs.get("category")
    if category is not None and payload["evidenceBlocks"]:
        assert payload["retrievalTrace"]["filterApplied"], "an explicit category filters"


def test_the_same_session_keeps_one_row_per_answer(app: LookupApp) -> None:
    session = session_id("many")
    ids = []
    for query in ("failover", "", "\x00", "ERR-429", "x" * 5000):
        payload = app.lookup(query, session_id=session)
        ids.append(payload["invocationId"])
    app.flush(session, timeout_s=30)
    page = app.audit.list_invocations(InvocationFilter(session_id=session))
    assert [i.id for i in page.items] == ids
    assert [i.seq for i in page.items] == [1, 2, 3, 4, 5]


def test_verifying_hostile_ids_is_an_answer_not_a_crash(app: LookupApp) -> None:
    session = session_id("verify")
    payload = app.lookup("failover", session_id=session)
    app.flush(session, timeout_s=30)
    cited = [*evidence_ids(payload), "", "x\x00", "\x1b[2J", "y" * 5000, "a#chunk-99999999999"]
    try:
        report = app.verify_citations(session, cited)
    except InvalidInputError:
        report = app.verify_citations(session, evidence_ids(payload))
        assert [v.document_id for v in report.valid] == evidence_ids(payload)
        return
    assert [v.document_id for v in report.valid] == evidence_ids(payload)
    assert len(report.unknown) == len(cited) - len(evidence_ids(payload))
