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
