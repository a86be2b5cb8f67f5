"""Opening what the first lookup would open, so it pays neither (``LookupApp.warm``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lookup_knowledge.adapters.container import Container
from lookup_knowledge.application.ports import Embedder, KnowledgeSearchPort

_LOG = logging.getLogger("lookup_knowledge.adapters.api")


def warm_up(container: Container, *, embedded_search: bool) -> None:
    """The embedding model (in a thread) and, meanwhile, an embedded search store; what
    cannot be opened is logged (INFO) and left to the lookup, or ``health()``."""
    loading = None
    try:
        embedder: Embedder | None = container.embedder()
        if embedder is not None:
            loading = threading.Thread(
                target=_warm,
                args=("embedder", embedder.load),
                name="lookup-knowledge-warm",
                daemon=True,
            )
            loading.start()
        if embedded_search:
            search: KnowledgeSearchPort = container.search()
            if _warm("knowledge search", search.check):
                _warm("knowledge search's indexes", search.warm)
    finally:
        if loading is not None:
            loading.join()


def _warm(what: str, open_it: Callable[[], object]) -> bool:
    """True when ``open_it`` returned."""
    try:
        open_it()
    except Exception as error:  # noqa: BLE001 - a warm-up never fails the caller or its thread
        # The lookup (or health()) meets it again and reports it where the caller looks.
        _LOG.info("warm-up: the %s could not be opened (%s)", what, error)
        return False
    return True
