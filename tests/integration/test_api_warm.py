"""``LookupApp.warm``: the model and an embedded search store opened before the first
lookup (the model in a thread meanwhile); a server is left to the first lookup; nothing
raises."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.domain.errors import EmbeddingError, LookupKnowledgeError, SearchUnavailable
from lookup_knowledge.domain.model import InvocationStatus
from tests.fakes import FakeSearch, chunk


class CountingEmbedder(HashingEmbedder):
    """Counts ``load`` calls and the thread each ran on; ``fail`` makes it raise."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(dimension=32)
        self.loads: list[str] = []
        self.fail = fail

    def load(self) -> None:
        self.loads.append(threading.current_thread().name)
        if self.fail:
            raise EmbeddingError("model file not found")


class CheckedSearch(FakeSearch):
    def __init__(self, rows: Sequence[object], fail: bool = False) -> None:
        super().__init__(list(rows))  # type: ignore[arg-type]
        self.checks: list[str] = []
        self.warms: list[str] = []
        self.fail = fail

    def check(self) -> str:
        self.checks.append(threading.current_thread().name)
        if self.fail:
            raise SearchUnavailable("the Lite file is in use")
        return super().check()

    def warm(self) -> None:
        self.warms.append(threading.current_thread().name)


def _container(tmp_path: Path, **overrides: object) -> tuple[Container, object]:
    settings = load_settings(
        overrides={"data-dir": str(tmp_path), "embedder.provider": "hashing", **overrides}
    ).settings
    return Container(settings=settings), settings


def test_warm_loads_the_model_in_a_thread_while_the_embedded_store_opens(tmp_path: Path) -> None:
    container, settings = _container(tmp_path)  # the embedded default: a Lite file
    embedder, search = CountingEmbedder(), CheckedSearch([chunk("doc", 0, 0.9)])
    container.embedder.override(embedder)
    container.search.override(search)
    with create_app(settings, container=container) as app:  # type: ignore[arg-type]
        app.warm()
        assert embedder.loads == ["lookup-knowledge-warm"]
        assert search.checks == [threading.current_thread().name]
        assert search.warms == search.checks  # its indexes opened, after the check
        assert app.lookup("anything", session_id="s", mode="dense")["found"]


def test_a_milvus_server_is_left_to_the_first_lookup(tmp_path: Path) -> None:
    # Opening a server is a connection that may wait out its timeout: the lookup would
    # wait again, so warm does not try it.
    container, settings = _container(tmp_path, **{"milvus.uri": "http://127.0.0.1:1"})
    embedder, search = CountingEmbedder(), CheckedSearch([])
    container.embedder.override(embedder)
    container.search.override(search)
    with create_app(settings, container=container) as app:  # type: ignore[arg-type]
        app.warm()
    assert embedder.loads == ["lookup-knowledge-warm"]
    assert search.checks == search.warms == []


def test_what_cannot_be_opened_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    container, settings = _container(tmp_path)
    container.embedder.override(CountingEmbedder(fail=True))
    failing = CheckedSearch([], fail=True)
    container.search.override(failing)
    with (
        caplog.at_level(logging.INFO, logger="lookup_knowledge.adapters.api"),
        create_app(settings, container=container) as app,  # type: ignore[arg-type]
    ):
        app.warm()
        assert failing.warms == []  # a store that cannot be reached is not opened further
        result = app.lookup_result("anything", session_id="s", mode="dense")
    assert result.status is InvocationStatus.NO_EVIDENCE  # the lookup runs as without it
    logged = [r.getMessage() for r in caplog.records]
    assert "warm-up: the embedder could not be opened (model file not found)" in logged
    assert any(m.startswith("warm-up: the knowledge search could not be opened") for m in logged)


def test_background_warm_returns_at_once_close_waits_for_it_and_a_closed_app_refuses(
    tmp_path: Path,
) -> None:
    container, settings = _container(tmp_path)
    gate = threading.Event()

    class SlowEmbedder(CountingEmbedder):
        def load(self) -> None:
            gate.wait(10)
            super().load()

    embedder = SlowEmbedder()
    container.embedder.override(embedder)
    container.search.override(CheckedSearch([chunk("doc", 0, 0.9)]))
    app = create_app(settings, container=container)  # type: ignore[arg-type]
    app.warm(background=True)  # returns while the model is still "loading"
    assert embedder.loads == []
    closing = threading.Thread(target=app.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # close waits for the warm-up in flight ...
    gate.set()
    closing.join(10)
    assert embedder.loads == ["lookup-knowledge-warm"]  # ... which finished
    with pytest.raises(LookupKnowledgeError, match="closed"):
        app.warm(background=True)


def test_an_unexpected_error_while_warming_is_logged_and_the_thread_joined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    container, settings = _container(tmp_path)
    embedder = CountingEmbedder()

    class BrokenSearch(CheckedSearch):
        def check(self) -> str:
            raise OSError("disk went away")

    container.embedder.override(embedder)
    container.search.override(BrokenSearch([]))
    with (
        caplog.at_level(logging.INFO, logger="lookup_knowledge.adapters.api"),
        create_app(settings, container=container) as app,  # type: ignore[arg-type]
    ):
        app.warm()
        assert embedder.loads == ["lookup-knowledge-warm"]  # joined before warm returned
    assert any("disk went away" in r.getMessage() for r in caplog.records)


def test_a_lite_file_is_embedded_and_a_server_is_not(tmp_path: Path) -> None:
    for uri, embedded in (
        (str(tmp_path / "m.db"), True),
        ("http://127.0.0.1:19530", False),
        ("https://milvus.example:443", False),
    ):
        _, settings = _container(tmp_path, **{"milvus.uri": uri})
        assert settings.embedded_search is embedded, uri  # type: ignore[attr-defined]
