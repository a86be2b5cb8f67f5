"""The hostile-input suite's summary line: ``hostile-input suite: N cases, P passed``.

``tests/conftest.py`` registers it as a plugin; it is not hooks of
``tests/e2e/hostile/conftest.py``: under pytest-xdist the controller process, which
prints the terminal summary, collects no tests and so never loads that folder's conftest.
The controller does see every worker's test reports, and this plugin counts those; run
serially, the one process sees them all the same.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

_HERE = Path(__file__).parent.resolve()


class HostileSummary:
    def __init__(self, rootpath: Path) -> None:
        self._rootpath = rootpath
        self._outcomes: Counter[str] = Counter()

    def _is_hostile(self, report: pytest.TestReport) -> bool:
        # fspath is relative to the rootdir, on the controller as on a worker.
        return (self._rootpath / report.fspath).resolve().is_relative_to(_HERE)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self._is_hostile(report):
            return
        # "???": pytest-xdist's report of a case whose worker crashed under it.
        if report.when in ("call", "???") or (
            report.when == "setup" and report.outcome != "passed"
        ):
            if hasattr(report, "wasxfail"):
                self._outcomes["xfailed" if report.skipped else "xpassed"] += 1
            else:
                self._outcomes[report.outcome] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self._outcomes:
            return
        cases = sum(self._outcomes.values())
        parts = ", ".join(f"{n} {k}" for k, n in sorted(self._outcomes.items()) if k != "passed")
        terminalreporter.write_line(
            f"hostile-input suite: {cases} cases, {self._outcomes['passed']} passed"
            + (f" ({parts})" if parts else "")
        )
