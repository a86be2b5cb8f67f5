"""Time-ordered invocation ids (UUID version 7, RFC 9562), generated client-side so that a
retried audit write is recognised as the same record."""

from __future__ import annotations

import os
import uuid
from datetime import datetime


def uuid7(at: datetime, random_bytes: bytes | None = None) -> uuid.UUID:
    unix_ms = int(at.timestamp() * 1000)
    rand = random_bytes if random_bytes is not None else os.urandom(10)
    if len(rand) < 10:
        raise ValueError("uuid7 needs 10 random bytes")
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    rand_int = int.from_bytes(rand[:10], "big")
    rand_a = (rand_int >> 68) & 0xFFF
    rand_b = rand_int & ((1 << 62) - 1)
    value |= rand_a << 64
    value |= 0b10 << 62
    value |= rand_b
    return uuid.UUID(int=value)
