"""Secrets never leave in clear: tokens and API keys are masked whole, URLs lose their
password. Used by ``config show`` and by every configuration error message."""

from __future__ import annotations

import re

from pydantic import SecretStr

from lookup_knowledge.domain.redaction import MASK, mask_url

__all__ = ["MASK", "SECRET_KEYS", "URL_KEYS", "is_secret", "mask_url", "mask_value"]

SECRET_KEYS = frozenset({"milvus.token", "embedder.openai.api-key", "rag.rerank.api-key"})
URL_KEYS = frozenset(
    {"audit.database-url", "milvus.uri", "embedder.openai.base-url", "rag.rerank.url"}
)
_SECRET_WORDS = frozenset({"token", "key", "password", "passwd", "secret", "credential"})
_WORD_BREAK = re.compile(r"[^a-z0-9]+")


def is_secret(key: str) -> bool:
    """Masked whole: the known secret keys, and any unknown name that looks like one."""
    if key in SECRET_KEYS:
        return True
    words = set(_WORD_BREAK.split(key.lower()))
    return key not in URL_KEYS and not words.isdisjoint(_SECRET_WORDS)


def mask_value(key: str, value: object) -> object:
    """The value as it may be shown for ``key``."""
    if value is None or value == "":
        return value
    if isinstance(value, SecretStr) or is_secret(key):
        return MASK
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    return value
