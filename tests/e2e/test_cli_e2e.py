"""The CLI as a user runs it: a real process, the default embedder, Milvus Lite, and the
audit store on SQLite or PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.payload import assert_names_only_returned_blocks
from tests.support.postgres import POSTGRES, isolated_schema

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))

RUNBOOK = """---
title: Database failover runbook
type: runbook
---
# Database failover runbook

## When to fail over

Fail over when the primary pg-primary-01.db.example.internal has been unreachable for
more than 90 seconds and replication lag on the standby is below 16 MB.

## Steps

### Promote the standby

Run `patronictl failover --candidate pg-standby-02` and confirm the new leader.
Announce the failover in the incident channel with ticket OPS-1423.

### Repoint PgBouncer

Update the PgBouncer host list and reload it with `RELOAD;` on the admin console.
Connections drain within 30 seconds; watch for PG-53300 too many connections errors.

## Afterwards

Rebuild the old primary as a standby from a fresh base backup before closing OPS-1423.
"""

FAQ = """---
title: Billing API FAQ
type: faq
---
# Billing API FAQ

## Why do I get ERR-429?

ERR-429 means the client exceeded 100 requests per second per API key. Back off using the
Retry-After header and retry with exponential backoff.

## How long are invoices kept?

Invoices are retained for seven years to satisfy tax law.
"""


def _write_docs(root: Path) -> Path:
    docs = root / "docs"
    (docs / "operations").mkdir(parents=True)
    (docs / "product").mkdir()
    (docs / "operations" / "failover.md").write_text(RUNBOOK, encoding="utf-8")
    (docs / "product" / "billing-faq.md").write_text(FAQ, encoding="utf-8")
    return docs


@pytest.fixture(params=["sqlite", POSTGRES])
def audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None  # the embedded default under the data directory
        return
    with isolated_schema("lk_e2e") as url:
        yield url.render_as_string(hide_password=False)


class User:
    def __init__(self, data_dir: Path, audit_url: str | None) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
        self.env["LOOKUP_KNOWLEDGE_DATA_DIR"] = str(data_dir)
        self.env["LOOKUP_KNOWLEDGE_EMBEDDER__OPENAI__API_KEY"] = "sk-e2e-secret-value"
        # ingest chunks small enough that the runbook yields several chunks
        self.env["LOOKUP_KNOWLEDGE_INGEST__CHUNK_SIZE"] = "300"
        self.env["LOOKUP_KNOWLEDGE_INGEST__CHUNK_OVERLAP"] = "40"
        if audit_url:
            self.env["LOOKUP_KNOWLEDGE_AUDIT__DATABASE_URL"] = audit_url
        self.cwd = data_dir.parent

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [CLI, *args],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            cwd=self.cwd,
            timeout=300,
            check=False,
        )
        if "lookup" in args and "--json" in args and done.stdout.startswith("{"):
            # Every lookup of the e2e suite: the agent payload names only its own blocks.
            assert_names_only_returned_blocks(json.loads(done.stdout))
        return done

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, f"{args} failed: {done.stderr}"
        return done.stdout


def test_a_user_ingests_looks_up_and_verifies(tmp_path: Path, audit_url: str | None) -> None:
    docs = _write_docs(tmp_path)
    user = User(tmp_path / "data", audit_url)

    first = json.loads(user.ok("ingest", str(docs), "--json"))
    assert first["added"] == 2
    assert first["chunksWritten"] >= 4
    again = json.loads(user.ok("ingest", str(docs), "--json"))
    assert again["unchanged"] == 2
    assert again["chunksWritten"] == 0, "re-ingesting an unchanged folder writes nothing"

    table = user.ok("ingest", str(docs))
    assert "Ingest summary" in table

    result = json.loads(
        user.ok(
            "lookup",
            "how do I promote the standby during failover?",
            "--json",
            "--session",
            "e2e",
            "--step",
            "s1",
        )
    )
    assert result["found"] is True
    ids = [b["document_id"] for b in result["evidenceBlocks"]]
    assert ids, "evidence returned"
    assert all("#chunk-" in i for i in ids)
    assert len(ids) == len(set(ids))
    # The agent profile leaves out a source the id spells: docs/<source>#chunk-N.
    assert result["evidenceBlocks"][0]["document_id"].startswith("docs/operations/failover.md#")
    assert "source" not in result["evidenceBlocks"][0]
    runbook_chunks = [i for i in ids if i.startswith("docs/operations/failover.md#")]
    assert 1 <= len(runbook_chunks) <= 2, "per-document cap of 2"

    logged = user.run(
        "lookup",
        "ERR-429",
        "--session",
        "e2e",
        "--step",
        "s2",
        env={"LOOKUP_KNOWLEDGE_LOG__JSON": "true", "LOOKUP_KNOWLEDGE_LOG__LEVEL": "INFO"},
    )
    assert logged.returncode == 0, logged.stderr
    readable = logged.stdout
    done = [json.loads(line) for line in logged.stderr.splitlines() if line.startswith("{")]
    done = [r for r in done if r["message"] == "lookup_knowledge done"]
    assert len(done) == 1, logged.stderr
    assert done[0]["invocation_id"] in readable, "logs join the audit row by invocation id"
    assert "product/billing-faq.md" in readable
    assert "invocation" in readable

    valid = user.run("audit", "verify", "--session", "e2e", ids[0])
    assert valid.returncode == 0, valid.stderr
    assert "valid" in valid.stdout

    mixed = user.run("audit", "verify", "--session", "e2e", ids[0], "made-up.md#chunk-0", "--json")
    assert mixed.returncode == 1
    verdict = json.loads(mixed.stdout)
    assert [v["document_id"] for v in verdict["valid"]] == [ids[0]]
    assert verdict["unknown"] == ["made-up.md#chunk-0"]
    assert verdict["valid"][0]["step_id"] == "s1"

    other_session = user.run("audit", "verify", "--session", "someone-else", ids[0])
    assert other_session.returncode == 1, "evidence shown to one session is not valid in another"

    listed = json.loads(user.ok("audit", "list", "--session", "e2e", "--json"))
    assert [i["seq"] for i in listed["items"]] == [1, 2]
    shown = json.loads(user.ok("audit", "show", listed["items"][0]["id"], "--json"))
    assert [e["document_id"] for e in shown["evidence"]] == ids
    stats = json.loads(user.ok("audit", "stats", "--json"))
    assert stats["count"] == 2

    config = user.ok("config", "show")
    assert "rag.retrieve-k" in config
    assert "env:LOOKUP_KNOWLEDGE_DATA_DIR" in config
    assert "sk-e2e-secret-value" not in config
    assert user.ok("db", "current").startswith("current:")


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    user = User(tmp_path / "data", None)
    bad_config = user.run("lookup", "anything", env={"LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K": "0"})
    assert bad_config.returncode == 2
    assert "rag.retrieve-k" in bad_config.stderr
    assert "Traceback" not in bad_config.stderr
    assert len(bad_config.stderr.strip().splitlines()) == 1

    missing = user.run("ingest", str(tmp_path / "does-not-exist"))
    assert missing.returncode != 0
    assert "Traceback" not in missing.stderr
    assert "does-not-exist" in missing.stderr

    unknown = user.run("audit", "show", "00000000-0000-7000-8000-000000000000")
    assert unknown.returncode == 1
    assert "Traceback" not in unknown.stderr

    debug = user.run("--debug", "lookup", "x", env={"LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K": "0"})
    assert "Traceback" in debug.stderr


def test_document_text_that_looks_like_markup_is_shown_literally(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "hosts.md").write_text(
        "# Hosts file\n\nEdit the file [/etc/hosts] and add [bold]db-01[/bold] to it.\n",
        encoding="utf-8",
    )
    user = User(tmp_path / "data", None)
    user.ok("ingest", str(docs))
    shown = user.run("lookup", "edit [/etc/hosts] on db-01", "--session", "m")
    assert shown.returncode == 0, shown.stderr
    assert "[/etc/hosts]" in shown.stdout
    listed = user.run("audit", "list", "--session", "m")
    assert listed.returncode == 0, listed.stderr
    assert "[/etc/hosts]" in listed.stdout


def test_a_failed_lookup_exits_non_zero_with_the_reason_on_stderr(tmp_path: Path) -> None:
    user = User(tmp_path / "data", None)  # nothing ingested: the collection does not exist
    failed = user.run("lookup", "anything", "--session", "f")
    assert failed.returncode == 1
    assert "Knowledge lookup failed" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    as_json = user.run("lookup", "anything", "--session", "f", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["found"] is False


def test_a_user_checks_an_answer_and_lists_the_checks(
    tmp_path: Path, audit_url: str | None
) -> None:
    docs = _write_docs(tmp_path)
    user = User(tmp_path / "data", audit_url)
    user.ok("ingest", str(docs), "--json")
    result = json.loads(
        user.ok(
            "lookup", "How many requests per second before ERR-429?", "--json", "--session", "chk"
        )
    )
    faq = next(b for b in result["evidenceBlocks"] if "ERR-429 means" in b["content"])
    cited = faq["document_id"]

    good = user.run(
        "audit",
        "check-answer",
        "--session",
        "chk",
        "--answer",
        f"ERR-429 means the client exceeded 100 requests per second per API key [{cited}].",
        "--json",
    )
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    assert list(data) == ["checkId", "sessionId", "verdict", "claims"]
    assert data["verdict"] == "supported"
    assert data["claims"][0]["citations"] == [{"document_id": cited, "status": "valid"}]
    assert data["claims"][0]["support"]["document_id"] == cited

    answer_file = tmp_path / "answer.md"
    answer_file.write_text(
        f"ERR-429 means the client exceeded 500 requests per second per API key [{cited}].\n"
        "Invoices are retained for seven years.\n",
        encoding="utf-8",
    )
    bad = user.run("audit", "check-answer", "--session", "chk", "--answer-file", str(answer_file))
    assert bad.returncode == 1, bad.stderr
    assert "unsupported" in bad.stdout
    assert "uncited" in bad.stdout
    assert "500" in bad.stdout

    usage = user.run("audit", "check-answer", "--session", "chk")
    assert usage.returncode == 2
    assert "exactly one of --answer and --answer-file" in usage.stderr

    listed = json.loads(user.ok("audit", "checks", "--session", "chk", "--json"))
    assert [c["verdict"] for c in listed] == ["supported", "unsupported"]
    assert listed[0]["checkId"] == data["checkId"]
    assert "Answer checks" in user.ok("audit", "checks", "--session", "chk")
    stats = json.loads(user.ok("audit", "stats", "--json"))
    assert stats["claimsChecked"] == 3
    assert stats["supportedClaimShare"] == pytest.approx(1 / 3)
