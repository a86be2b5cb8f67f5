"""Eval and replay traffic is kept apart from production traffic in the
audit store (the ``traffic`` column); ``audit stats`` and ``audit list`` count production
only by default. Real pipeline (in-memory search, hashing embedder), real eval harness
and replay, SQLite and PostgreSQL audit stores, and the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.evaluation.beir import load_beir
from lookup_knowledge.application.evaluation import EvalConfiguration, ReplaySelection
from lookup_knowledge.application.ports import InvocationFilter, TimeRange
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.model import Traffic
from tests.integration.test_eval_e2e import write_collection
from tests.support.postgres import POSTGRES, isolated_schema

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", POSTGRES])
def audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'audit.db'}"
        return
    with isolated_schema("lk_traffic") as url:
        yield url.render_as_string(hide_password=False)


@pytest.fixture
def app(tmp_path: Path, audit_url: str) -> Iterator[LookupApp]:
    overrides = {
        "data-dir": str(tmp_path / "data"),
        "search.backend": "memory",
        "embedder.provider": "hashing",
        "rag.min-relevance": 0.0,
        "audit.database-url": audit_url,
    }
    with create_app(overrides=overrides) as lookup_app:
        yield lookup_app


def test_eval_and_replay_are_not_counted_as_production(
    app: LookupApp, tmp_path: Path, audit_url: str
) -> None:
    beir = load_beir(write_collection(tmp_path / "beir"))
    config = app.settings.to_lookup_config()
    report = app.eval_runner().execute(beir.dataset, [EvalConfiguration("base", config)])
    [eval_run] = report.configurations
    evals = len(beir.dataset.queries)
    assert evals >= 10

    for i in range(3):
        app.lookup(f"volcano lava question {i}", session_id="agent", step_id=str(i))
    replay = app.replayer().execute(ReplaySelection(session_id="agent"), config)
    assert len(replay.queries) == 3
    assert app.flush(timeout_s=30)

    everything = TimeRange()
    production = app.audit.quality_summary(everything)
    assert production.count == 3  # the agent's calls only, not the eval's or the replay's
    assert app.audit.quality_summary(everything, traffic=Traffic.EVAL).count == evals
    assert app.audit.quality_summary(everything, traffic=Traffic.REPLAY).count == 3
    assert app.audit.quality_summary(everything, traffic=None).count == evals + 6
    listed = app.audit.list_invocations(InvocationFilter(limit=500))
    assert len(app.audit.list_invocations(InvocationFilter(limit=500, traffic="all")).items) == (
        evals + 6
    )
    assert {i.session_id for i in listed.items} == {"agent"}
    assert {i.traffic for i in listed.items} == {"production"}
    # A session is still readable whole by its id (that is how eval and replay read back).
    eval_session = app.audit.list_invocations(
        InvocationFilter(session_id=eval_run.session_id, limit=500)
    )
    assert len(eval_session.items) == evals
    assert {i.traffic for i in eval_session.items} == {"eval"}
    # Replay by time range replays the agents' calls, never earlier replays or evals.
    again = app.replayer().execute(
        ReplaySelection(time_range=TimeRange(started_from=production_start(app))), config
    )
    assert len(again.queries) == 3

    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env.update(
        LOOKUP_KNOWLEDGE_DATA_DIR=str(tmp_path / "data"),
        LOOKUP_KNOWLEDGE_AUDIT__DATABASE_URL=audit_url,
        LOOKUP_KNOWLEDGE_SEARCH__BACKEND="memory",
        LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER="hashing",
    )
    app.close()  # one Milvus-free process at a time on the data dir

    def cli(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [CLI, *args, "--json"], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        data: dict[str, object] = json.loads(done.stdout)
        return data

    assert cli("audit", "stats")["count"] == 3
    assert cli("audit", "stats", "--traffic", "eval")["count"] == evals
    assert cli("audit", "stats", "--traffic", "all")["count"] == evals + 9
    items = cli("audit", "list", "--limit", "500")["items"]
    assert isinstance(items, list)
    assert len(items) == 3
    session_items = cli("audit", "list", "--session", eval_run.session_id, "--limit", "500")
    assert isinstance(session_items["items"], list)
    assert len(session_items["items"]) == evals


def production_start(app: LookupApp) -> object:
    [first, *_] = app.audit.list_invocations(InvocationFilter(session_id="agent")).items
    return first.started_at


def test_traffic_filter_rejects_what_is_not_a_kind() -> None:
    with pytest.raises(InvalidInputError):
        InvocationFilter(traffic="everything")  # type: ignore[arg-type]
    assert InvocationFilter().traffic_kind() is Traffic.PRODUCTION
    assert InvocationFilter(session_id="s").traffic_kind() is None
    assert InvocationFilter(traffic="all").traffic_kind() is None
    assert InvocationFilter(session_id="s", traffic=Traffic.EVAL).traffic_kind() is Traffic.EVAL
