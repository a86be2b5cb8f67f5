"""``lookup-knowledge serve`` on the embedded default (Milvus Lite, the bundled embedder,
SQLite) as its own process, and beside it: the MCP SDK's default client holding one
conversation, and the CLI on the same data directory (through the server, which holds
the Milvus Lite file; ``server.json``)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
QUERY = "how do I fail over the primary PostgreSQL database"

pytestmark = pytest.mark.slow


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["LOOKUP_KNOWLEDGE_DATA_DIR"] = str(data_dir)
    return env


def _cli(data_dir: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args],
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def _write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")


def _start_serve(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [CLI, "serve", "--port", "0"],
        env=_env(data_dir),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        return process, _ready_url(process)
    except BaseException:
        process.kill()  # never left running by a failed start
        process.wait(60)
        raise


def _ready_url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
    assert found, line
    url = found.group(1)
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=5) as ready:
                if json.load(ready)["status"] == "ready":
                    return url
        except urllib.error.HTTPError as not_ready:
            # A data dir with nothing ingested is up but not ready: its search is empty.
            failing = [c for c in json.load(not_ready)["checks"].values() if not c["ok"]]
            if all(c["detail"].startswith("nothing ingested yet") for c in failing):
                return url
        except OSError:
            pass
        assert time.monotonic() < deadline, "serve did not become ready"
        assert process.poll() is None, "serve exited"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("beside")
    data_dir = root / "data"
    _write(
        root / "kb" / "database",
        "failover.md",
        "# Database failover\n\nTo fail over the primary PostgreSQL database, run "
        "`pg_ctl promote` on the replica and repoint the db-primary DNS record.\n",
    )
    ingested = _cli(data_dir, "ingest", str(root / "kb"))
    assert ingested.returncode == 0, ingested.stderr
    process, url = _start_serve(data_dir)
    try:
        yield {"url": url, "data_dir": data_dir, "root": root, "process": process}
    finally:
        process.terminate()
        process.wait(60)


async def _conversation(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from mcp import Client

    async with Client(f"{url}/mcp") as client:  # the SDK's default client
        looked = await client.call_tool("lookup_knowledge", {"query": QUERY})
        assert looked.structured_content is not None
        found = dict(looked.structured_content)
        block = found["evidenceBlocks"][0]
        answer = (
            "To fail over the primary PostgreSQL database, run pg_ctl promote on the "
            f"replica [{block['document_id']}]."
        )
        checked = await client.call_tool("check_answer", {"answer": answer})
        assert checked.structured_content is not None
        return found, dict(checked.structured_content)


def test_the_sdk_default_client_looks_up_and_checks_its_answer_in_one_conversation(
    server: dict[str, Any],
) -> None:
    found, check = anyio.run(_conversation, server["url"])
    assert found["found"]
    assert check["verdict"] == "supported", check
    listed = _cli(server["data_dir"], "audit", "list", "--session", check["sessionId"], "--json")
    assert listed.returncode == 0, listed.stderr
    [invocation] = json.loads(listed.stdout)["items"]
    assert invocation["query"] == QUERY  # the lookup is in the check's session


def test_the_cli_ingests_and_looks_up_through_the_running_server(server: dict[str, Any]) -> None:
    root, data_dir = server["root"], server["data_dir"]
    _write(
        root / "more" / "cache",
        "flush.md",
        "# Cache flush\n\nTo flush the Redis cache, run redis-cli FLUSHALL on the cache host.\n",
    )
    # A relative path, resolved by the CLI (the server's working directory is another).
    ingested = _cli(data_dir, "ingest", "more", "--json", cwd=root)
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout)["added"] == 1
    assert "through lookup-knowledge serve" in ingested.stderr
    looked = _cli(data_dir, "lookup", "flush the Redis cache", "--session", "beside", "--json")
    assert looked.returncode == 0, looked.stderr
    assert json.loads(looked.stdout)["evidenceBlocks"][0]["document_id"] == (
        "more/cache/flush.md#chunk-0"
    )
    assert _cli(data_dir, "health").returncode == 0


def test_the_audit_commands_work_beside_the_running_server(server: dict[str, Any]) -> None:
    data_dir, root = server["data_dir"], server["root"]
    looked = _cli(data_dir, "lookup", QUERY, "--session", "audit-beside", "--json")
    assert looked.returncode == 0, looked.stderr
    document_id = json.loads(looked.stdout)["evidenceBlocks"][0]["document_id"]
    listed = _cli(data_dir, "audit", "list", "--session", "audit-beside", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["items"]) == 1
    verified = _cli(data_dir, "audit", "verify", "--session", "audit-beside", document_id)
    assert verified.returncode == 0, verified.stderr
    answer = root / "answer.md"
    answer.write_text(
        f"To fail over the primary PostgreSQL database, run pg_ctl promote [{document_id}].\n",
        encoding="utf-8",
    )
    checked = _cli(
        data_dir, "audit", "check-answer", "--session", "audit-beside", "--answer-file", str(answer)
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _cli(data_dir, "audit", "stats").returncode == 0


def test_an_eval_runs_through_the_running_server(server: dict[str, Any]) -> None:
    dataset = Path(__file__).parents[2] / "benchmarks" / "datasets" / "northwind-zh"
    out = server["root"] / "eval-out"
    ran = _cli(
        server["data_dir"],
        "eval",
        "run",
        str(dataset),
        "--embedder",
        "hashing",
        "--limit-queries",
        "2",
        "--config",
        "sparse",
        "--chart",
        "none",
        "--out",
        str(out),
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    assert "through lookup-knowledge serve" in ran.stderr
    report = json.loads(ran.stdout)
    [configuration] = report["configurations"]
    assert configuration["queries"] == 2
    assert configuration["metrics"]["nDCG@10"] > 0
    assert (out / f"{report['runId']}.json").exists()
    # The server answers its own lookups as before.
    looked = _cli(server["data_dir"], "lookup", QUERY, "--json")
    assert looked.returncode == 0, looked.stderr


def test_a_replay_beside_the_running_server_says_which_server_holds_the_store(
    server: dict[str, Any],
) -> None:
    replayed = _cli(server["data_dir"], "eval", "replay", "--session", "beside")
    assert replayed.returncode == 1
    [line] = replayed.stderr.strip().splitlines()
    assert f"pid {server['process'].pid}" in line
    assert server["url"] in line
    assert "stop it" in line


def test_the_runtime_file_is_private_and_only_the_local_secret_opens_it(
    server: dict[str, Any],
) -> None:
    runtime = server["data_dir"] / "server.json"
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o600
    request = urllib.request.Request(
        f"{server['url']}/v1/local/health",
        data=b"{}",
        headers={"authorization": "Bearer not-the-secret", "content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401


def test_a_stale_runtime_file_of_a_killed_server_is_ignored(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _write(tmp_path / "kb" / "ops", "note.md", "# Note\n\nThe backup runs nightly at 02:00.\n")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    data_dir.mkdir(mode=0o700)
    (data_dir / "server.json").write_text(
        json.dumps(
            {
                "url": "http://127.0.0.1:9",
                "pid": dead.pid,
                "secret": "x",
                "kind": "serve",
                "litePath": str((data_dir / "milvus.db").resolve()),
            }
        ),
        encoding="utf-8",
    )
    ingested = _cli(data_dir, "ingest", str(tmp_path / "kb"), "--json")
    assert ingested.returncode == 0, ingested.stderr
    assert "through" not in ingested.stderr  # the file was stale: the CLI opened the store


def test_a_clean_shutdown_removes_the_runtime_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    process, _ = _start_serve(data_dir)
    try:
        assert (data_dir / "server.json").exists()
    finally:
        process.terminate()
        process.wait(60)
    assert not (data_dir / "server.json").exists()


def test_mcp_over_http_holds_one_conversation_and_serves_the_cli_beside_it(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    _write(
        tmp_path / "kb" / "database",
        "failover.md",
        "# Database failover\n\nTo fail over the primary PostgreSQL database, run "
        "`pg_ctl promote` on the replica and repoint the db-primary DNS record.\n",
    )
    assert _cli(data_dir, "ingest", str(tmp_path / "kb")).returncode == 0
    process = subprocess.Popen(
        [CLI, "mcp", "--transport", "http", "--port", "0"],  # the port the system gives
        env=_env(data_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+))/mcp\b", line)
        assert found, line
        url, port = found.group(1), int(found.group(2))
        deadline = time.monotonic() + 120
        while not (data_dir / "server.json").exists() or not _accepts(port):
            assert time.monotonic() < deadline, "mcp --transport http did not start"
            assert process.poll() is None, "mcp --transport http exited"
            time.sleep(0.2)
        found, check = anyio.run(_conversation, url)
        assert found["found"]
        assert check["verdict"] == "supported", check
        looked = _cli(data_dir, "lookup", QUERY, "--session", "beside-mcp", "--json")
        assert looked.returncode == 0, looked.stderr
        assert "through lookup-knowledge mcp" in looked.stderr
        listed = _cli(data_dir, "audit", "list", "--session", check["sessionId"], "--json")
        assert [i["query"] for i in json.loads(listed.stdout)["items"]] == [QUERY]
    finally:
        process.terminate()
        process.wait(60)
    assert not (data_dir / "server.json").exists()


def _accepts(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
