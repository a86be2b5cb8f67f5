"""Lookups from the command line with hostile queries, ids, options and document text,
on SQLite and PostgreSQL: every answered lookup has one audit row holding exactly the
ids printed; refused ones record nothing; stored text is printed escaped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.hostile.support import (
    Backend,
    assert_no_traceback,
    assert_not_recorded,
    assert_one_line,
    assert_recorded_once,
    evidence_ids,
    session_id,
    tool_json,
)

ESC_TITLE = "Quota \x1b[31mred\x1b[0m alert"
DOCS = {
    "operations/failover.md": (
        "# Database failover\n\nPromote the standby with `patronictl failover` when "
        "pg-primary-01 is unreachable for 90 seconds. Ticket OPS-1423.\n"
    ),
    "product/billing.md": (
        "# Billing FAQ\n\nERR-429 means more than 100 requests per second per API key; "
        "back off and retry.\n"
    ),
    # ESC reaches the store through a YAML "\\e" escape and a heading: both are data
    "product/quota.md": (
        '---\ntitle: "Quota \\e[31mred\\e[0m alert"\n---\n# Quota \x1b]0;pwned\x07 limits\n\n'
        "ERR-430 quota exceeded \x1b[2J for the tenant: raise the quota in the console.\n"
    ),
}


@pytest.fixture(scope="module")
def user(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Backend:
    docs = tmp_path_factory.mktemp("docs")
    for relative, text in DOCS.items():
        (docs / relative).parent.mkdir(parents=True, exist_ok=True)
        (docs / relative).write_text(text, encoding="utf-8")
    done = backend.run("ingest", str(docs), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == len(DOCS)
    return backend


def _answered(user: Backend, payload: dict[str, Any], session: str) -> None:
    with user.audit() as audit:
        assert_recorded_once(audit, session, payload["invocationId"], evidence_ids(payload))


# (label, query, extra options): answered, exit 0 (found or not), recorded once.
ANSWERED: list[tuple[str, str, list[str]]] = [
    ("plain", "how do I promote the standby during failover", []),
    ("query-10k-chars", "failover " * 1200, []),
    ("query-blank", " \t\n ", []),
    ("query-only-controls", "\x1b\x07\x01", []),
    ("query-undecodable-byte", "failover \udcff standby", []),
    ("query-escape-sequences", "\x1b[31mfailover\x1b[0m \x07\x7f\x9b standby", []),
    ("query-markup", "[bold]failover[/bold] [/etc/hosts]", []),
    ("query-sql", "'; DROP TABLE tool_invocation; -- %_ failover", []),
    ("query-bidi-and-zero-width", "\u202efailover\u200b\u2066standby\u2069", []),
    ("query-cjk-emoji", "数据库主从切换怎么做 🚒", []),
    ("category-existing", "failover", ["--category", "operations"]),
    ("category-unknown", "failover", ["--category", "no-such-category"]),
    ("category-quote-injection", "failover", ["--category", 'x" or category != "y']),
    ("tool-call-id", "ERR-429", ["--tool-call-id", "call_\x1b[1m"]),
]


INVALID_QUERIES = ("query-10k-chars", "query-blank", "query-only-controls")


@pytest.mark.parametrize(("label", "query", "options"), ANSWERED, ids=[a[0] for a in ANSWERED])
def test_an_answered_lookup_is_recorded_once_with_its_ids(
    user: Backend, label: str, query: str, options: list[str]
) -> None:
    session = session_id(label)
    done = user.run("lookup", query, "--session", session, "--json", *options)
    assert_no_traceback(done.stderr)
    if label == "tool-call-id":
        # a control character in a host id is refused, before anything is recorded
        assert done.returncode == 2, done.stderr
        with user.audit() as audit:
            assert_not_recorded(audit, session)
        return
    payload = tool_json(done.stdout)
    if label in INVALID_QUERIES:
        # answered with status error (invalid_input), recorded, exit 2: the input to fix
        assert done.returncode == 2, done.stderr
        assert payload["found"] is False
        assert_one_line(done.stderr)
    else:
        assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    _answered(user, payload, session)


def test_anthropic_format_names_the_recorded_ids(user: Backend) -> None:
    session = session_id("anthropic")
    done = user.run(
        "lookup", "ERR-430 quota exceeded", "--session", session, "--format", "anthropic"
    )
    assert done.returncode == 0, done.stderr
    content = json.loads(done.stdout)
    ids = [b["source"] for b in content if b["type"] == "search_result"]
    assert ids, content
    assert content[-1]["type"] == "text"
    with user.audit() as audit:
        [row] = _rows(audit, session)
        assert_recorded_once(audit, session, row, ids)


def _rows(audit: Any, session: str) -> list[str]:
    from lookup_knowledge.application.ports import InvocationFilter

    return [i.id for i in audit.list_invocations(InvocationFilter(session_id=session)).items]


def test_openai_format_carries_the_tool_json_and_the_call_id(user: Backend) -> None:
    session = session_id("openai")
    done = user.run(
        "lookup", "ERR-429", "--session", session, "--format", "openai", "--tool-call-id", "call_7"
    )
    assert done.returncode == 0, done.stderr
    message = json.loads(done.stdout)
    assert message["role"] == "tool"
    assert message["tool_call_id"] == "call_7"
    payload = json.loads(message["content"])
    _answered(user, payload, session)
    with user.audit() as audit:
        assert audit.get_invocation(payload["invocationId"]).summary.tool_call_id == "call_7"


def test_openai_format_defaults_the_call_id_to_the_invocation_id(user: Backend) -> None:
    session = session_id("openai-default")
    done = user.run("lookup", "ERR-429", "--session", session, "--format", "OpenAI")
    assert done.returncode == 0, done.stderr
    message = json.loads(done.stdout)
    payload = json.loads(message["content"])
    assert message["tool_call_id"] == payload["invocationId"]
    _answered(user, payload, session)


# (label, query, options): refused before any work: exit 2, one line, nothing recorded.
REFUSED: list[tuple[str, str, list[str]]] = [
    ("session-escape", "failover", ["--session", "s\x1b[31m"]),
    ("session-huge", "failover", ["--session", "s" * 5000]),
    ("session-blank", "failover", ["--session", "  "]),
    ("step-escape", "failover", ["--step", "\x1b]0;x\x07"]),
]


@pytest.mark.parametrize(("label", "query", "options"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_lookup_exits_2_and_records_nothing(
    user: Backend, label: str, query: str, options: list[str]
) -> None:
    session = session_id(label)
    args = ["lookup", query, *options]
    if "--session" not in options:
        args += ["--session", session]
    done = user.run(*args)
    assert done.returncode == 2, done.stderr
    assert_no_traceback(done.stderr)
    assert_one_line(done.stderr)
    assert "\x1b" not in done.stderr
    with user.audit() as audit:
        assert_not_recorded(audit, session)


def test_escape_sequences_are_printed_escaped(user: Backend) -> None:
    session = session_id("esc")
    shown = user.run("lookup", "ERR-430 quota exceeded", "--session", session)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout
    assert "\x07" not in shown.stdout
    assert "\\x1b]0;pwned\\x07" in shown.stdout, shown.stdout
    as_json = tool_json(user.run("lookup", "ERR-430 quota exceeded", "--json").stdout)
    quota = [
        b
        for b in as_json["evidenceBlocks"]
        if b["document_id"].partition("#")[0].endswith("product/quota.md")
    ]
    assert quota, as_json
    # The title as stored: on its own, or as the start of the breadcrumb that carries it.
    shown_title = quota[0].get("title") or quota[0]["breadcrumb"]
    assert shown_title.startswith(ESC_TITLE), "the agent gets the text as stored"
    with user.audit() as audit:
        [invocation] = _rows(audit, session)
    for args in (
        ["audit", "show", invocation],
        ["audit", "list", "--session", session],
        ["audit", "verify", "--session", session, quota[0]["document_id"], "x\x1b[2J"],
        ["audit", "show", invocation, "--json"],
    ):
        done = user.run(*args)
        assert done.returncode in (0, 1), done.stderr
        assert_no_traceback(done.stderr)
        assert "\x1b" not in done.stdout + done.stderr, (args, done.stdout)
    verify = user.run("audit", "verify", "--session", session, "x\x1b[2J")
    assert "x\\x1b[2J" in verify.stdout


def test_audit_show_of_hostile_ids_is_one_line(user: Backend) -> None:
    for invocation in ("00000000-0000-7000-8000-000000000000", "not-a-uuid", "\x1b[2J", "x" * 5000):
        done = user.run("audit", "show", invocation)
        assert done.returncode in (1, 2), done.stderr
        assert_no_traceback(done.stderr)
        assert_one_line(done.stderr)
        assert "\x1b" not in done.stderr


@pytest.mark.parametrize("spelling", ["DENSE", "dEnSe"])
def test_mode_is_case_insensitive(user: Backend, spelling: str) -> None:
    session = session_id(f"mode-{spelling}")
    done = user.run("lookup", "failover", "--mode", spelling, "--session", session, "--json")
    assert done.returncode == 0, done.stderr
    payload = tool_json(done.stdout)
    assert payload["retrievalTrace"]["mode"] == "dense"
    _answered(user, payload, session)
