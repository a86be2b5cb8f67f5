"""How the suite's tests are spread over pytest-xdist workers (tests/support/xdist.py):
the PyPI Milvus server's cases of every file are one unit of work, whatever pytest does
with xdist's ``@group`` node-id suffix; every other test goes with its file."""

from __future__ import annotations

import pytest

from tests.support.xdist import PYPI_MILVUS_GROUP, FileOrGroupScheduling


def scope_of(nodeid: str) -> str:
    # The unit of work is a function of the node id alone; no worker or config needed.
    scheduler = object.__new__(FileOrGroupScheduling)
    return scheduler._split_scope(nodeid)


@pytest.mark.parametrize(
    "nodeid",
    [
        "tests/contract/test_access_contract.py::test_each_tenant_gets_only_its_own_chunks"
        "[milvus-pypi-2.3-dns resolver-plain]",
        "tests/contract/test_access_contract.py::test_ingest_keeps_each_tenants_copy_of_a_path"
        "[milvus-pypi-2.3]",
        "tests/contract/test_search_port_contract.py::test_top_k_bounds_the_hits[milvus-pypi-2.3]",
        "tests/contract/test_search_port_contract.py::test_hostile_filter_values_never_widen_the_search"
        "[milvus-pypi-2.3-'ops\" or \"']",
        "tests/contract/test_search_port_contract.py::test_x[dense-milvus-pypi-2.3]",
        "tests/contract/test_search_port_contract.py::test_x[dense-milvus-pypi-2.3-3]",
    ],
)
def test_the_pypi_server_cases_of_every_file_are_one_unit_without_the_group_suffix(
    nodeid: str,
) -> None:
    assert scope_of(nodeid) == PYPI_MILVUS_GROUP


def test_the_pypi_server_cases_are_one_unit_with_the_group_suffix_too() -> None:
    nodeid = "tests/contract/test_search_port_contract.py::test_top_k_bounds_the_hits"
    assert scope_of(f"{nodeid}[milvus-pypi-2.3]@{PYPI_MILVUS_GROUP}") == PYPI_MILVUS_GROUP


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        (
            "tests/contract/test_search_port_contract.py::test_top_k_bounds_the_hits[milvus-lite]",
            "tests/contract/test_search_port_contract.py",
        ),
        ("tests/unit/test_doc_links.py::test_links", "tests/unit/test_doc_links.py"),
        ("tests/a.py::test_x[xmilvus-pypi-2.3]", "tests/a.py"),
        ("tests/a.py::test_x[milvus-pypi-2.30]", "tests/a.py"),
        ("tests/a.py::test_x[user@example.org]", "tests/a.py"),
        ("tests/a.py::Case::test_x[value with [milvus-pypi-2.3 inside]", "tests/a.py"),
    ],
)
def test_every_other_test_goes_with_its_file(nodeid: str, unit: str) -> None:
    assert scope_of(nodeid) == unit
