"""How ``scripts/test`` spreads the suite over pytest-xdist workers (``-n auto --dist
loadgroup``, ``tests/conftest.py`` picks this scheduler): a test file is one unit of work,
run whole on one worker, and the tests of a group are one unit wherever their files are.

A file whole: many modules build an app, a corpus or a server once in a module-scoped
fixture; split over two workers, each would build it (and a worker alternating between
two files' tests would build them again each time). The groups: what cannot run twice
at once on one machine, such as the PyPI ``milvus`` server (its embedded etcd always
takes port 2380), runs on one worker, once (``tests/contract``'s ``pypi_milvus_uri``).

A group is told by the test's parameter id (``GROUPED_PARAMETERS``), not only by its
``xdist_group`` mark: xdist tells the scheduler of a mark by appending ``@<group>`` to the
node id on the worker, and with pytest 9.2 that no longer takes (pytest-xdist issue 1386:
node ids are structured, the suffix is silently lost), so the server's cases of two files
ran on two workers and the second waited for the first worker's whole session.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadGroupScheduling

PYPI_MILVUS_GROUP = "milvus-server"

PYPI_MILVUS = pytest.param(
    "milvus-pypi-2.3",
    marks=[pytest.mark.milvus_server, pytest.mark.xdist_group(PYPI_MILVUS_GROUP)],
)
"""A backend parameter's PyPI ``milvus`` server case (``pypi_milvus_uri``): every such
case, in any file, runs on the one worker that starts that server."""

GROUPED_PARAMETERS: dict[str, str] = {"milvus-pypi-2.3": PYPI_MILVUS_GROUP}
"""Parameter ids whose tests form one unit of work, in any file: id → group name."""


def parameter_group(nodeid: str) -> str | None:
    """The group of a test whose parameter ids hold one of ``GROUPED_PARAMETERS``
    (``test_x[milvus-pypi-2.3]``, ``test_x[milvus-pypi-2.3-dense]``, ``test_x[a-milvus-pypi-2.3]``),
    or None."""
    start = nodeid.find("[")  # a test's name has none; its parameter values may
    if start < 0 or not nodeid.endswith("]"):
        return None
    ids = nodeid[start + 1 : -1]
    for parameter, group in GROUPED_PARAMETERS.items():
        if f"-{parameter}-" in f"-{ids}-":  # a whole id among the "-"-joined ones
            return group
    return None


class FileOrGroupScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` (``xdist_group`` marks), with ``loadfile``'s units for the
    tests outside any group (plain ``loadgroup`` sends those one by one)."""

    def _split_scope(self, nodeid: str) -> str:
        # Where xdist's suffix takes, a worker reports a grouped test as
        # "<nodeid>@<group>"; an "@" inside a parameter id comes before the closing "]".
        if nodeid.rfind("@") > nodeid.rfind("]"):
            return nodeid.rsplit("@", 1)[-1]
        return parameter_group(nodeid) or nodeid.split("::", 1)[0]
