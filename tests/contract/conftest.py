"""Fixtures the contract suites share: the PyPI ``milvus`` server (one per session)."""

from __future__ import annotations

import fcntl
import socket
from collections.abc import Iterator
from typing import Any

import pytest

ETCD_PEER_PORT = 2380


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def pypi_milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The PyPI ``milvus`` server (2.3.x, no Docker) on free 127.0.0.1 ports.

    One worker of this run starts it: every case that takes it is in one unit of work
    (tests/support/xdist.py), and the workers (they share the run's base temporary
    folder) take a lock first. The lock is held for the worker's whole session, so a
    second worker asking for it means that grouping broke: that fails at once, saying
    so, instead of waiting for the other worker's session to end."""
    try:
        import milvus
    except ImportError:
        pytest.skip(
            "the PyPI milvus server package is not installed (pip install -e '.[milvus-server]')"
        )
    run_folder = tmp_path_factory.getbasetemp().parent
    with (run_folder / "pypi-milvus.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail(
                "another pytest-xdist worker of this run holds the PyPI milvus server: the"
                " server's cases were split over workers (see tests/support/xdist.py)"
            )
        yield from _serve(milvus, tmp_path_factory)


def _serve(milvus: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if _port_in_use(ETCD_PEER_PORT):
        # The embedded etcd of this server build always takes its peer port 2380, so
        # a second one on the same machine cannot start (another session's tests).
        pytest.skip(f"another embedded Milvus holds 127.0.0.1:{ETCD_PEER_PORT}")
    server: Any = milvus.MilvusServer(milvus.MilvusServerConfig())
    server.set_base_dir(str(tmp_path_factory.mktemp("milvus-server")))
    try:
        server.start()
    except (TimeoutError, RuntimeError) as error:
        server.stop()
        pytest.fail(f"the PyPI milvus server did not start: {error}")
    try:
        yield f"http://127.0.0.1:{server.listen_port}"
    finally:
        server.stop()
