"""The CLI caps glibc's malloc arenas before its threads allocate, and ingest fixes its
mmap threshold and has Arrow allocate from the C library; an operator's
``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_`` or ``ARROW_DEFAULT_MEMORY_POOL`` stands;
elsewhere than glibc nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lookup_knowledge.adapters.cli.memory import (
    fix_mmap_threshold,
    limit_malloc_arenas,
    use_system_arrow_pool,
)

GLIBC = sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))

# Threads that each allocate while holding memory, then glibc's own count of its arenas
# (malloc_stats prints one "Arena N:" line per arena to stderr).
_THREADS = textwrap.dedent(
    """
    import ctypes, sys, threading
    from lookup_knowledge.adapters.cli.memory import limit_malloc_arenas
    if sys.argv[1] == "cap":
        assert limit_malloc_arenas()
    barrier = threading.Barrier(6)
    def work():
        held = [bytearray(4096) for _ in range(64)]
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.stderr.flush()
    ctypes.CDLL(None).malloc_stats()
    """
)


def _arenas(mode: str, env: dict[str, str]) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _THREADS, mode], capture_output=True, text=True, env=env, check=True
    )
    return sum(1 for line in out.stderr.splitlines() if line.startswith("Arena "))


@pytest.mark.skipif(not GLIBC, reason="glibc's arenas")
def test_threads_share_at_most_two_arenas_once_capped() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _arenas("free", env) > 2  # without the cap each thread gets one
    assert _arenas("cap", env) <= 2


def test_an_operators_malloc_arena_max_stands() -> None:
    assert limit_malloc_arenas(environ={"MALLOC_ARENA_MAX": "4"}) is False


def test_a_cap_below_one_arena_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        limit_malloc_arenas(0)


# glibc's mallinfo2: blocks now served by mmap (hblks). A 4 MB block freed raises the
# dynamic threshold to 4 MB, so a 512 KB block after it comes from the heap, unless the
# threshold was fixed first.
_MMAP = textwrap.dedent(
    """
    import ctypes, sys
    from lookup_knowledge.adapters.cli.memory import fix_mmap_threshold
    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info
    if sys.argv[1] == "fixed":
        assert fix_mmap_threshold()
    big = bytearray(4 << 20)
    del big
    before = libc.mallinfo2().hblks
    held = [bytearray(512 << 10) for _ in range(4)]
    print(libc.mallinfo2().hblks - before)
    """
)


def _mmapped_blocks(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _MMAP, mode], capture_output=True, text=True, env=env, check=True
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(not GLIBC, reason="glibc's mmap threshold")
def test_a_fixed_mmap_threshold_keeps_serving_batch_sized_blocks_by_mmap() -> None:
    assert _mmapped_blocks("dynamic") == 0  # the threshold rose past 512 KB
    assert _mmapped_blocks("fixed") == 4


def test_an_operators_mmap_threshold_stands() -> None:
    assert fix_mmap_threshold(environ={"MALLOC_MMAP_THRESHOLD_": "65536"}) is False
    with pytest.raises(ValueError, match="threshold"):
        fix_mmap_threshold(0)


# Arrow's pool as pyarrow reports it, with the switch made before pyarrow is imported or
# after; the pool that allocated a fresh array's buffers is the one in use.
_ARROW = textwrap.dedent(
    """
    import sys
    from lookup_knowledge.adapters.cli.memory import use_system_arrow_pool
    if sys.argv[1] == "after":
        import pyarrow
    if sys.argv[1] == "ingest":
        from lookup_knowledge.adapters.cli.memory import tune_for_ingest
        tune_for_ingest()
    elif sys.argv[1] != "never":
        assert use_system_arrow_pool()
    import pyarrow
    before = pyarrow.system_memory_pool().bytes_allocated()
    held = pyarrow.array(range(100_000), type=pyarrow.int64())
    grew = pyarrow.system_memory_pool().bytes_allocated() - before
    print(pyarrow.default_memory_pool().backend_name, grew >= 800_000)
    """
)


def _arrow_pool(mode: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", _ARROW, mode], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout.strip()


def test_arrow_allocates_from_the_c_library_once_switched_before_or_after_its_import() -> None:
    if _arrow_pool("never").startswith("system"):
        pytest.skip("this pyarrow's own pool is the C library's already")
    assert _arrow_pool("before") == "system True"
    assert _arrow_pool("after") == "system True"
    assert _arrow_pool("ingest") == "system True"  # what the ingest command sets


def test_an_operators_arrow_pool_stands() -> None:
    environ = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
    assert use_system_arrow_pool(environ) is False
    assert environ == {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
