"""Milvus Lite's point read in this process, without its gRPC round trip.

Milvus Lite (3.x) runs in the process that opens the file: pymilvus talks over gRPC to a
server thread whose servicer answers ``pk in [...]`` with ``Collection.get`` of the
in-process database. A dense lookup reads its ~20 hits' fields that way after the index
beside the file ranked them; the protobuf encoding, the loopback call and pymilvus'
decoding of the same rows cost more than the read itself (``bench_scaling.py``: ~3.6
against ~1.5 ms for 20 rows of the sample corpus). ``lite_get`` calls ``Collection.get``
directly. It returns None whenever that is not plainly possible (no in-process server
for the file, the driver's connection closed, a database other than the default, a Milvus Lite whose internals differ,
any error of the read): the caller then reads through pymilvus, whose errors it knows
how to translate, so this path can only be faster, never different.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from lookup_knowledge.adapters.milvus.connection import MilvusConnection

_log = logging.getLogger(__name__)


def _database(connection: MilvusConnection) -> Any:
    """The in-process Milvus Lite database behind ``connection``, or None."""
    path = connection.lite_path
    if path is None or connection.db_name:
        return None
    client = connection.client()  # the server for the file exists once the client does
    if getattr(client, "_handler", None) is None:
        return None  # the driver's connection is closed: so is this path (its error says so)
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # pragma: no cover - Lite is a dependency of the embedded default
        return None
    servers = getattr(server_manager_instance, "_servers", None)
    entry = servers.get(os.path.abspath(path)) if isinstance(servers, dict) else None
    if not isinstance(entry, tuple) or len(entry) != 3:
        return None
    return entry[1]


def lite_get(
    connection: MilvusConnection,
    collection: str,
    keys: Sequence[str],
    output_fields: Sequence[str],
) -> list[dict[str, Any]] | None:
    """The rows of ``keys`` (primary keys) with ``output_fields`` and the primary key, as
    pymilvus' ``query(filter="pk in [...]")`` returns them; None: read through pymilvus."""
    database = _database(connection)
    if database is None:
        return None
    try:
        rows = database.get_collection(collection).get(
            list(keys), output_fields=list(output_fields)
        )
    except Exception as error:  # noqa: BLE001 - any failure: the pymilvus path decides
        _log.debug("Milvus Lite point read in process failed, reading over gRPC: %r", error)
        return None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        return None
    return rows


__all__ = ["lite_get"]
