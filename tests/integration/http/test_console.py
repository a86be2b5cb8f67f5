"""The console over a real LookupApp: pages for sessions, a session, an invocation and
quality; exports; every stored string escaped, control characters shown, not obeyed."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.adapters.http.evidence import recover_shown_text
from lookup_knowledge.adapters.http.render import visible
from tests.support.audit_data import evidence, invocation
from tests.support.http import LOCAL, sample_app

HOSTILE = '<script>alert("x")</script>\x1b[2J\u202e'


@pytest.fixture(scope="module")
def lookup_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    app = sample_app(tmp_path_factory.mktemp("console") / "data")
    yield app
    app.close()


@pytest.fixture(scope="module")
def client(lookup_app: LookupApp) -> TestClient:
    return TestClient(create_http_app(lookup_app), base_url=LOCAL)


def test_session_and_invocation_pages_show_what_was_returned(
    client: TestClient, lookup_app: LookupApp
) -> None:
    tool = lookup_app.lookup("PG-53300 too many connections", session_id="con-1", step_id="a")
    lookup_app.lookup("how long is the DNS TTL?", session_id="con-1", step_id="b")
    listing = client.get("/", params={"q": "con-"}).text
    assert 'href="/sessions/con-1"' in listing
    session = client.get("/sessions/con-1").text
    assert session.index("PG-53300 too many connections") < session.index(
        "how long is the DNS TTL?"
    )
    assert f'href="/invocations/{tool["invocationId"]}"' in session
    page = client.get(f"/invocations/{tool['invocationId']}").text
    for block in tool["evidenceBlocks"]:
        assert block["document_id"] in page
        # the text exactly as the agent saw it (cut or not), recovered and hash-checked
        shown = block["content"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert shown.replace('"', "&#34;").replace("'", "&#39;") in page
    assert page.count("exactly as shown (matches the recorded hash)") == len(tool["evidenceBlocks"])
    assert "entity_match" in page  # rerank adjustments
    assert "filter" in page
    assert "database" in page
    quality = client.get("/quality").text
    assert "No-evidence rate" in quality
    assert "<svg" in quality
    assert client.get("/static/console.css").headers["content-type"].startswith("text/css")


def test_unknown_and_malformed_ids_answer_html_errors(client: TestClient) -> None:
    missing = client.get("/invocations/0190a1b2-0000-7000-8000-000000000000")
    assert missing.status_code == 404
    assert "text/html" in missing.headers["content-type"]
    assert client.get("/invocations/nope").status_code == 400
    assert client.get("/sessions/never-seen").status_code == 404
    assert client.get("/", params={"since": "yesterday"}).status_code == 400


def test_every_stored_string_is_escaped_and_control_characters_are_shown(
    client: TestClient, lookup_app: LookupApp
) -> None:
    sid = "evil-" + HOSTILE
    record = replace(
        invocation(sid, documents=["doc#chunk-0"], query="q " + HOSTILE, step_id=HOSTILE[:40]),
        evidence=(
            replace(
                evidence(1, "doc" + HOSTILE + "#chunk-0", category="cat" + HOSTILE),
                source="src" + HOSTILE,
            ),
        ),
        filter_applied="f" + HOSTILE,
        fallback_reason="r" + HOSTILE,
        retrieval_details={
            "version": 1,
            "retrievalTrace": {"passes": [{"filter": HOSTILE}]},
            "rerankTrace": [{"document_id": HOSTILE, "adjustments": [{"detail": HOSTILE}]}],
        },
    )
    lookup_app.recorder.record(record)
    pages = [
        client.get("/", params={"q": "evil-"}).text,
        client.get(f"/sessions/{quote(sid, safe='')}").text,
        client.get(f"/invocations/{record.id}").text,
    ]
    for page in pages:
        assert "<script>" not in page
        assert "\x1b" not in page
        assert "\u202e" not in page
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;\\x1b[2J\\u202e" in page
    link = f"/sessions/{quote(sid, safe='')}"
    assert f'href="{link}"' in pages[0]
    assert client.get(link).status_code == 200


def test_exports_hold_the_whole_session(client: TestClient, lookup_app: LookupApp) -> None:
    lookup_app.lookup("=HYPERLINK(1) replication lag", session_id="exp-1", step_id="1")
    lookup_app.lookup("dns ttl", session_id="exp-1", step_id="2")
    lines = client.get("/sessions/exp-1/export.jsonl").text.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["seq"] for r in rows] == [1, 2]
    assert all(r["session_id"] == "exp-1" and "evidence" in r for r in rows)
    response = client.get("/sessions/exp-1/export.csv")
    assert 'filename="session-exp-1.csv"' in response.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(response.text)))
    assert {r["seq"] for r in table} == {"1", "2"}
    assert sum(len(r["evidence"]) for r in rows) == len([r for r in table if r["document_id"]])
    # a cell a spreadsheet would evaluate is kept as text
    assert {r["query"] for r in table if r["seq"] == "1"} == {"'=HYPERLINK(1) replication lag"}


def test_shown_text_is_recovered_only_when_the_hash_agrees() -> None:
    text = "  Line one.\nLine two is longer.  "

    def sha(s: str) -> str:
        return hashlib.sha256(s.encode()).hexdigest()

    assert recover_shown_text(text, sha(text.strip()), None).verified
    assert recover_shown_text(text, sha(text), None).verified  # context pack: whole
    cut = text.strip()[:9] + "…"
    found = recover_shown_text(text, sha(cut), len(cut))
    assert found.verified
    assert found.text == cut
    changed = recover_shown_text("other text", sha(cut), len(cut))
    assert not changed.verified
    assert changed.text == "other text"
    gone = recover_shown_text(None, sha(cut), len(cut))
    assert gone.text is None
    assert not gone.verified


def test_visible_shows_invisible_characters_as_escapes() -> None:
    assert visible("a\x00b\x1bc\u202ed\u200be") == "a\\x00b\\x1bc\\u202ed\\u200be"
    assert visible("tabs\tand\nnewlines stay; 中文 too") == "tabs\tand\nnewlines stay; 中文 too"
    assert visible(3) == 3


def test_the_invocation_page_names_the_principal_access_and_the_mode_searched(
    client: TestClient, lookup_app: LookupApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lookup_knowledge import Principal
    from lookup_knowledge.adapters.embedders.onnx import reads_latin

    alice = Principal("acme", "alice", frozenset({"staff"}))
    tool = lookup_app.lookup("PG-53300 too many connections", session_id="con-p", principal=alice)
    page = client.get(f"/invocations/{tool['invocationId']}").text
    assert "tenant acme, user alice, groups sha256" in page
    assert alice.groups_hash()[:12] in page
    assert '<dd id="access">off</dd>' in page
    anonymous = lookup_app.lookup("PG-53300", session_id="con-p")
    assert (
        '<dd id="principal">none</dd>'
        in client.get(f"/invocations/{anonymous['invocationId']}").text
    )
    # The hashing embedder reads every language; make it read English only, as MiniLM.
    monkeypatch.setattr(
        type(lookup_app._container.embedder()), "reads", lambda _s, t: reads_latin(t)
    )
    chinese = lookup_app.lookup("数据库主从切换怎么做", session_id="con-p")
    page = client.get(f"/invocations/{chinese['invocationId']}").text
    assert "(asked: hybrid; embedder_cannot_read_query)" in page


# ------------------------------------------------------------ an auditor's working day


def _checked(lookup_app: LookupApp, session_id: str) -> tuple[dict[str, object], object]:
    """A lookup and an answer built on its first block, checked and recorded."""
    tool = lookup_app.lookup("PG-53300 too many connections", session_id=session_id)
    block = tool["evidenceBlocks"][0]
    sentence = next(s for s in block["content"].split("\n") if len(s.split()) >= 4).strip()
    check = lookup_app.check_answer(session_id, f"{sentence} [{block['document_id']}]")
    return tool, check


def test_answer_checks_show_on_the_sessions_session_and_check_pages(
    client: TestClient, lookup_app: LookupApp
) -> None:
    tool, check = _checked(lookup_app, "chk-1")
    claim = check.claims[0]
    listing = client.get("/", params={"q": "chk-1"}).text
    assert "<th>Answer checks</th>" in listing
    assert f'href="/checks/{check.id}"' in listing
    assert f'class="verdict {check.verdict.value}"' in listing
    session = client.get("/sessions/chk-1").text
    assert 'id="checks"' in session
    assert f'href="/checks/{check.id}#claim-{claim.index}"' in session  # cited-by column
    page = client.get(f"/checks/{check.id}").text
    assert f'id="claim-{claim.index}"' in page
    assert f'class="verdict {claim.verdict.value}"' in page
    for reason in claim.reasons:
        assert str(visible(reason)).replace("'", "&#39;").replace('"', "&#34;") in page
    block = tool["evidenceBlocks"][0]
    span = dict(claim.signals)["span"]
    assert isinstance(span, dict)
    marked = block["content"][span["start"] : span["end"]]
    assert f">{marked}</mark>" in page.replace("&#39;", "'").replace("&#34;", '"')
    assert f'href="/invocations/{tool["invocationId"]}#evidence-1"' in page
    assert "No judge opinion" in page
    assert client.get("/checks/0190a1b2-0000-7000-8000-000000000000").status_code == 404


def test_the_check_page_shows_the_judges_opinion(client: TestClient, lookup_app: LookupApp) -> None:
    import uuid

    _, check = _checked(lookup_app, "chk-judge")
    opinion = {"label": "contradicted", "score": 0.91, "model": "nli-test", "reason": "says not"}
    judged = replace(
        check,
        id=str(uuid.uuid4()),
        claims=tuple(replace(c, signals={**c.signals, "judge": opinion}) for c in check.claims),
    )
    lookup_app.answer_checks.save(judged)
    page = client.get(f"/checks/{judged.id}").text
    assert "<code>nli-test</code>" in page
    assert 'class="verdict judge-contradicted">contradicted</span>' in page
    assert "says not" in page


def test_sessions_are_found_by_query_text_and_by_the_document_shown(
    client: TestClient, lookup_app: LookupApp
) -> None:
    tool = lookup_app.lookup("replication lag on the standby", session_id="find-text")
    other = lookup_app.lookup("how long is the DNS TTL?", session_id="find-other")
    by_text = client.get("/", params={"text": "REPLICATION LAG"}).text
    assert 'href="/sessions/find-text"' in by_text
    assert 'href="/sessions/find-other"' not in by_text
    theirs = {b["document_id"] for b in other["evidenceBlocks"]}
    shown = next(b["document_id"] for b in tool["evidenceBlocks"] if b["document_id"] not in theirs)
    by_document = client.get("/", params={"doc": shown}).text
    assert 'href="/sessions/find-text"' in by_document
    assert 'href="/sessions/find-other"' not in by_document
    assert "No session matches" in client.get("/", params={"doc": "no/such#chunk-9"}).text


def test_pages_of_sessions_link_both_ways(client: TestClient, lookup_app: LookupApp) -> None:
    for n in range(52):
        lookup_app.recorder.record(invocation(f"pager-{n:02d}"))
    lookup_app.flush()
    first = client.get("/", params={"q": "pager-"}).text
    assert 'class="older" href="/?q=pager-&amp;offset=50"' in first
    assert 'class="newer"' not in first
    second = client.get("/", params={"q": "pager-", "offset": 50}).text
    assert 'class="newer" href="/?q=pager-"' in second
    assert 'class="older"' not in second
    assert "Page 2" in second


def test_invocations_link_to_the_previous_and_next_of_their_session(
    client: TestClient, lookup_app: LookupApp
) -> None:
    calls = [lookup_app.lookup(q, session_id="nav-1") for q in ("PG-53300", "dns ttl", "vpn")]
    ids = [c["invocationId"] for c in calls]
    middle = client.get(f"/invocations/{ids[1]}").text
    assert f'rel="prev" class="newer" href="/invocations/{ids[0]}"' in middle
    assert f'rel="next" class="older" href="/invocations/{ids[2]}"' in middle
    assert "first invocation" in client.get(f"/invocations/{ids[0]}").text
    assert "last invocation" in client.get(f"/invocations/{ids[2]}").text


def test_long_queries_are_cut_with_a_way_to_read_them_whole(
    client: TestClient, lookup_app: LookupApp
) -> None:
    long_query = "why " + "very " * 1000 + "slow"
    record = replace(invocation("long-1", documents=["a#chunk-0"]), query=long_query)
    lookup_app.recorder.record(record)
    lookup_app.flush()
    for page in (client.get("/sessions/long-1").text, client.get(f"/invocations/{record.id}").text):
        assert '<details class="long">' in page
        assert f"({len(long_query)} characters, show all)" in page
        assert page.count(long_query) == 1  # whole only inside the details


def test_no_python_none_and_near_misses_on_a_no_evidence_call(
    client: TestClient, lookup_app: LookupApp
) -> None:
    tool = lookup_app.lookup("PG-53300 too many connections", session_id="none-1")
    page = client.get(f"/invocations/{tool['invocationId']}").text
    assert ">None<" not in page
    assert "None" not in page.split("<details>")[0]  # the stored JSON keeps its nulls
    record = replace(
        invocation("near-1", query="quantum entanglement of invoices"),
        retrieval_details={
            "version": 1,
            "retrievalTrace": {
                "minRelevance": 0.35,
                "passes": [{"filter": None, "hits": 7, "usable": 0}],
                "counts": {"candidates": 0, "belowMinRelevance": 7},
                "dropped": [{"document_id": "x#chunk-1", "reason": "no_text"}],
                "queryHints": {"domains": [], "filterCandidate": None},
            },
            "rerankTrace": [],
        },
    )
    lookup_app.recorder.record(record)
    lookup_app.flush()
    near = client.get(f"/invocations/{record.id}").text
    assert 'id="near-misses"' in near
    assert "<strong>7</strong> hits in 1 pass" in near
    assert "<strong>7</strong> under the minimum relevance (0.35)" in near
    assert "x#chunk-1" in near
    assert ">None<" not in near
    uncounted = replace(
        invocation("near-2", query="zebra"),
        retrieval_details={
            "version": 1,
            "retrievalTrace": {
                "minRelevance": 0.35,
                "passes": [
                    {"filter": "db", "hits": 3, "usable": 0, "dropped": 1},
                    {"filter": None, "hits": 5, "usable": 0, "dropped": 0},
                ],
                "counts": {"projected": 0},
            },
        },
    )
    lookup_app.recorder.record(uncounted)
    lookup_app.flush()
    page = client.get(f"/invocations/{uncounted.id}").text
    assert "<strong>8</strong> hits in 2 passes" in page
    assert "<strong>7</strong> under the minimum relevance (0.35)" in page


def test_eval_runs_are_listed_with_their_report(client: TestClient, lookup_app: LookupApp) -> None:
    from lookup_knowledge.domain.model import Traffic

    run = "20261202T010203-abc123"
    for name in ("baseline", "no-rerank"):
        record = replace(
            invocation(f"eval-{run}-{name}", documents=["a#chunk-0"]), traffic=Traffic.EVAL.value
        )
        lookup_app.recorder.record(record)
    lookup_app.flush()
    report = lookup_app.settings.data_dir / "eval" / f"{run}.html"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("<!doctype html><title>Eval</title><style>h1{}</style><h1>Eval run</h1>")
    quality = client.get("/quality").text
    assert "No eval runs recorded" not in quality
    assert f'href="/eval/{run}/report.html"' in quality
    assert f'href="/sessions/eval-{run}-baseline"' in quality
    served = client.get(f"/eval/{run}/report.html")
    assert served.status_code == 200
    assert "<h1>Eval run</h1>" in served.text
    assert "script" not in served.headers["content-security-policy"]
    assert "default-src 'none'" in served.headers["content-security-policy"]
    assert served.headers["content-security-policy"].endswith("; sandbox")  # its own origin
    assert client.get("/eval/20261202T010203-ffffff/report.html").status_code == 404
    assert client.get("/eval/..%2F..%2Fconfig/report.html").status_code == 404
    assert 'href="/sessions/eval-' not in client.get("/").text  # production only
    assert f"eval-{run}-baseline" in client.get("/", params={"traffic": "eval"}).text
    assert client.get("/", params={"traffic": "bogus"}).status_code == 400


def test_charts_have_axes_with_units(client: TestClient, lookup_app: LookupApp) -> None:
    lookup_app.lookup("PG-53300", session_id="chart-1")
    quality = client.get("/quality").text
    assert quality.count('class="tick"') >= 4 * 5
    for unit in ("% of invocations", "milliseconds", "invocations per bucket"):
        assert unit in quality
    assert "bucket start (UTC)" in quality


def test_the_last_invocation_falls_in_the_last_bar(
    client: TestClient, lookup_app: LookupApp
) -> None:
    from datetime import UTC, datetime, timedelta

    start = datetime(2031, 1, 1, tzinfo=UTC)
    # 700 s over 12 bars: the rounded widths add up to less than the range
    for k in (0, 700):
        lookup_app.recorder.record(invocation("bars-1", at=start + timedelta(seconds=k)))
    lookup_app.flush()
    quality = client.get("/quality", params={"since": "2031-01-01"}).text
    bars = quality.split("Invocations <span")[1].split("</svg>")[0]
    assert bars.count(": 1</title>") == 2


def test_chart_ticks_are_not_rounded_away() -> None:
    from datetime import UTC, datetime

    from lookup_knowledge.adapters.http.console_charts import CALLS, PERCENT, chart

    at = datetime(2031, 1, 1, tzinfo=UTC)
    share = chart("No-evidence rate", [(at, 0.34)], PERCENT, "")
    assert [t["label"] for t in share["ticks"]] == ["0%", "12.5%", "25%", "37.5%", "50%"]
    calls = chart("Invocations", [(at, 3.0)], CALLS, "")
    assert [t["label"] for t in calls["ticks"]] == ["0", "1", "2", "3", "4"]


def test_an_audit_store_failure_has_one_status_on_the_console_and_the_rest_api(
    client: TestClient, lookup_app: LookupApp
) -> None:
    from dependency_injector import providers

    from lookup_knowledge.domain.errors import AuditError

    class BrokenStore:
        def __getattr__(self, name: str) -> object:
            def fail(*_: object, **__: object) -> object:
                raise AuditError("the audit store failed")

            return fail

    with lookup_app._container.audit_queries.override(providers.Object(BrokenStore())):
        page = client.get("/")
        rest = client.get("/v1/sessions")
    assert page.status_code == rest.status_code == 500  # both from problems.status_of
    assert "text/html" in page.headers["content-type"]
    assert rest.json()["code"] == "audit_error"
