"""The hostile-input suite: fixtures for its two audit backends (its summary line is
``summary.py``, a plugin that ``tests/conftest.py`` registers).

Run it alone with ``pytest tests/e2e/hostile``; PostgreSQL cases need
``TEST_DATABASE_URL`` (or Docker), as everywhere in the suite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.hostile.support import Backend
from tests.support.postgres import POSTGRES, isolated_schema


@pytest.fixture(scope="module", params=["sqlite", POSTGRES])
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture(scope="module")
def audit_url(backend_kind: str) -> Iterator[str | None]:
    """None: the SQLite file under the data directory; else a private PostgreSQL schema."""
    if backend_kind == "sqlite":
        yield None
        return
    with isolated_schema("lk_hostile") as url:
        yield url.render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory, audit_url: str | None) -> Backend:
    return Backend(tmp_path_factory.mktemp("hostile-data"), audit_url)
