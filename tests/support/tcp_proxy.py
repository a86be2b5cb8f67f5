"""A TCP proxy a test can cut and restore: a database that "goes away" and "comes back".

``stop()`` closes the listening socket and every open connection (the client sees the
server vanish: resets on pooled connections, refused new ones); ``start()`` listens on the
same port again; ``close()`` stops it for good and gives the port back.

While stopped the proxy keeps its port bound without listening (connections to it are
refused, as to a server that is gone), so no other test, in this process or in another
pytest-xdist worker, can bind that port in the meantime and answer in the proxy's place.
``closed_port()`` holds its port the same way.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._reserved: socket.socket | None = None  # bound, not listening, while stopped
        self.port = 0

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        return sock

    def start(self) -> None:
        listener, self._reserved = self._reserved or self._bind(), None
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Cut: every connection dies, new ones are refused; the port stays this proxy's."""
        self._cut()
        if self._reserved is None:
            self._reserved = self._bind()

    def close(self) -> None:
        """Cut for good and release the port."""
        self._cut()
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None

    def _cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            doomed = list(self._sockets)
            self._sockets.clear()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in doomed:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


#: The sockets that hold ``closed_port()``'s ports until the test process exits.
_held_closed: list[socket.socket] = []


def closed_port() -> int:
    """A local port nothing listens on: bound and never listened on, so connecting is
    refused, and held for the rest of the process, so nothing else (another test, another
    pytest-xdist worker) can start listening there; a port bound and released could be
    taken by the next server that asks the system for a free one."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    _held_closed.append(held)
    return int(held.getsockname()[1])


class BlackHole:
    """A listener that accepts connections and never answers (nor closes them): a
    server that has hung, or a firewall that swallows the packets after the handshake."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._held.append(client)  # held open, never read from or written to

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for s in self._held:
            s.close()
