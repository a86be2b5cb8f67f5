"""What every hostile-input case checks, and how it runs the product.

The promise under test: every lookup that was answered has exactly one audit row, and
that row holds exactly the evidence ids the agent received; nothing prints a traceback
without ``--debug``; nothing hangs (every process and request is bounded); exit codes
are docs/cli.md's (0 done, 1 the work failed, 2 bad usage, input or configuration).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.application.ports import AuditQueries, InvocationFilter

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
#: A CLI process that takes longer than this has hung (Milvus Lite and the audit store
#: start in a few seconds even on a loaded machine).
PROCESS_TIMEOUT_S = 120.0
#: Settings every case shares: the hashing embedder needs no model files and starts at
#: once; hostile input is about the adapters around it, not about embeddings.
FAST = {"embedder.provider": "hashing"}


def session_id(label: str) -> str:
    """A session of its own per case, so audit rows are counted per case."""
    return f"hostile-{label}-{uuid.uuid4().hex[:10]}"


def assert_no_traceback(stderr: str) -> None:
    assert "Traceback (most recent call last)" not in stderr, stderr
    assert "internal error" not in stderr, stderr


def assert_one_line(stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"


def assert_usage_error(done: subprocess.CompletedProcess[str]) -> None:
    """Exit 2 with typer's own message (``Error: ...``), never an internal error."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert_no_traceback(done.stderr)
    assert "Error: " in done.stderr, done.stderr


def evidence_ids(payload: Mapping[str, Any]) -> list[str]:
    """The document_ids an agent received in the tool JSON, in order."""
    return [str(b["document_id"]) for b in payload.get("evidenceBlocks", [])]


@dataclass
class Backend:
    """One data directory and audit database; ``settings`` for the API, ``env`` for
    the CLI, the same store either way."""

    data_dir: Path
    audit_url: str | None
    extra: dict[str, str] = field(default_factory=dict)

    def overrides(self) -> dict[str, object]:
        values: dict[str, object] = {"data-dir": str(self.data_dir), **FAST, **self.extra}
        if self.audit_url:
            values["audit.database-url"] = self.audit_url
        return values

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
        for key, value in self.overrides().items():
            env["LOOKUP_KNOWLEDGE_" + key.upper().replace(".", "__").replace("-", "_")] = str(value)
        return env

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = PROCESS_TIMEOUT_S,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return run_cli(
            *args, env={**self.env(), **(env or {})}, stdin=stdin, timeout=timeout, cwd=cwd
        )

    @contextmanager
    def audit(self) -> Iterator[AuditQueries]:
        """The audit store's queries, without Milvus or the embedder."""
        container = Container(settings=load_settings(overrides=self.overrides()).settings)
        try:
            queries: AuditQueries = container.audit_queries()
            yield queries
        finally:
            container.shutdown_resources()


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = PROCESS_TIMEOUT_S,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``lookup-knowledge ARGS``; a process that outlives ``timeout`` fails the case."""
    return subprocess.run(
        [CLI, *args],
        capture_output=True,
        text=True,
        errors="backslashreplace",
        input=stdin,
        env=dict(env) if env is not None else None,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


def assert_recorded_once(
    audit: AuditQueries, session: str, invocation_id: str, ids: Sequence[str]
) -> None:
    """The session holds exactly one row, this invocation, with exactly ``ids``."""
    page = audit.list_invocations(InvocationFilter(session_id=session, limit=10))
    assert [i.id for i in page.items] == [invocation_id], page.items
    detail = audit.get_invocation(invocation_id)
    assert [e.document_id for e in detail.evidence] == list(ids)


def assert_not_recorded(audit: AuditQueries, session: str) -> None:
    page = audit.list_invocations(InvocationFilter(session_id=session, limit=10))
    assert page.items == (), page.items


def tool_json(stdout: str) -> dict[str, Any]:
    data = json.loads(stdout)
    assert isinstance(data, dict)
    return data
