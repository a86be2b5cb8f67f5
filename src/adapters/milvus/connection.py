"""One Milvus client per URI: Milvus Lite (a local ``.db`` file) or a server.

``MilvusConnection`` creates the pymilvus client lazily, detects what the server can
do from its version, and is shared by the search adapter and the store (the
composition root owns it and closes it). A local Lite file is only opened once per
process through it, which Milvus Lite needs.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate
from lookup_knowledge.adapters.private_files import private_directory
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    SearchStoreInUse,
    SearchUnavailable,
)
from lookup_knowledge.domain.redaction import mask_url

SERVER_SCHEMES = ("http://", "https://", "tcp://", "grpc://")
#: The Milvus version the BM25 function, hybrid search over it and grouping with
#: group_size need.
MODERN_MILVUS = (2, 5)


@dataclass(frozen=True, slots=True)
class ServerCapabilities:
    """What the server can do, from its version string."""

    version: str
    lite: bool
    bm25: bool
    hybrid: bool
    grouping: bool

    def requirement(self) -> str:
        return f"Milvus >= {MODERN_MILVUS[0]}.{MODERN_MILVUS[1]} (or Milvus Lite >= 2.5)"


_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


#: gRPC channel options for a Milvus Lite client (see ``MilvusConnection.client``).
LITE_GRPC_OPTIONS: dict[str, int] = {
    "grpc.keepalive_time_ms": 2**31 - 1,
    "grpc.keepalive_permit_without_calls": 0,
}


def parse_capabilities(version: str) -> ServerCapabilities:
    """Capabilities from ``get_server_version()``.

    ``milvus_lite-3.2.2`` -> Lite, everything; ``v2.3.5-lite`` (the PyPI ``milvus``
    server) -> dense only; ``v2.5.x`` or later -> everything. A version that cannot be
    parsed (a managed service's own string) is taken as modern; a mode it lacks then
    fails at request time and is translated to ``UnsupportedSearchMode``.
    """
    text = version.strip()
    lite = text.lower().startswith("milvus_lite")
    match = _VERSION.search(text)
    if match is None:
        return ServerCapabilities(text, lite, True, True, True)
    major, minor = int(match.group(1)), int(match.group(2))
    modern = (lite and major >= 3) or (major, minor) >= MODERN_MILVUS
    # Milvus Lite 3.2's grouping drops a document with fewer chunks among the hits than
    # group_size even with strict_group_size=False (the eval found SciFact's best
    # single-chunk abstracts missing: nDCG@10 0.39 instead of 0.66), so on Lite the
    # adapter groups client-side, as it does on servers without grouping.
    grouping = modern and not lite
    return ServerCapabilities(text, lite, modern, modern, grouping)


class _UnimplementedRpcFilter(logging.Filter):
    """Milvus Lite runs its gRPC server in this process and leaves some RPCs that
    pymilvus 3 probes (``AllocTimestamp``) unimplemented; grpc logs each probe as an
    ERROR with a traceback although pymilvus handles it. Drop exactly those records."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], NotImplementedError):
            return False
        return "Method not implemented" not in record.getMessage()


_GRPC_FILTER = _UnimplementedRpcFilter()


class _LockedDataDirFilter(logging.Filter):
    """Milvus Lite logs a busy file as a 20-line traceback before pymilvus raises; the
    connection reports it in one line (``SearchStoreInUse``), so drop that record."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "DataDirLockedError"


_LOCKED_FILTER = _LockedDataDirFilter()
#: The file inside a Milvus Lite folder that its owning process holds an flock on.
LITE_LOCK_FILE = "LOCK"


def lite_file_in_use(path: str) -> bool:
    """True when another process holds the Milvus Lite folder ``path`` (its LOCK file).

    Only meaningful while this process does not serve ``path`` itself: an flock is per
    open file, so this process's own server would look like "another process" too."""
    lock = Path(path) / LITE_LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False  # no LOCK file: nobody has opened the folder yet
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _in_use_error(path: str) -> SearchStoreInUse:
    return SearchStoreInUse(
        f"the Milvus Lite file {path} is in use by another process; Milvus Lite opens a "
        "file in one process at a time: stop that process, use another --data-dir or "
        "milvus.uri, or run a Milvus server (milvus.uri=http://host:19530) for several"
    )


# Milvus Lite keeps one in-process server per .db path; several connections to one path
# (two apps, a CLI and a benchmark in one process) share it, so it is released only when
# the last one closes. Without the release the data directory stays locked until exit.
_lite_users: dict[str, int] = {}
_lite_lock = threading.Lock()


def _acquire_lite(path: str) -> None:
    """Count a user of ``path``; the first user of a file another process holds gets
    ``SearchStoreInUse`` instead."""
    logging.getLogger("grpc._server").addFilter(_GRPC_FILTER)
    logging.getLogger("milvus_lite.server_manager").addFilter(_LOCKED_FILTER)
    with _lite_lock:
        if _lite_users.get(path, 0) == 0 and lite_file_in_use(path):
            raise _in_use_error(path)
        _lite_users[path] = _lite_users.get(path, 0) + 1


def _release_lite(path: str) -> None:
    with _lite_lock:
        remaining = _lite_users.get(path, 0) - 1
        if remaining > 0:
            _lite_users[path] = remaining
            return
        _lite_users.pop(path, None)
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # pragma: no cover - Lite is a dependency; nothing to release
        return
    server_manager_instance.release_server(path)


class MilvusConnection:
    """A lazily created pymilvus ``MilvusClient`` with capability detection.

    ``uri``: a local file ending in ``.db`` (optionally ``file://``) for Milvus Lite,
    or ``http(s)://host:port`` for a server or cluster. ``token``: ``user:password``
    or an API key for managed Milvus. ``timeout_s`` bounds every call (pymilvus would
    otherwise retry an unreachable server for minutes).
    """

    def __init__(
        self,
        uri: str,
        *,
        token: str | None = None,
        db_name: str | None = None,
        timeout_s: float = 10.0,
        create_dirs: bool = True,
    ) -> None:
        if not isinstance(uri, str) or not uri.strip():
            raise ConfigurationError("milvus.uri", uri, "must not be empty")
        if timeout_s <= 0:
            raise ConfigurationError("milvus.timeout-s", timeout_s, "must be > 0")
        uri = uri.strip()
        self._lite = not uri.startswith(SERVER_SCHEMES)
        if self._lite:
            path = Path(uri.removeprefix("file://")).expanduser()
            if path.suffix != ".db":
                raise ConfigurationError(
                    "milvus.uri",
                    uri,
                    "a Milvus Lite file must end with .db; a server URI starts with "
                    "http:// or https://",
                )
            if create_dirs:
                # Milvus Lite 3 keeps its data in a folder named like the file: made
                # 0700 here first, so what Lite writes inside is its owner's only.
                private_directory(path.parent, key="milvus.uri")
                if not path.exists():
                    private_directory(path, key="milvus.uri")
            uri = str(path.resolve())
        self._uri = uri
        self._token = token
        self._db_name = db_name
        self._timeout_s = timeout_s
        self._client: Any = None
        self._capabilities: ServerCapabilities | None = None
        self._closed = False
        self._lock = threading.Lock()
        # Objects every adapter on this connection shares (the Lite full-text index of
        # a collection), closed with it.
        self._shared: dict[str, Any] = {}

    @property
    def uri(self) -> str:
        """The URI for messages (credentials redacted)."""
        return mask_url(self._uri)

    @property
    def is_lite(self) -> bool:
        return self._lite

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def db_name(self) -> str | None:
        """The database the client is opened on (None: the server's default)."""
        return self._db_name

    @property
    def lite_path(self) -> str | None:
        """The Milvus Lite folder (resolved), None for a server."""
        return self._uri if self._lite else None

    def shared(self, key: str, factory: Any) -> Any:
        """The one object ``key`` names on this connection, made by ``factory()`` on first
        use; objects with a ``close`` method are closed with the connection."""
        with self._lock:
            found = self._shared.get(key)
            if found is None:
                if self._closed:
                    raise SearchUnavailable(f"the Milvus connection to {self.uri} is closed")
                found = self._shared[key] = factory()
            return found

    def client(self) -> Any:
        """The pymilvus client; ``SearchUnavailable`` when it cannot connect or is closed."""
        client = self._client
        if client is not None:
            return client
        with self._lock:
            if self._closed:
                raise SearchUnavailable(f"the Milvus connection to {self.uri} is closed")
            if self._client is None:
                from pymilvus import MilvusClient

                kwargs: dict[str, Any] = {"uri": self._uri, "timeout": self._timeout_s}
                if self._token:
                    kwargs["token"] = self._token
                if self._db_name:
                    kwargs["db_name"] = self._db_name
                if self._lite:
                    # pymilvus pings every 10 s; Lite's in-process gRPC server allows a
                    # ping without data every 5 min and answers more with GOAWAY
                    # "too_many_pings" (seen on stderr in long ingests). Nothing to keep
                    # alive in-process: no pings.
                    kwargs["grpc_options"] = dict(LITE_GRPC_OPTIONS)
                    _acquire_lite(self._uri)
                try:
                    self._client = MilvusClient(**kwargs)
                except DRIVER_ERRORS as error:
                    if self._lite:
                        _release_lite(self._uri)
                        if lite_file_in_use(self._uri):  # taken between check and open
                            raise _in_use_error(self._uri) from error
                    raise translate(error, "connect", self.uri) from error
            return self._client

    def capabilities(self) -> ServerCapabilities:
        caps = self._capabilities
        if caps is None:
            client = self.client()
            try:
                version = str(client.get_server_version(timeout=self._timeout_s))
            except DRIVER_ERRORS as error:
                raise translate(error, "get_server_version", self.uri) from error
            caps = parse_capabilities(version)
            self._capabilities = caps
        return caps

    def unshare(self, key: str) -> Any:
        """Forget the shared object ``key`` (returned; None when there was none)."""
        with self._lock:
            return self._shared.pop(key, None)

    def close(self) -> None:
        """Close the client; later calls raise ``SearchUnavailable``. Idempotent."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
            shared, self._shared = list(self._shared.values()), {}
        for item in shared:
            closer = getattr(item, "close", None)
            if callable(closer):
                closer()
        if client is not None:
            with contextlib.suppress(*DRIVER_ERRORS):  # closing a broken one must not raise
                client.close()
            if self._lite:
                _release_lite(self._uri)

    def __enter__(self) -> MilvusConnection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
