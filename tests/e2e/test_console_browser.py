"""The console as an auditor uses it: the quickstart fills a data directory (the default
embedder, Milvus Lite, SQLite), ``lookup-knowledge serve`` runs as its own process,
lookups go through the REST API, and the system Chromium (driven by Playwright, no
browser download) walks sessions -> session -> invocation, answer checks, search, the
pagers, the quality charts and the eval runs (one ``eval run`` on a generated BEIR
collection before ``serve`` starts). Screenshots are saved under the test's tmp dir, or
under ``$CONSOLE_SCREENSHOTS`` (``docs/console`` keeps them: see docs/console.md)."""

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
from urllib.parse import quote

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
    from tests.integration.test_eval_e2e import COMMON, RUN_SETTINGS, write_collection

    dataset = write_collection(data_dir.parent / "tiny")
    evaluated = subprocess.run(
        [CLI, "eval", "run", str(dataset), "--config", "dense", *COMMON, *RUN_SETTINGS],
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert evaluated.returncode == 0, evaluated.stderr
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


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shoot(page: Any, path: Path) -> None:
    """A full-page screenshot, at most 1,800 pixels tall (small files for docs/)."""
    height = min(page.evaluate("document.documentElement.scrollHeight"), 1800)
    page.screenshot(
        path=str(path), full_page=True, clip={"x": 0, "y": 0, "width": 1200, "height": height}
    )
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - the eval extra brings it
        return
    with Image.open(path) as shot:  # a palette of 64 colours: a third of the bytes
        shot.convert("RGB").quantize(colors=64).save(path, optimize=True)


def test_an_auditor_follows_an_answer_check_to_the_highlighted_span(
    server: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    url, shots = server["url"], _shots(tmp_path)
    sid = "browser-check"
    tool = _post(f"{url}/v1/lookup", {"query": "PG-53300 too many connections", "session_id": sid})
    _post(f"{url}/v1/lookup", {"query": "how do I rotate the VPN certificate?", "session_id": sid})
    block = tool["evidenceBlocks"][0]
    sentence = next(s for s in block["content"].split("\n") if len(s.split()) >= 4).strip()
    cited = block["document_id"]
    answer = (
        f"{sentence} [{cited}]. The primary allows 9000 connections [{cited}]. "
        "Restarting the laptop always fixes it."
    )
    check = _post(f"{url}/v1/check-answer", {"session_id": sid, "answer": answer})
    assert len({c["verdict"] for c in check["claims"]}) >= 2
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(url + "/")
    _shoot(page, shots / "sessions.png")
    page.goto(f"{url}/?q={sid}")
    verdict = page.locator("#sessions td.checks .verdict").first
    assert verdict.inner_text() == check["verdict"]
    page.click(f"#sessions a:text('{sid}')")
    page.wait_for_selector("#checks")
    assert page.locator("#invocations td.checks .verdict").count() >= 1  # cited by checks
    _shoot(page, shots / "session.png")
    page.locator("#checks a").first.click()
    page.wait_for_selector("#check-id")
    claim = check["claims"][0]
    assert page.locator(f"#claim-{claim['index']} .verdict").first.inner_text() == claim["verdict"]
    span = claim["span"]
    assert span is not None
    assert (
        page.locator("mark.span").first.inner_text()
        == block["content"][span["start"] : span["end"]]
    )
    _shoot(page, shots / "check.png")
    page.locator(".cited-head a").first.click()  # to the invocation that showed the block
    page.wait_for_selector("#invocation-id")
    assert page.inner_text("#invocation-id") == tool["invocationId"]
    page.click("#neighbours a[rel=next]")
    assert "rotate the VPN certificate" in page.inner_text("#query")
    page.click("#neighbours a[rel=prev]")
    assert page.inner_text("#invocation-id") == tool["invocationId"]
    _shoot(page, shots / "invocation.png")
    page.close()


def test_an_auditor_searches_by_query_text_and_by_document(
    server: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    url, shots = server["url"], _shots(tmp_path)
    tool = _post(
        f"{url}/v1/lookup",
        {"query": "replication lag on the standby", "session_id": "browser-find"},
    )
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(url + "/")
    page.fill("input[name=text]", "Replication LAG")
    page.click("form.filters button")
    assert "browser-find" in page.locator("#sessions").inner_text()
    _shoot(page, shots / "search-by-text.png")
    page.fill("input[name=text]", "")
    page.fill("input[name=doc]", tool["evidenceBlocks"][0]["document_id"])
    page.click("form.filters button")
    assert "browser-find" in page.locator("#sessions").inner_text()
    page.close()


def test_long_queries_fold_and_no_evidence_calls_show_their_near_misses(
    server: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    url, shots = server["url"], _shots(tmp_path)
    long_query = "why is the database slow " + "and still slow " * 260
    _post(f"{url}/v1/lookup", {"query": long_query, "session_id": "browser-long"})
    missed = _post(
        f"{url}/v1/lookup",
        {"query": "qwxzv blorft jibber snark", "session_id": "browser-long", "mode": "sparse"},
    )
    assert not missed["found"], missed
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{url}/sessions/browser-long")
    folded = page.locator("#invocations details.long").first
    assert not folded.locator(".whole").is_visible()
    before = page.locator("#invocations").bounding_box()["height"]
    assert before < 400  # 3,900 characters do not flood the table
    _shoot(page, shots / "long-query.png")
    folded.locator("summary").click()
    assert folded.locator(".whole").is_visible()
    page.goto(f"{url}/invocations/{missed['invocationId']}")
    assert "found no hit at all" in page.inner_text("#near-misses")  # no word matched
    assert "None" not in page.locator("main").inner_text().split("retrieval_details as")[0]
    _shoot(page, shots / "no-evidence.png")
    page.close()


def test_quality_charts_have_axes_and_the_eval_run_links_its_report(
    server: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    url, shots = server["url"], _shots(tmp_path)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{url}/quality")
    assert page.locator("figure.chart svg").count() == 4
    assert page.locator("figure.chart svg text.tick").count() >= 4 * 6
    assert "milliseconds" in page.inner_text(".charts")
    runs = page.locator("#eval-runs tbody tr")
    assert runs.count() == 1
    _shoot(page, shots / "quality.png")
    runs.first.locator("a.report").click()
    page.wait_for_load_state()
    assert page.locator("h1").inner_text().startswith("Eval ")
    assert page.locator("img").evaluate("i => i.naturalWidth") > 0  # its chart, inline
    _shoot(page, shots / "eval-report.png")
    page.go_back()
    runs.first.locator("td a").nth(1).click()  # the configuration's audit session
    assert page.locator("#invocations tbody tr").count() >= 10
    assert not [e for e in errors if "Content Security Policy" in e]
    page.close()


def test_an_auditor_signs_in_and_out(browser: Any, tmp_path: Path) -> None:
    from lookup_knowledge.adapters.http import create_http_app
    from tests.support.http import AUDITOR, sample_app, served

    shots = _shots(tmp_path)
    lookup_app = sample_app(tmp_path / "data", **{"server.auditor-token": AUDITOR})
    try:
        lookup_app.lookup("PG-53300", session_id="signed-in")
        with served(create_http_app(lookup_app)) as url:
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.goto(url + "/")
            assert "needs an auditor token" in page.inner_text("main")
            page.goto(url + "/login")
            page.fill("input[name=token]", AUDITOR)
            _shoot(page, shots / "login.png")
            page.click("form button[type=submit]")
            page.wait_for_selector("#sessions")
            assert page.locator("form.signout button").is_visible()
            page.click("form.signout button")
            page.wait_for_url(url + "/login")
            page.goto(url + "/")
            assert "needs an auditor token" in page.inner_text("main")
            page.close()
    finally:
        lookup_app.close()


HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '"><svg onload="window.__pwned = 3">',
    "javascript:window.__pwned = 4",
]


def test_no_script_runs_from_stored_text_even_without_the_csp(browser: Any, tmp_path: Path) -> None:
    """Stored text on every page of the console, read in a browser that ignores the
    content security policy: escaping alone must keep every payload inert."""
    from lookup_knowledge.adapters.http import create_http_app
    from tests.support.http import sample_app, served

    lookup_app = sample_app(tmp_path / "data")
    try:
        bad = " ".join(HOSTILE)
        sid = "evil-" + HOSTILE[1]
        # The hostile query is recorded (mostly words no document holds: no evidence);
        # the plain one gives the block the hostile answer cites.
        hostile = lookup_app.lookup("PG-53300 too many connections " + bad, session_id=sid)
        tool = lookup_app.lookup("PG-53300 too many connections", session_id=sid)
        check = lookup_app.check_answer(
            sid, f"{bad} PG-53300 too many connections [{tool['evidenceBlocks'][0]['document_id']}]"
        )
        with served(create_http_app(lookup_app)) as url:
            context = browser.new_context(bypass_csp=True)
            page = context.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            pages = [
                "/",
                "/?" + "q=evil-",
                "/?text=" + HOSTILE[0],
                "/?doc=" + HOSTILE[2],
                f"/sessions/{quote(sid, safe='')}",
                f"/invocations/{hostile['invocationId']}",
                f"/invocations/{tool['invocationId']}",
                f"/checks/{check.id}",
                "/quality",
            ]
            for path in pages:
                page.goto(url + path)
                assert page.evaluate("window.__pwned") is None, path
                for link in page.locator("a").all():
                    assert not (link.get_attribute("href") or "").startswith("javascript:")
            assert dialogs == []
            context.close()
    finally:
        lookup_app.close()
