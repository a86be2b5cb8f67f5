"""The Milvus Lite client's gRPC channel does not ping its in-process server: pymilvus's
10 s keepalive met Lite's 5 min ping policy and drew GOAWAY "too_many_pings" in long
ingests. A server connection keeps pymilvus's keepalive."""

from __future__ import annotations

from pathlib import Path

from lookup_knowledge.adapters.milvus import MilvusConnection
from lookup_knowledge.adapters.milvus.connection import LITE_GRPC_OPTIONS


def test_a_lite_channel_is_opened_without_keepalive_pings(tmp_path: Path) -> None:
    connection = MilvusConnection(str(tmp_path / "k.db"), timeout_s=10.0)
    try:
        client = connection.client()
        options = client._get_connection()._grpc_options
        assert options["grpc.keepalive_permit_without_calls"] == 0
        assert options["grpc.keepalive_time_ms"] >= 2**31 - 1
        assert options == LITE_GRPC_OPTIONS
        assert client.list_collections() == []  # and the channel works
    finally:
        connection.close()
