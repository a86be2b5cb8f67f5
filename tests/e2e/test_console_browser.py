"""The console as an auditor uses it: the quickstart fills a data directory (the default
embedder, Milvus Lite, SQLite), ``lookup-knowledge serve`` runs as its own process,
lookups go through the REST API, and the system Chromium (driven by Playwright, no
browser download) walks sessions -> session -> invocation. Screenshots are saved under
the test's tmp dir."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.slow

if not Path(CHROMIUM).exists():
    # CI installs it (scripts/test); there a missing browser is a failure, not a skip.
    if os.environ.get("CI"):
        raise RuntimeError("the browser tests need Debian's chromium (apt-get install chromium)")
    pytest.skip("needs Debian's chromium (apt-get install chromium)", allow_module_level=True)


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["LOOKUP_KNOWLEDGE_DATA_DIR"] = str(data_dir)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("console") / "data"
    quickstart = subprocess.run(
        [CLI, "quickstart"], env=_env(data_dir), capture_output=True, text=True, timeout=600
    )
    assert quickstart.returncode == 0, quickstart.stderr
    session = re.search(r"lookups in session (quickstart-\S+)", quickstart.stdout)
    assert session, quickstart.stdout
    process = subprocess.Popen(
        [CLI, "serve", "--port", "0"],
        env=_env(data_dir),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        assert found, line
        url = found.group(1)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=5) as ready:
                    if json.load(ready)["status"] == "ready":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "serve did not become ready"
            assert process.poll() is None, "serve exited"
            time.sleep(0.2)
        yield {"url": url, "quickstart_session": session.group(1)}
    finally:
        process.terminate()
        process.wait(30)


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.load(response)
        return answer


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_an_auditor_reads_the_evidence_of_a_rest_lookup(
    server: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    url = server["url"]
    first = _post(
        f"{url}/v1/lookup",
        {"query": "PG-53300 too many connections", "session_id": "browser-audit", "step_id": "1"},
    )
    _post(
        f"{url}/v1/lookup",
        {"query": "数据库主从切换怎么做", "session_id": "browser-audit", "step_id": "2"},
    )
    assert first["found"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/?q=browser-audit")
    page.screenshot(path=str(tmp_path / "1-sessions.png"), full_page=True)
    page.click("#sessions a:text('browser-audit')")
    page.wait_for_selector("#invocations")
    rows = page.locator("#invocations tbody tr")
    assert rows.count() == 2
    assert "PG-53300 too many connections" in rows.nth(0).inner_text()
    page.screenshot(path=str(tmp_path / "2-session.png"), full_page=True)
    rows.nth(0).locator("a").first.click()
    page.wait_for_selector("#invocation-id")
    assert page.inner_text("#invocation-id") == first["invocationId"]
    shown_ids = page.locator(".evidence .document-id").all_inner_texts()
    blocks = first["evidenceBlocks"]
    assert [b["document_id"] for b in blocks] == shown_ids[: len(blocks)]
    texts = page.locator(".evidence pre.text").all_inner_texts()
    for block, text in zip(blocks, texts, strict=False):
        assert text == block["content"]  # exactly what the agent was given
    assert page.locator(".note.verified").count() >= len(blocks)
    page.screenshot(path=str(tmp_path / "3-invocation.png"), full_page=True)
    page.goto(f"{url}/quality")
    assert page.locator("svg").count() == 4
    page.screenshot(path=str(tmp_path / "4-quality.png"), full_page=True)
    page.close()


def test_the_quickstart_session_is_there_with_its_four_invocations(
    server: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server["url"] + "/")
    page.click(f"#sessions a:text('{server['quickstart_session']}')")
    rows = page.locator("#invocations tbody tr")
    assert rows.count() == 4
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(4)] == ["1", "2", "3", "4"]
    page.screenshot(path=str(tmp_path / "quickstart-session.png"), full_page=True)
    rows.nth(3).locator("a").first.click()
    assert page.locator(".evidence").count() >= 1
    page.close()
