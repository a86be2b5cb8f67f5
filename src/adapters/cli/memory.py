"""Fewer malloc arenas in the process the CLI runs in, and a fixed mmap threshold while
it ingests.

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

glibc also serves a block of 128 KB or more by ``mmap``, returned to the system when
freed, but raises that threshold to the size of each such block freed (up to 32 MB): an
ingest frees batch-sized buffers (token arrays, hidden states, row batches) again and
again, so they soon come from the heap, where what they leave between other
allocations stays resident. ``ingest`` fixes the threshold at 256 KB, which turns the
raising off (607 -> 581 MB peak on that sample, no slower). A lookup's buffers are small,
so other commands keep glibc's default; an operator's ``MALLOC_MMAP_THRESHOLD_`` stands.

Milvus Lite keeps its rows in Arrow tables, and Arrow allocates from a pool of its own,
mimalloc in the wheels we install, which keeps the pages its threads freed for their own
later use. ``ingest`` has Arrow allocate from the C library instead (the arenas and the
threshold above then apply to its buffers too): the whole SciFact ingest with ONNX
MiniLM peaked at 562 MB instead of 686, 2 % slower (benchmarks/README.md, "Arrow's pool
for ingest"). An operator's ``ARROW_DEFAULT_MEMORY_POOL`` stands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

#: glibc's ``M_ARENA_MAX`` and ``M_MMAP_THRESHOLD`` parameters of ``mallopt`` (malloc.h).
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
ARENAS = 2
MMAP_THRESHOLD = 256 * 1024


def limit_malloc_arenas(limit: int = ARENAS, environ: Mapping[str, str] = os.environ) -> bool:
    """Cap glibc's malloc arenas at ``limit``; True when the cap was set. Arenas already
    made are kept (call it before threads allocate)."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if "MALLOC_ARENA_MAX" in environ:
        return False
    return _mallopt(_M_ARENA_MAX, limit)


def fix_mmap_threshold(
    threshold: int = MMAP_THRESHOLD, environ: Mapping[str, str] = os.environ
) -> bool:
    """Serve blocks of ``threshold`` bytes or more by ``mmap`` from now on, and stop glibc
    from raising that threshold; True when it was set."""
    if threshold < 1:
        raise ValueError("threshold must be >= 1")
    if "MALLOC_MMAP_THRESHOLD_" in environ:
        return False
    return _mallopt(_M_MMAP_THRESHOLD, threshold)


def use_system_arrow_pool(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Have Arrow allocate from the C library's malloc; True when that was set.

    Arrow reads ``ARROW_DEFAULT_MEMORY_POOL`` once, when pyarrow is imported: before that
    the variable is set (every allocation of Arrow's then follows it); after, pyarrow's own
    default is switched (``pyarrow.set_memory_pool``), which the calls made from Python
    follow."""
    if "ARROW_DEFAULT_MEMORY_POOL" in environ:
        return False
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is None:
        environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
        return True
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    return True


def tune_for_ingest() -> None:
    """What ``ingest`` sets before it opens the store: the fixed mmap threshold and Arrow
    on the C library's malloc (the benchmarks call this to run the ingest as it does)."""
    fix_mmap_threshold()
    use_system_arrow_pool()


def _mallopt(parameter: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
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
    return bool(mallopt(parameter, value))


__all__ = [
    "ARENAS",
    "MMAP_THRESHOLD",
    "fix_mmap_threshold",
    "limit_malloc_arenas",
    "tune_for_ingest",
    "use_system_arrow_pool",
]
