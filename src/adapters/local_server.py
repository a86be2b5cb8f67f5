"""A server running on a data directory, and how the command line reaches it.

Milvus Lite opens its file in one process. While ``lookup-knowledge serve`` (or ``mcp
--transport http``) holds it, a CLI command that needs the knowledge store on the same
data directory (``lookup``, ``ingest``, ``health``, ``eval run``) is sent through that
server instead of opening the file itself:

* the server writes ``<data-dir>/server.json`` (mode 0600) once it listens: its URL, its
  pid, the Milvus Lite file it holds and a local secret made at start-up; it removes the
  file when it stops cleanly;
* the CLI reads it; a file left by a server that was killed (its pid is not alive, or
  its port refuses the connection) is stale and ignored;
* the CLI authenticates with the secret (``Authorization: Bearer``); the server accepts
  it from a loopback address only, as a trusted local operator (the rights of the CLI on
  that data directory: whoever can read the 0600 file can open the data directory).

Stdlib only: the CLI imports this before it knows whether it needs any driver.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
    NotFoundError,
    SearchUnavailable,
)

RUNTIME_FILE = "server.json"
FILE_MODE = 0o600
#: Requests of the local operator (the CLI beside a server) go under this path.
LOCAL_PREFIX = "/v1/local/"


@dataclass(frozen=True, slots=True)
class RunningServer:
    """What ``server.json`` says about the server that holds a data directory."""

    url: str
    pid: int
    secret: str
    kind: str
    lite_path: str | None

    def describe(self) -> str:
        return f"lookup-knowledge {self.kind} (pid {self.pid}) at {self.url}"

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "pid": self.pid,
            "secret": self.secret,
            "kind": self.kind,
            "litePath": self.lite_path,
        }


def runtime_path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / RUNTIME_FILE


def write_runtime_file(
    data_dir: str | os.PathLike[str], *, url: str, kind: str, lite_path: str | None
) -> RunningServer:
    """Announce this process's server in ``data_dir`` (a new secret; mode 0600, written
    to a temporary name and renamed, so a reader never sees half a file)."""
    server = RunningServer(url, os.getpid(), secrets.token_urlsafe(32), kind, lite_path)
    target = runtime_path(data_dir)
    temporary = target.with_name(f".{RUNTIME_FILE}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, json.dumps(server.as_dict()).encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(temporary, target)
    return server


def remove_runtime_file(data_dir: str | os.PathLike[str], server: RunningServer) -> None:
    """Remove ``server.json`` if it is still ``server``'s (a later server's is left)."""
    found = read_runtime_file(data_dir)
    if found is not None and found.secret == server.secret:
        with contextlib.suppress(FileNotFoundError):
            runtime_path(data_dir).unlink()


def read_runtime_file(data_dir: str | os.PathLike[str]) -> RunningServer | None:
    """What ``server.json`` says, None when there is none or it cannot be read."""
    try:
        data = json.loads(runtime_path(data_dir).read_text(encoding="utf-8"))
        lite = data.get("litePath")
        return RunningServer(
            url=str(data["url"]),
            pid=int(data["pid"]),
            secret=str(data["secret"]),
            kind=str(data.get("kind") or "server"),
            lite_path=None if lite is None else str(lite),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def _listening(url: str, timeout_s: float = 2.0) -> bool:
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        return False
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            return True
    except OSError:
        return False


def running_server(data_dir: str | os.PathLike[str]) -> RunningServer | None:
    """The live server announced in ``data_dir``; None when there is none, or the file
    is stale (its pid is gone, or its port refuses the connection)."""
    found = read_runtime_file(data_dir)
    if found is None or not _pid_alive(found.pid) or not _listening(found.url):
        return None
    return found


def held_lite_path(backend: str, milvus_uri: str) -> str | None:
    """The Milvus Lite folder a process on these settings opens (resolved, as the
    connection resolves it); None when it opens none (memory, a Milvus server)."""
    if backend != "milvus" or ("://" in milvus_uri and not milvus_uri.startswith("file://")):
        return None
    return str(Path(milvus_uri.strip().removeprefix("file://")).expanduser().resolve())


def announce(
    data_dir: str | os.PathLike[str], *, url: str, kind: str, lite_path: str | None
) -> RunningServer | None:
    """``write_runtime_file`` in a data directory made 0700 if missing; None (logged)
    when it cannot be written: the server runs, the CLI beside it cannot reach it."""
    import logging

    from lookup_knowledge.adapters.private_files import private_directory

    try:
        private_directory(data_dir, key="data-dir")
        return write_runtime_file(data_dir, url=url, kind=kind, lite_path=lite_path)
    except (OSError, LookupKnowledgeError) as error:
        logging.getLogger(__name__).warning(
            "cannot write %s (%s): commands run beside this server cannot reach it",
            runtime_path(data_dir),
            error,
        )
        return None


def loopback_url(host: str, port: int) -> str:
    """The URL a local client reaches a server bound to ``host``:``port`` at."""
    if host in ("", "0.0.0.0", "localhost"):  # noqa: S104 - an address compared, not bound
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "::1"
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"


def listening_socket(
    host: str, port: int, *, config_key: str, inheritable: bool = False
) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (IPv6 when the host has a colon) and
    listening, for uvicorn to serve on; a port that cannot be bound is a
    ``ConfigurationError`` naming ``config_key`` (``server.port``, ``mcp.port``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as error:
        sock.close()
        raise ConfigurationError(
            config_key, port, f"cannot bind {host}:{port} ({error.strerror})"
        ) from None
    sock.listen(2048)
    if inheritable:
        sock.set_inheritable(True)
    return sock


# --------------------------------------------------------------------------- client


_ERRORS: dict[str, type[LookupKnowledgeError]] = {
    InvalidInputError.code: InvalidInputError,
    NotFoundError.code: NotFoundError,
}


class RemoteError(LookupKnowledgeError):
    """An error the server reported; ``code`` is the server's."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def call_server(
    server: RunningServer, path: str, body: dict[str, object], timeout_s: float = 3600.0
) -> dict[str, object]:
    """POST ``body`` to the local operator endpoint ``path`` of ``server``; its JSON. An
    error the server reports is raised as the project's error of that code."""
    import urllib.error
    import urllib.request

    if not server.url.startswith(("http://", "https://")):
        raise SearchUnavailable(f"{server.describe()}: not an http(s) URL")
    request = urllib.request.Request(  # noqa: S310 - checked just above
        server.url.rstrip("/") + LOCAL_PREFIX + path,
        data=json.dumps(body).encode("utf-8"),
        headers={"content-type": "application/json", "authorization": f"Bearer {server.secret}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s) from our own file
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        try:
            problem = json.load(error)
        except ValueError:
            problem = {}
        code = str(problem.get("error") or "server_error")
        message = str(problem.get("message") or problem.get("detail") or error.reason)
        known = _ERRORS.get(code)
        raise (known(message) if known else RemoteError(code, message)) from None
    except (OSError, ValueError) as error:
        raise SearchUnavailable(f"{server.describe()} did not answer: {error}") from None
    if not isinstance(answer, dict):
        raise SearchUnavailable(f"{server.describe()} answered with something else than JSON")
    return answer
