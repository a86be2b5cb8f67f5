"""A named collection on a connection: its layout (cached) and its load state."""

from __future__ import annotations

import threading

from lookup_knowledge.adapters.milvus.connection import MilvusConnection
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate
from lookup_knowledge.adapters.milvus.schema import CollectionLayout, read_layout
from lookup_knowledge.domain.errors import ConfigurationError, SearchUnavailable

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def validate_collection_name(name: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 255
        or not set(name) <= _NAME_CHARS
        or name[0].isdigit()
    ):
        raise ConfigurationError(
            "milvus.collection",
            name,
            "must be 1-255 letters, digits or underscores, not starting with a digit",
        )
    return name


class KnowledgeCollection:
    def __init__(self, connection: MilvusConnection, name: str) -> None:
        self.connection = connection
        self.name = validate_collection_name(name)
        self._layout: CollectionLayout | None = None
        self._loaded = False
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"{self.connection.uri} (collection {self.name!r})"

    def invalidate(self) -> None:
        with self._lock:
            self._layout = None
            self._loaded = False

    def exists(self) -> bool:
        client = self.connection.client()
        try:
            return bool(client.has_collection(self.name, timeout=self.connection.timeout_s))
        except DRIVER_ERRORS as error:
            raise translate(error, "has_collection", self.where) from error

    def layout(self) -> CollectionLayout | None:
        """The checked layout, or None when the collection does not exist."""
        cached = self._layout
        if cached is not None:
            return cached
        if not self.exists():
            return None
        client = self.connection.client()
        try:
            description = client.describe_collection(self.name, timeout=self.connection.timeout_s)
        except DRIVER_ERRORS as error:
            raise translate(error, "describe_collection", self.where) from error
        layout = read_layout(description, where=self.where)
        with self._lock:
            self._layout = layout
        return layout

    def require_layout(self) -> CollectionLayout:
        layout = self.layout()
        if layout is None:
            raise SearchUnavailable(
                f"Milvus collection {self.name!r} does not exist at {self.connection.uri}: "
                "ingest documents first (it is created on first ingest)"
            )
        return layout

    def ensure_loaded(self) -> None:
        """Load the collection into memory once (a reopened Lite file starts released)."""
        if self._loaded:
            return
        client = self.connection.client()
        timeout = self.connection.timeout_s
        try:
            state = client.get_load_state(self.name, timeout=timeout)
            if "Loaded" not in str(state.get("state", "")):
                # Loading a large collection can take longer than one request.
                client.load_collection(self.name, timeout=max(timeout, 120.0))
        except DRIVER_ERRORS as error:
            raise translate(error, "load_collection", self.where) from error
        self._loaded = True
