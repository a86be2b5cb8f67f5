"""The hostile-input suite: fixtures for its two audit backends, and its summary line.

Run it alone with ``pytest tests/e2e/hostile``; PostgreSQL cases need
``TEST_DATABASE_URL`` (or Docker), as everywhere in the suite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.hostile.support import Backend
from tests.support.postgres import POSTGRES, isolated_schema

_HERE = Path(__file__).parent
_outcomes: Counter[str] = Counter()


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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not Path(report.fspath).resolve().is_relative_to(_HERE):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            _outcomes["xfailed" if report.skipped else "xpassed"] += 1
        else:
            _outcomes[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _outcomes:
        return
    cases = sum(_outcomes.values())
    parts = ", ".join(f"{n} {k}" for k, n in sorted(_outcomes.items()) if k != "passed")
    terminalreporter.write_line(
        f"hostile-input suite: {cases} cases, {_outcomes['passed']} passed"
        + (f" ({parts})" if parts else "")
    )
