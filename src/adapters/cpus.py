"""How many cores this process can use: its CPU affinity, capped by its cgroup's CPU quota.

A container limited to one CPU by a quota (Kubernetes' ``limits.cpu``, ``docker --cpus``)
still sees every core of the host in its affinity. Threads sized by the affinity then
spend the quota several times as fast, and the kernel stops the whole process for the
rest of each period (CFS throttling): the latency of every request in it jumps. So the
threads the embedder and the dense scan start are sized by the quota too.

The quota is read once per process (``/proc/self/cgroup`` and the cgroup files, v2's
``cpu.max`` or v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, the smallest along the
cgroup's path); the affinity on every call (``taskset`` can change it at any time).
Anything unreadable or malformed counts as no quota: the affinity alone, as before.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def usable_cores() -> int:
    """The cores of the process' affinity, at most the cgroup quota rounded up (>= 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    quota = quota_cores()
    return max(1, min(cores, quota) if quota is not None else cores)


@cache
def quota_cores() -> int | None:
    """The cgroup CPU quota of this process in cores, rounded up; None: none set, or not
    readable here."""
    try:
        return cgroup_quota(PROC_CGROUP.read_text(encoding="utf-8", errors="replace"), CGROUP_ROOT)
    except (OSError, ValueError):  # not Linux, no /proc, a folder this process may not read
        return None


def cgroup_quota(membership: str, root: Path) -> int | None:
    """The smallest CPU quota, in cores rounded up, along the cgroup paths that
    ``membership`` (the text of ``/proc/<pid>/cgroup``) names under ``root``."""
    limits: list[int] = []
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        relative = path.strip().lstrip("/")
        if not controllers:  # v2: one unified hierarchy
            limits += _along(root, relative, _v2_limit)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own mount
            mount = _v1_mount(root, controllers)
            if mount is not None:
                limits += _along(mount, relative, _v1_limit)
    return min(limits) if limits else None


def _v1_mount(root: Path, controllers: str) -> Path | None:
    """The v1 folder the cpu controller is mounted at: named as the membership names
    its controllers, or any folder of ``root`` whose name lists ``cpu`` (``cpu``,
    ``cpu,cpuacct``, ``cpuacct,cpu``)."""
    named = root / controllers
    if named.is_dir():
        return named
    for mount in sorted(root.iterdir()) if root.is_dir() else ():
        if "cpu" in mount.name.split(",") and mount.is_dir():
            return mount
    return None


def _along(mount: Path, relative: str, read: Callable[[Path], int | None]) -> list[int]:
    """What ``read`` finds in the cgroup's folder and in each of its parents up to the
    mount (a container sees its own cgroup at the mount's root, whatever path the
    membership names)."""
    folders = [mount]
    current = mount
    for part in Path(relative).parts if relative else ():
        current = current / part
        folders.append(current)
    found = [read(folder) for folder in folders]
    return [limit for limit in found if limit is not None]


def _v2_limit(folder: Path) -> int | None:
    fields = _read(folder / "cpu.max").split()  # "max 100000": no quota
    return _cores(fields[0], fields[1]) if len(fields) == 2 else None


def _v1_limit(folder: Path) -> int | None:
    return _cores(_read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us"))


def _cores(quota: str, period: str) -> int | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    if q <= 0 or p <= 0:  # -1: no quota (v1)
        return None
    return max(1, math.ceil(q / p))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return ""
