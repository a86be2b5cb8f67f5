"""What the HTTP tests share: a LookupApp over the sample corpus (in-memory search,
hashing embedder, SQLite audit) and ways to serve it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.sample_corpus import corpus_path

AUDITOR = "auditor-token-for-tests-0123456789"
AGENT = "agent-token-for-tests-0123456789"


def sample_app(data_dir: Path, **overrides: object) -> LookupApp:
    corpus = corpus_path()
    app = create_app(
        overrides={
            "data-dir": str(data_dir),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.domains-file": str(corpus / "domains.yaml"),
            **overrides,
        }
    )
    categories = sorted(p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("_"))
    app.ingest(categories, root=corpus)
    return app


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a port of its own on 127.0.0.1 (port 0: the kernel picks).

    Pass it to ``uvicorn.Server.run(sockets=[...])``: the server listens on the socket it
    was handed, so no other test (another pytest-xdist worker) can take the port between
    choosing it and binding it, as it could with a port number found free and released.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def served(asgi_app: object) -> Iterator[str]:
    """Run ``asgi_app`` under uvicorn in a thread on its own loopback port; yields its URL."""
    import uvicorn

    sock = loopback_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(asgi_app, log_level="warning"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


#: The base URL of in-process test clients: a loopback name ``serve`` answers to (the
#: TestClient's default ``testserver`` is a foreign Host, refused with 421).
LOCAL = "http://localhost"
