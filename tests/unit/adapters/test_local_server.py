"""``server.json``: how a running server is announced to the CLI on its data directory,
and how a stale announcement (a killed server) is told apart from a live one."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from lookup_knowledge.adapters.local_server import (
    RUNTIME_FILE,
    held_lite_path,
    loopback_url,
    read_runtime_file,
    remove_runtime_file,
    running_server,
    write_runtime_file,
)


@pytest.fixture
def listening() -> Iterator[str]:
    """A loopback port that accepts connections; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield loopback_url("127.0.0.1", sock.getsockname()[1])


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_runtime_file_is_private_and_read_back(tmp_path: Path, listening: str) -> None:
    written = write_runtime_file(tmp_path, url=listening, kind="serve", lite_path="/x/milvus.db")
    assert stat.S_IMODE((tmp_path / RUNTIME_FILE).stat().st_mode) == 0o600
    assert read_runtime_file(tmp_path) == written
    assert written.pid == os.getpid()
    assert len(written.secret) >= 32
    assert running_server(tmp_path) == written


def test_a_file_whose_pid_is_gone_is_stale(tmp_path: Path, listening: str) -> None:
    written = write_runtime_file(tmp_path, url=listening, kind="serve", lite_path=None)
    stale = replace(written, pid=_dead_pid())
    (tmp_path / RUNTIME_FILE).write_text(json.dumps(stale.as_dict()), encoding="utf-8")
    assert read_runtime_file(tmp_path) == stale
    assert running_server(tmp_path) is None


def test_a_file_whose_port_refuses_is_stale(tmp_path: Path) -> None:
    with socket.socket() as sock:  # bound, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        url = loopback_url("127.0.0.1", sock.getsockname()[1])
        write_runtime_file(tmp_path, url=url, kind="mcp", lite_path=None)
        assert running_server(tmp_path) is None


@pytest.mark.parametrize("content", ["", "{", "[]", '{"url": "http://127.0.0.1:1"}'])
def test_an_unreadable_file_is_no_server(tmp_path: Path, content: str) -> None:
    (tmp_path / RUNTIME_FILE).write_text(content, encoding="utf-8")
    assert read_runtime_file(tmp_path) is None
    assert running_server(tmp_path) is None


def test_a_server_removes_only_its_own_file(tmp_path: Path, listening: str) -> None:
    first = write_runtime_file(tmp_path, url=listening, kind="serve", lite_path=None)
    second = write_runtime_file(tmp_path, url=listening, kind="serve", lite_path=None)
    remove_runtime_file(tmp_path, first)  # a later server took the data directory over
    assert read_runtime_file(tmp_path) == second
    remove_runtime_file(tmp_path, second)
    assert not (tmp_path / RUNTIME_FILE).exists()


def test_the_lite_path_is_the_one_the_connection_opens(tmp_path: Path) -> None:
    lite = str((tmp_path / "milvus.db").resolve())
    assert held_lite_path("milvus", str(tmp_path / "milvus.db")) == lite
    assert held_lite_path("milvus", f"file://{tmp_path}/milvus.db") == lite
    assert held_lite_path("milvus", "http://milvus:19530") is None
    assert held_lite_path("memory", str(tmp_path / "milvus.db")) is None


def test_a_wildcard_bind_is_reached_on_loopback() -> None:
    assert loopback_url("0.0.0.0", 8787) == "http://127.0.0.1:8787"
    assert loopback_url("::", 8787) == "http://[::1]:8787"
    assert loopback_url("127.0.0.1", 8787) == "http://127.0.0.1:8787"
