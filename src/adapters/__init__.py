"""Adapters: Milvus, SQL audit store, embedders, configuration, CLI, MCP, container."""
