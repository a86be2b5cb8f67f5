"""The quality page (rates and latency over time as charts with axes and units, the top
documents) and the eval runs: each ``lookup-knowledge eval run`` recorded as
``eval-<run>-<configuration>`` sessions of eval traffic, with its HTML report linked
when ``eval run`` wrote it to ``<data dir>/eval/<run>.html`` (the default)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.http.console_charts import CALLS, MILLISECONDS, PERCENT, chart
from lookup_knowledge.adapters.http.console_context import console_of, render_page
from lookup_knowledge.adapters.http.rest import time_range
from lookup_knowledge.application.ports import InvocationFilter, SessionFilter, TimeRange
from lookup_knowledge.domain.errors import InvalidInputError, NotFoundError
from lookup_knowledge.domain.model import Traffic

BUCKETS = 12
EVAL_SESSIONS = 200
# run ids are ``%Y%m%dT%H%M%S-<hex6>`` (``new_run_id``); a configuration name follows.
_EVAL_SESSION = re.compile(r"^eval-(\d{8}T\d{6}-[0-9a-f]{6})-(.+)$", re.DOTALL)
_RUN_ID = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{6}$")
# The report is the eval harness's own page: inline style and an inline PNG, no script.
REPORT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; "
    "frame-ancestors 'none'; base-uri 'none'; sandbox"
)


def when(name: str, value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(
            f"{name} must be an ISO date or datetime, got {value[:40]!r}"
        ) from None


def quality(request: Request, since: str | None = None, until: str | None = None) -> Response:
    console = console_of(request)

    def build() -> str:
        span = time_range(when("since", since), when("until", until))
        buckets, width = _buckets(console.lookup_app, span)
        every = f"bars of {_duration(width)}" if buckets else ""
        overall = console.audit().quality_summary(span, 10)

        def series(pick: Any) -> list[tuple[datetime, float | None]]:
            return [(b0, pick(q)) for b0, q in buckets]

        charts = [
            chart(
                "No-evidence rate",
                series(lambda q: q.no_evidence_rate if q.count else None),
                PERCENT,
                every,
            ),
            chart(
                "Fallback rate",
                series(lambda q: q.fallback_rate if q.count else None),
                PERCENT,
                every,
            ),
            chart("p95 latency", series(lambda q: q.p95_duration_ms), MILLISECONDS, every),
            chart("Invocations", series(lambda q: float(q.count)), CALLS, every),
        ]
        return render_page(
            "quality.html",
            overall=overall,
            charts=charts if buckets else [],
            runs=eval_runs(console.lookup_app),
            form={"since": since or "", "until": until or ""},
            nav="quality",
        )

    return console.page(request, build)


def eval_runs(lookup_app: LookupApp) -> list[dict[str, Any]]:
    """The recorded eval runs, newest first, each with its configurations' sessions and
    its report's URL (None when there is no report in the data dir)."""
    sessions = lookup_app.audit.list_sessions(
        SessionFilter(id_contains="eval-", traffic=Traffic.EVAL, limit=EVAL_SESSIONS)
    ).items
    runs: dict[str, dict[str, Any]] = {}
    for s in sessions:
        found = _EVAL_SESSION.match(s.session_id)
        run_id, name = (found.group(1), found.group(2)) if found else (s.session_id, "")
        run = runs.setdefault(
            run_id,
            {"run_id": run_id, "configurations": [], "last": s.last_started_at, "calls": 0},
        )
        run["configurations"].append({"name": name or s.session_id, "session": s})
        run["calls"] += s.invocation_count
        run["last"] = max(run["last"], s.last_started_at)
    for run in runs.values():
        run["configurations"].sort(key=lambda c: c["name"])
        has_report = _report_path(lookup_app, run["run_id"]) is not None
        run["report"] = f"/eval/{run['run_id']}/report.html" if has_report else None
    return sorted(runs.values(), key=lambda r: r["last"], reverse=True)


def _report_path(lookup_app: LookupApp, run_id: str) -> Path | None:
    """``<data dir>/eval/<run id>.html`` when it is a file there (the id is checked
    against the run id format first: no path is made from anything else)."""
    if not _RUN_ID.fullmatch(run_id):
        return None
    folder = (Path(lookup_app.settings.data_dir) / "eval").resolve()
    path = (folder / f"{run_id}.html").resolve()
    if path.parent != folder or not path.is_file():
        return None
    return path


def eval_report(request: Request, run_id: str) -> Response:
    """The eval run's HTML report, as ``eval run`` wrote it, under a policy of its own
    (its inline style and chart; still no script)."""
    console = console_of(request)

    def build() -> Response:
        path = _report_path(console.lookup_app, run_id)
        if path is None:
            raise NotFoundError(f"no HTML report of eval run {run_id[:80]!r} in the data dir")
        return Response(
            path.read_text("utf-8"),
            media_type="text/html; charset=utf-8",
            headers={"content-security-policy": REPORT_CSP},
        )

    return console.page(request, build)


def _duration(width: timedelta) -> str:
    seconds = width.total_seconds()
    for size, name in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = seconds / size
            return (
                f"{n:.0f} {name}{'s' if round(n) != 1 else ''}" if n >= 10 else f"{n:.1f} {name}s"
            )
    return f"{seconds:.0f} s"


def _edge(lookup_app: LookupApp, span: TimeRange, newest: bool) -> Any:
    items = lookup_app.audit.list_invocations(
        InvocationFilter(time_range=span, limit=1, newest_first=newest)
    ).items
    return items[0] if items else None


def _buckets(
    lookup_app: LookupApp, span: TimeRange
) -> tuple[list[tuple[datetime, Any]], timedelta]:
    first, last = _edge(lookup_app, span, False), _edge(lookup_app, span, True)
    if first is None or last is None:
        return [], timedelta(0)
    start = span.started_from or first.started_at
    end = span.started_to or last.started_at + timedelta(microseconds=1)
    width = max((end - start) / BUCKETS, timedelta(seconds=1))
    out: list[tuple[datetime, Any]] = []
    at = start
    while at < end and len(out) < BUCKETS:
        # the last bucket ends at the end: 12 rounded widths may fall short of it
        upto = end if len(out) == BUCKETS - 1 else min(at + width, end)
        out.append((at, lookup_app.audit.quality_summary(TimeRange(at, upto), 1)))
        at = upto
    return out, width
