"""A secret never leaves in clear (messages, repr, dumps), through the
real adapters: the OpenAI-compatible embedder against a closed port, the SQLite and
PostgreSQL audit stores, the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.config import Settings, load_settings
from lookup_knowledge.application.ports import InvocationFilter
from lookup_knowledge.domain.errors import EmbeddingError, SearchUnavailable
from lookup_knowledge.domain.redaction import mask_secrets
from tests.support.postgres import POSTGRES, isolated_schema
from tests.support.tcp_proxy import closed_port

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
PASSWORD = "hunter2-not-for-logs"


def _base_url() -> str:
    return f"http://embed-user:{PASSWORD}@127.0.0.1:{closed_port()}/v1"


@pytest.fixture(params=["sqlite", POSTGRES])
def audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'audit.db'}"
        return
    with isolated_schema("lk_secrets") as url:
        yield url.render_as_string(hide_password=False)


def _openai_overrides(tmp_path: Path, audit_url: str) -> dict[str, object]:
    return {
        "data-dir": str(tmp_path / "data"),
        "search.backend": "memory",
        "embedder.provider": "openai",
        "embedder.openai.base-url": _base_url(),
        "embedder.openai.api-key": "sk-never-shown",
        "embedder.openai.max-retries": 0,
        "embedder.openai.timeout-s": 2,
        "audit.database-url": audit_url,
    }


def test_password_in_base_url_never_in_message_or_audit(tmp_path: Path, audit_url: str) -> None:
    with create_app(overrides=_openai_overrides(tmp_path, audit_url)) as app:
        assert PASSWORD not in repr(app.settings)
        tool_json = app.lookup("failover steps", session_id="secrets", step_id="1")
        assert tool_json["found"] is False
        assert "embed" in tool_json["message"]
        assert PASSWORD not in json.dumps(tool_json)
        assert app.flush("secrets")
        [summary] = app.audit.list_invocations(InvocationFilter(session_id="secrets")).items
        detail = app.audit.get_invocation(summary.id)
    assert detail.error_message
    assert "****" in detail.error_message
    assert PASSWORD not in detail.error_message


def test_password_in_base_url_never_on_cli_stderr(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env.update(
        LOOKUP_KNOWLEDGE_DATA_DIR=str(tmp_path / "data"),
        LOOKUP_KNOWLEDGE_SEARCH__BACKEND="memory",
        LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER="openai",
        LOOKUP_KNOWLEDGE_EMBEDDER__OPENAI__BASE_URL=_base_url(),
        LOOKUP_KNOWLEDGE_EMBEDDER__OPENAI__API_KEY="sk-never-shown",
        LOOKUP_KNOWLEDGE_EMBEDDER__OPENAI__MAX_RETRIES="0",
    )
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [CLI, "lookup", "failover steps", *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert PASSWORD not in done.stderr + done.stdout
        assert "****@127.0.0.1" in done.stderr + done.stdout


def test_dumps_and_repr_mask_the_postgres_password() -> None:
    settings = Settings(
        audit={"database-url": f"postgresql+psycopg://app:{PASSWORD}@db.internal/audit"},
        embedder={"openai": {"base-url": f"https://u:{PASSWORD}@proxy/v1", "api-key": "sk-x"}},
        milvus={"token": "root:Milvus"},
    )
    for shown in (
        settings.model_dump_json(),
        json.dumps(settings.model_dump(mode="json")),
        repr(settings),
        str(settings),
        repr(settings.audit),
    ):
        assert PASSWORD not in shown
        assert "sk-x" not in shown
        assert "root:Milvus" not in shown
    # The adapters still get the real values.
    assert PASSWORD in settings.audit_database_url
    assert settings.openai_api_key == "sk-x"


def test_configuration_errors_mask_the_password() -> None:
    with pytest.raises(Exception) as raised:
        load_settings(
            overrides={"audit.database-url": f"postgresql://app:{PASSWORD}@db:notaport/x"},
            environ={},
        )
    assert PASSWORD not in str(raised.value)


def test_every_project_error_message_is_masked() -> None:
    for error in (
        EmbeddingError(f"request to https://k:{PASSWORD}@h/v1 failed"),
        SearchUnavailable(f"libpq said: password={PASSWORD} host=db"),
    ):
        assert PASSWORD not in str(error)
        assert PASSWORD not in error.message
        assert PASSWORD not in repr(error.args)
    assert mask_secrets("see http://a:b@c/ and ?api_key=abc&x=1") == (
        "see http://a:****@c/ and ?api_key=****&x=1"
    )
    assert mask_secrets("no secret at all: a=1") == "no secret at all: a=1"
