"""How ``scripts/test`` spreads the suite over pytest-xdist workers (``-n auto --dist
loadgroup``, ``tests/conftest.py`` picks this scheduler): a test file is one unit of work, run whole on one worker, and the tests
marked ``xdist_group(name)`` are one unit wherever their files are.

A file whole: many modules build an app, a corpus or a server once in a module-scoped
fixture; split over two workers, each would build it (and a worker alternating between
two files' tests would build them again each time). The groups: what cannot run twice
at once on one machine, such as the PyPI ``milvus`` server (its embedded etcd always
takes port 2380), runs on one worker, once (``tests/contract``'s ``pypi_milvus_uri``).
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadGroupScheduling

PYPI_MILVUS = pytest.param(
    "milvus-pypi-2.3",
    marks=[pytest.mark.milvus_server, pytest.mark.xdist_group("milvus-server")],
)
"""A backend parameter's PyPI ``milvus`` server case (``pypi_milvus_uri``): every such
case, in any file, runs on the one worker that starts that server."""


class FileOrGroupScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` (``xdist_group`` marks), with ``loadfile``'s units for the
    tests outside any group (plain ``loadgroup`` sends those one by one)."""

    def _split_scope(self, nodeid: str) -> str:
        # With --dist loadgroup a worker reports a grouped test as "<nodeid>@<group>";
        # an "@" inside a parameter id comes before the closing "]".
        if nodeid.rfind("@") > nodeid.rfind("]"):
            return nodeid.rsplit("@", 1)[-1]
        return nodeid.split("::", 1)[0]
