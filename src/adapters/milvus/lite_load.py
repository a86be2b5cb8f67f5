"""Loading a Milvus Lite collection whose index files may be half written or damaged.

Milvus Lite keeps one index file ("sidecar") per segment and field beside its data and
writes it in place, not through a temporary file: on ``load`` it reads the file if it
exists and builds (and writes) it otherwise. Two things follow.

- Lite's background builder may be writing a sidecar when a load reads it; the load
  fails ("read error in ...idx", or "File is too small") and a later attempt finds the
  file whole. So a failed load of that kind is retried.
- A process stopped while writing one (kill -9, power loss) leaves it short for good:
  every later load fails the same way, and no lookup could be answered again. A sidecar
  is derived data (Lite rebuilds it from the segment's vectors when it is missing), so
  when the retries run out, the damaged file named in the error is removed, if it lies
  inside this Lite folder, and the load tried again; a warning says so.

Lite's servicer and pymilvus log each failed load themselves, traceback included, before
the error reaches us; those records are dropped while a load is handled here (the error
the caller finally raises says what failed, and tracebacks are for ``--debug``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS

logger = logging.getLogger(__name__)

# The loggers that report a failed load on their own before the store sees the error.
_LOAD_LOGGERS = ("milvus_lite.adapter.grpc.servicer", "pymilvus.decorators")
_SIDECAR = re.compile(r"read error in (\S+?\.idx)\b")


def half_written(error: BaseException) -> bool:
    """A Lite load that met an index file being written, or left short by a crash."""
    text = str(error)
    return "read error" in text or "File is too small" in text


class _HalfWrittenLoadNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        load = "LoadCollection" in text or "load_collection" in text
        return not (load and half_written(Exception(text)))


@contextlib.contextmanager
def quiet_half_written_loads() -> Iterator[None]:
    noise = _HalfWrittenLoadNoise()
    loggers = [logging.getLogger(name) for name in _LOAD_LOGGERS]
    for each in loggers:
        each.addFilter(noise)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(noise)


def damaged_sidecar(error: BaseException, lite_path: str | None) -> Path | None:
    """The index file a failed load names, if it is an index file of this Lite folder."""
    if lite_path is None:
        return None
    match = _SIDECAR.search(str(error))
    if match is None:
        return None
    root = Path(lite_path).resolve()
    path = Path(match.group(1)).resolve()
    if not path.is_relative_to(root) or path.parent.name != "indexes" or not path.is_file():
        return None
    return path


def load_lite(
    client: Any,
    name: str,
    *,
    timeout_s: float,
    lite_path: str | None,
    release_first: bool = False,
    attempts: int = 20,
    pause_s: float = 0.25,
) -> None:
    """``load_collection`` with the retry and the repair above; raises the driver's
    error when the load fails otherwise, or still fails after the repair."""
    repaired: set[Path] = set()
    with quiet_half_written_loads():
        attempt = 0
        while True:
            attempt += 1
            if release_first:
                client.release_collection(name, timeout=timeout_s)
            try:
                client.load_collection(name, timeout=timeout_s)
                return
            except DRIVER_ERRORS as error:
                if not half_written(error):
                    raise
                if attempt < attempts:
                    time.sleep(pause_s)
                    continue
                damaged = damaged_sidecar(error, lite_path)
                if damaged is None or damaged in repaired:
                    raise
                logger.warning(
                    "Milvus Lite index file %s is damaged (a process stopped while writing "
                    "it?): removed it; Lite rebuilds it from the collection's data",
                    damaged,
                )
                damaged.unlink(missing_ok=True)
                repaired.add(damaged)
                attempt = attempts - 1  # one more load; a second damaged file gets its own


__all__ = ["damaged_sidecar", "half_written", "load_lite", "quiet_half_written_loads"]
