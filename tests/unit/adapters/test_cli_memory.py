"""The CLI caps glibc's malloc arenas before its threads allocate; an operator's
``MALLOC_ARENA_MAX`` stands; elsewhere than glibc nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lookup_knowledge.adapters.cli.memory import limit_malloc_arenas

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
