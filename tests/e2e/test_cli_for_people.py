"""What a person at the terminal reads: commands they can paste, health that says what is
missing, errors in their terms (the keys they set, no agent instructions, no masked
"secret" that was never set)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
CLI = str(BIN / "lookup-knowledge")
AGENT_WORDS = ("do not cite", "Do not answer", "Cite only")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER"] = "hashing"
    # As after `scripts/quickstart`: the virtualenv's bin is not on PATH.
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN
    )
    env.update(extra)
    return env


def _cli(data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("people")
    docs = folder / "docs"
    docs.mkdir()
    (docs / "pool.md").write_text(
        "# Connection pool\n\nPgBouncer keeps up to 16 server connections per database.\n",
        encoding="utf-8",
    )
    done = _cli(folder / "data", "ingest", str(docs))
    assert done.returncode == 0, done.stderr
    return folder / "data"


def test_health_before_anything_is_ingested_says_what_is_missing(tmp_path: Path) -> None:
    done = _cli(tmp_path / "data", "health")
    assert done.returncode == 1, done.stdout
    assert "empty" in done.stdout
    assert "nothing ingested yet" in done.stdout
    report = json.loads(_cli(tmp_path / "data", "health", "--json").stdout)
    assert report["ok"] is False
    search = report["components"][0]
    assert (search["name"], search["status"], search["ok"]) == ("knowledge search", "empty", False)


def test_health_after_an_ingest_is_ok(ingested: Path) -> None:
    done = _cli(ingested, "health", "--json")
    assert done.returncode == 0, done.stdout
    assert {c["status"] for c in json.loads(done.stdout)["components"]} == {"ok"}


def test_a_person_reads_what_was_found_and_the_agent_json_keeps_its_instructions(
    ingested: Path,
) -> None:
    shown = _cli(ingested, "lookup", "PgBouncer server connections", "--session", "p")
    assert shown.returncode == 0, shown.stderr
    assert "evidence block" in shown.stdout
    assert not [w for w in AGENT_WORDS if w in shown.stdout + shown.stderr]
    nothing = _cli(
        ingested,
        "lookup",
        "PgBouncer server connections",
        "--session",
        "p",
        LOOKUP_KNOWLEDGE_RAG__MIN_RELEVANCE="1.0",
    )
    assert nothing.returncode == 0, nothing.stderr
    assert "No evidence found" in nothing.stdout
    assert not [w for w in AGENT_WORDS if w in nothing.stdout + nothing.stderr]
    as_json = _cli(ingested, "lookup", "PgBouncer server connections", "--json")
    assert "Cite only" in json.loads(as_json.stdout)["message"], "the agent is still told"


def test_a_failed_lookup_says_what_went_wrong_without_agent_instructions(tmp_path: Path) -> None:
    failed = _cli(tmp_path / "data", "lookup", "anything", "--session", "f")
    assert failed.returncode == 1
    assert "Knowledge lookup failed" in failed.stderr
    assert not [w for w in AGENT_WORDS if w in failed.stderr]


def test_configuration_errors_name_the_keys_a_person_sets(tmp_path: Path) -> None:
    url = _cli(
        tmp_path / "data", "audit", "list", LOOKUP_KNOWLEDGE_AUDIT__DATABASE_URL="mysql://db/x"
    )
    assert url.returncode == 2
    assert "audit.database-url" in url.stderr
    assert "audit.url" not in url.stderr.replace("audit.database-url", "")
    token = _cli(tmp_path / "data", "mcp", "--transport", "http", "--host", "0.0.0.0")
    assert token.returncode == 2
    assert "mcp.token (not set)" in token.stderr
    assert "****" not in token.stderr  # no token to mask


@pytest.mark.slow
def test_the_quickstarts_next_commands_run_as_printed_from_another_folder(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [CLI, "--data-dir", str(tmp_path / "data"), "quickstart", "--questions", "1"],
        capture_output=True,
        text=True,
        env=_env(COLUMNS="400"),
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("Try next:", 1)[1].strip().splitlines()
    commands = [line.split("  #")[0].strip() for line in lines]
    listing = next(c for c in commands if " audit list --session " in c)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run(
        ["bash", "-c", listing + " --json"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=elsewhere,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, f"{listing}\n{ran.stderr}"
    session = shlex.split(listing)[-1]
    assert session.startswith("quickstart-")
    items = json.loads(ran.stdout)["items"]
    assert items, "the quickstart's lookups are listed"
    assert {item["session_id"] for item in items} == {session}


def test_a_bad_choice_is_reported_without_pydantics_wording(tmp_path: Path) -> None:
    done = _cli(tmp_path / "data", "lookup", "anything", "--mode", "fastest")
    assert done.returncode == 2
    assert "'fastest' is not one of 'dense', 'sparse', 'hybrid'" in done.stderr
    assert "Value error" not in done.stderr
