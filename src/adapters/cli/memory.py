"""Fewer malloc arenas in the process the CLI runs in.

glibc gives each thread that allocates an arena of its own, up to eight per core, and
memory freed in one arena is not reused by another thread's: an ingest runs ONNX
Runtime's worker threads, Milvus Lite's gRPC threads and tantivy's writer side by side,
and the freed memory left behind in their arenas is resident memory no thread can use.
Two arenas measured the SciFact ingest sample (625 documents, ONNX MiniLM) at 740 MB peak
RSS instead of 883, and no slower (benchmarks/README.md, "Ingest memory").

The CLI owns its process, so it sets this before any thread starts; a service that embeds
the library owns its process and decides for itself (``MALLOC_ARENA_MAX=2`` in its
environment, docs/operations.md). An operator's ``MALLOC_ARENA_MAX`` stands as it is.
Elsewhere than glibc (musl, macOS, Windows) nothing is changed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: glibc's ``M_ARENA_MAX`` parameter of ``mallopt`` (malloc.h).
_M_ARENA_MAX = -8
ARENAS = 2


def limit_malloc_arenas(limit: int = ARENAS, environ: Mapping[str, str] = os.environ) -> bool:
    """Cap glibc's malloc arenas at ``limit``; True when the cap was set. Arenas already
    made are kept (call it before threads allocate)."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if "MALLOC_ARENA_MAX" in environ or not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl's mallopt does nothing
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, limit))


__all__ = ["ARENAS", "limit_malloc_arenas"]
