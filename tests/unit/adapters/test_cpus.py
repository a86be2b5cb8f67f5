"""The cores a process may use: its affinity capped by the smallest cgroup CPU quota
along its cgroup's path (v2 and v1), and no cap when the files say none or cannot be
read."""

from __future__ import annotations

from pathlib import Path

import pytest

from lookup_knowledge.adapters import cpus
from lookup_knowledge.adapters.cpus import cgroup_quota


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_a_v2_quota_counts_in_cores_rounded_up(tmp_path: Path) -> None:
    write(tmp_path / "app" / "cpu.max", "150000 100000")
    assert cgroup_quota("0::/app\n", tmp_path) == 2


def test_the_smallest_quota_along_the_v2_path_wins(tmp_path: Path) -> None:
    write(tmp_path / "pod" / "cpu.max", "100000 100000")
    write(tmp_path / "pod" / "app" / "cpu.max", "400000 100000")
    assert cgroup_quota("0::/pod/app\n", tmp_path) == 1


def test_max_means_no_v2_quota(tmp_path: Path) -> None:
    write(tmp_path / "app" / "cpu.max", "max 100000")
    assert cgroup_quota("0::/app\n", tmp_path) is None


def test_a_container_sees_its_own_quota_at_the_mount_root(tmp_path: Path) -> None:
    # The membership names the host's path; inside the container only the root exists.
    write(tmp_path / "cpu.max", "50000 100000")
    assert cgroup_quota("0::/kubepods/burstable/pod1/abc\n", tmp_path) == 1


def test_a_v1_quota_is_read_from_the_cpu_controller(tmp_path: Path) -> None:
    write(tmp_path / "cpu,cpuacct" / "docker" / "cpu.cfs_quota_us", "300000")
    write(tmp_path / "cpu,cpuacct" / "docker" / "cpu.cfs_period_us", "100000")
    membership = "4:memory:/docker\n3:cpu,cpuacct:/docker\n0::/\n"
    assert cgroup_quota(membership, tmp_path) == 3


def test_minus_one_means_no_v1_quota(tmp_path: Path) -> None:
    write(tmp_path / "cpu" / "cpu.cfs_quota_us", "-1")
    write(tmp_path / "cpu" / "cpu.cfs_period_us", "100000")
    assert cgroup_quota("1:cpu:/\n", tmp_path) is None


@pytest.mark.parametrize(
    "content", ["", "garbage", "100000", "abc 100000", "100000 0", "0 100000", "1 2 3"]
)
def test_a_malformed_quota_counts_as_none(tmp_path: Path, content: str) -> None:
    write(tmp_path / "cpu.max", content)
    assert cgroup_quota("0::/\n", tmp_path) is None


def test_no_cgroup_files_mean_no_quota(tmp_path: Path) -> None:
    assert cgroup_quota("0::/app\nnot a line\n", tmp_path) is None
    assert cgroup_quota("", tmp_path) is None


def test_the_usable_cores_are_the_affinity_capped_by_the_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(cpus, "quota_cores", lambda: 2)
    assert cpus.usable_cores() == 2
    monkeypatch.setattr(cpus, "quota_cores", lambda: 16)
    assert cpus.usable_cores() == 8
    monkeypatch.setattr(cpus, "quota_cores", lambda: None)
    assert cpus.usable_cores() == 8


def test_an_unreadable_membership_means_no_quota(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cpus, "PROC_CGROUP", tmp_path / "missing")
    cpus.quota_cores.cache_clear()
    try:
        assert cpus.quota_cores() is None
    finally:
        cpus.quota_cores.cache_clear()


@pytest.mark.parametrize("mount", ["cpu", "cpuacct,cpu"])
def test_a_v1_cpu_controller_is_found_under_the_name_it_is_mounted_at(
    tmp_path: Path, mount: str
) -> None:
    write(tmp_path / mount / "cpu.cfs_quota_us", "200000")
    write(tmp_path / mount / "cpu.cfs_period_us", "100000")
    write(tmp_path / "cpuacct" / "cpuacct.usage", "0")
    assert cgroup_quota("3:cpu,cpuacct:/\n", tmp_path) == 2


def test_a_cgroup_folder_this_process_may_not_read_means_no_quota(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    membership = tmp_path / "cgroup"
    membership.write_text("3:cpu,cpuacct:/\n")
    monkeypatch.setattr(cpus, "PROC_CGROUP", membership)
    monkeypatch.setattr(cpus, "CGROUP_ROOT", tmp_path / "root")

    def denied(self: Path, *args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "stat", denied)
    monkeypatch.setattr(Path, "iterdir", denied)
    cpus.quota_cores.cache_clear()
    try:
        assert cpus.quota_cores() is None
        assert cpus.usable_cores() >= 1
    finally:
        cpus.quota_cores.cache_clear()
