"""The Python API a backend embeds: ``create_app(...)`` -> ``LookupApp``.

    from lookup_knowledge import create_app

    with create_app() as app:                      # embedded defaults under ./.lookup-knowledge
        app.ingest(["docs/"])
        result = app.lookup("how do I fail over the database?", session_id="chat-42")
        report = app.verify_citations("chat-42", ["database/failover.md#chunk-3"])

``lookup`` is thread-safe; ``alookup`` runs it on a bounded worker pool so an asyncio host
(FastAPI, agent frameworks) never blocks its event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, Unpack

from lookup_knowledge.adapters.api_requests import (
    IngestFields,
    IngestPaths,
    IngestRequest,
    LookupFields,
    LookupRequest,
    ingest_request,
    lookup_request,
)
from lookup_knowledge.adapters.call_gate import CallGate
from lookup_knowledge.adapters.config import Settings, load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.adapters.warm_up import warm_up
from lookup_knowledge.application.health import Health
from lookup_knowledge.application.ingest import IngestProgress, IngestReport
from lookup_knowledge.application.lookup import LookupKnowledge, LookupResult
from lookup_knowledge.application.lookup.query import check_id
from lookup_knowledge.application.ports import (
    AuditQueries,
    CitationReport,
    DocumentSource,
    ToolInvocationRecorder,
    check_session_id,
    normalise_cited,
)
from lookup_knowledge.application.ports.trail import AuditTrail
from lookup_knowledge.application.session_owner import CallerScope, SessionOwners
from lookup_knowledge.application.tool import anthropic_tool_schema, openai_tool_schema
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.errors import AccessDenied

if TYPE_CHECKING:
    from lookup_knowledge.application.answer_check import CheckAnswer
    from lookup_knowledge.application.evaluation import Replay, RunEval
    from lookup_knowledge.application.ports import (
        AnswerCheck,
        AnswerCheckStore,
        AnswerFormat,
        CurrentChunkText,
    )

_T = TypeVar("_T")
_P = ParamSpec("_P")
_LOG = logging.getLogger(__name__)


class LookupApp:
    """One configured lookup-knowledge instance. Close it (or use ``with``) when done."""

    def __init__(
        self,
        container: Container,
        lookup: LookupKnowledge | None = None,
        *,
        max_async_workers: int = 8,
    ) -> None:
        self._container = container
        self._settings: Settings = container.settings()
        self._lock = threading.Lock()
        self._gate = CallGate("LookupApp")
        # None: built by the first lookup (``create_app(eager=False)``).
        self._lookup = lookup
        self._lookup_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            max_workers=max_async_workers, thread_name_prefix="lookup-knowledge"
        )
        self._owners: SessionOwners | None = None

    # ------------------------------------------------------------------ properties

    @property
    def session_owners(self) -> SessionOwners:
        """Who each audit session belongs to (the servers check it for agent callers)."""
        with self._lock:
            if self._owners is None:
                self._owners = SessionOwners(self.audit)
            return self._owners

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def audit(self) -> AuditQueries:
        """Audit queries (sessions, evidence shown, quality summaries)."""
        queries: AuditQueries = self._container.audit_queries()
        return queries

    @property
    def recorder(self) -> ToolInvocationRecorder:
        recorder: ToolInvocationRecorder = self._container.recorder()
        return recorder

    @staticmethod
    def openai_tool(api: Literal["chat", "responses"] = "chat") -> dict[str, Any]:
        return openai_tool_schema(api)

    @staticmethod
    def anthropic_tool() -> dict[str, Any]:
        return anthropic_tool_schema()

    # ------------------------------------------------------------------ lookup

    def lookup_result(
        self, query: str | LookupRequest, **fields: Unpack[LookupFields]
    ) -> LookupResult:
        """The typed result (``.to_tool_json()`` is what the agent receives) of a
        ``LookupRequest``, passed whole or as the query and its fields."""
        request = lookup_request(query, fields)
        options = request.options()
        with self._gate.call():
            if request.owned_session:
                check_id("session_id", request.session_id, required=True)
                if not self.session_owners.claim(request.session_id, request.principal):
                    raise AccessDenied(
                        "this session id belongs to another principal; use a session id of your own"
                    )
            return self._use_case().execute(
                request.query,
                session_id=request.session_id,
                step_id=request.step_id,
                options=options,
            )

    def lookup(self, query: str | LookupRequest, **fields: Unpack[LookupFields]) -> dict[str, Any]:
        """Run ``lookup_knowledge(query)`` and return the tool JSON (a dict)."""
        return self.lookup_result(query, **fields).to_tool_json()

    def _use_case(self) -> LookupKnowledge:
        lookup = self._lookup
        if lookup is None:
            with self._lookup_lock:  # the container's singletons are not thread-safe
                if self._lookup is None:
                    self._lookup = self._container.lookup()
                lookup = self._lookup
        return lookup

    async def alookup_result(
        self, query: str | LookupRequest, **fields: Unpack[LookupFields]
    ) -> LookupResult:
        """``lookup_result`` for asyncio hosts: runs on the app's worker pool."""
        return await self._off_loop(self.lookup_result, lookup_request(query, fields))

    async def alookup(
        self, query: str | LookupRequest, **fields: Unpack[LookupFields]
    ) -> dict[str, Any]:
        """``lookup`` for asyncio hosts: runs on the app's worker pool, not the loop."""
        return await self._off_loop(self.lookup, lookup_request(query, fields))

    # ------------------------------------------------------------------ ingest, audit

    def ingest(
        self, paths: IngestPaths | IngestRequest, **fields: Unpack[IngestFields]
    ) -> IngestReport:
        """Run an ``IngestRequest`` (passed whole or as the paths and its fields)."""
        request = ingest_request(paths, fields)
        source: DocumentSource = self._container.document_source(
            request.paths,
            root=request.root,
            category=request.category,
            doc_id=request.doc_id,
            source_name=request.source_name,
            access=request.access(),
        )
        return self.ingest_source(
            source, sync=request.sync, progress=request.progress, dry_run=request.dry_run
        )

    def ingest_source(
        self,
        source: DocumentSource,
        *,
        sync: bool = False,
        progress: Callable[[IngestProgress], None] | None = None,
        dry_run: bool = False,
    ) -> IngestReport:
        """Ingest documents a host already holds (any ``DocumentSource``, for example
        ``StaticDocumentSource``); ``sync`` deletes what the source no longer yields
        within its scope, of the documents it owns."""
        with self._gate.call():
            report: IngestReport = self._container.ingest().execute(
                source, sync=sync, progress=progress, dry_run=dry_run
            )
        return report

    def verify_citations(
        self,
        session_id: str,
        document_ids: Sequence[str],
        *,
        groups: Sequence[str] | None = None,
        scope: CallerScope | None = None,
    ) -> CitationReport:
        """EvidenceGuard: which cited document_ids were really returned in the session;
        under access control, which of the others the session's principal could not see
        (``forbidden``). ``groups``: the principal's groups, checked against the digest
        recorded (without them a group-restricted document counts as not visible).

        ``scope``: the call is an agent's, authenticated as ``scope.principal``: a
        session that is not its own answers like an empty one (every id unknown), and
        no id is ``forbidden`` (to the agent it is unknown, like a made-up one)."""
        with self._gate.call():
            if scope is not None and not self._owns(session_id, scope):
                cited = normalise_cited(document_ids)
                return CitationReport(session_id=session_id, valid=(), unknown=cited)
            report: CitationReport = self._container.verify_citations().execute(
                session_id, document_ids, groups=groups, reveal_forbidden=scope is None
            )
        return report

    def _owns(self, session_id: str, scope: CallerScope) -> bool:
        check_session_id(session_id)
        return self.session_owners.owns(session_id, scope.principal)

    async def aingest(
        self, paths: IngestPaths | IngestRequest, **fields: Unpack[IngestFields]
    ) -> IngestReport:
        """``ingest`` for asyncio hosts, on the app's worker pool (``progress`` is called
        from that worker thread)."""
        return await self._off_loop(self.ingest, ingest_request(paths, fields))

    async def averify_citations(
        self,
        session_id: str,
        document_ids: Sequence[str],
        *,
        groups: Sequence[str] | None = None,
        scope: CallerScope | None = None,
    ) -> CitationReport:
        """``verify_citations`` for asyncio hosts, on the app's worker pool."""
        return await self._off_loop(
            self.verify_citations, session_id, document_ids, groups=groups, scope=scope
        )

    def warm(self, *, background: bool = False) -> None:
        """Open what the first lookup would open, so it pays neither: the embedding model
        (in a background thread) and, meanwhile, an embedded search store (the Milvus Lite
        file, its collection loaded and the dense and full-text indexes beside it opened:
        ~0.4 s together on the sample corpus, 1.5-1.6 s at 100,000 chunks; a Milvus server is
        connected by the first lookup as before). ``background``: return at once and warm in a daemon
        thread (a server at startup; a lookup that comes first waits only for what it
        needs; ``close`` waits for it). What cannot be opened is logged (INFO) and left
        to the lookup, or ``health()``, to report; a closed app refuses, like every call."""
        self._gate.enter()
        if background:
            thread = threading.Thread(
                target=self._warm_then_leave, name="lookup-knowledge-warm", daemon=True
            )
            try:
                thread.start()
            except BaseException:  # no thread: nothing in flight for close to wait for
                self._gate.leave()
                raise
            return
        self._warm_then_leave()

    def _warm_then_leave(self) -> None:
        try:
            warm_up(self._container, embedded_search=self._settings.embedded_search)
        finally:
            self._gate.leave()

    def health(self, timeout_s: float | None = None) -> Health:
        """Live check of the knowledge search, the audit store and the journal (a readiness
        probe): ``ok`` is false when lookups cannot be answered or recorded now.
        ``timeout_s``: each check's bound; one that has not answered by then is reported
        failing (``/readyz`` passes ``server.readiness-timeout-s``)."""
        with self._gate.call():
            health: Health = self._container.health().execute(timeout_s)
        return health

    async def ahealth(self, timeout_s: float | None = None) -> Health:
        return await self._off_loop(self.health, timeout_s)

    def evidence_text(
        self, document_ids: Sequence[str], *, tenant: str | None = None
    ) -> dict[str, str]:
        """The knowledge base's current text of these evidence keys (``document_id``s) in
        ``tenant``'s documents (the principal tenant of the invocation that showed them;
        None: the documents without a tenant); keys it no longer holds are absent. What
        the agent was shown may be a cut of it: the audit store keeps the hash of the
        shown text to compare against."""
        keys = list(dict.fromkeys(document_ids))
        if not keys:
            return {}
        with self._gate.call():
            chunk_text: CurrentChunkText = self._container.chunk_text()
            return chunk_text.fetch_content(keys, tenant)

    def check_answer(
        self,
        session_id: str,
        answer: str | Sequence[Any] | Mapping[str, Any] | Any,
        *,
        step_id: str | None = None,
        answer_format: AnswerFormat | str | None = None,
        persist: bool = True,
        scope: CallerScope | None = None,
    ) -> AnswerCheck:
        """Check an answer's claims against the text the session was shown; record the
        verdicts. ``answer``: prose with bracketed document ids, or a Claude response (its
        content blocks, the message dict or SDK ``Message``) with ``search_result_location``
        citations; the format follows from the type unless ``answer_format`` says.

        ``scope``: an agent's call (see ``verify_citations``): a session not its own is
        checked as an empty one and the check is not recorded; reasons name only its own
        sessions; no ``forbidden``."""
        from lookup_knowledge.application.ports import AnswerFormat  # the checker, on first use

        fmt = answer_format or (AnswerFormat.TEXT if isinstance(answer, str) else "anthropic")
        with self._gate.call():
            view = None
            if scope is not None:
                from lookup_knowledge.application.answer_check import OwnedView

                owners = self.session_owners
                view = OwnedView(
                    owns_session=self._owns(session_id, scope),
                    owns=lambda other: owners.owns(other, scope.principal),
                )
            check: AnswerCheck = self._container.check_answer().execute(
                session_id, answer, step_id=step_id, answer_format=fmt, persist=persist, view=view
            )
        return check

    def check_answer_of_calls(
        self,
        answer: str | Sequence[Any] | Mapping[str, Any] | Any,
        *,
        session_prefix: str,
        new_session_id: str,
        principal: Principal | None,
        scope: CallerScope | None = None,
        answer_format: AnswerFormat | str | None = None,
    ) -> AnswerCheck:
        """Check an answer from a client that keeps no session (each of its calls is its
        own audit session, named ``session_prefix`` + an id that sorts by time): the
        sessions are found from the ids the answer cites, among ``principal``'s own
        sessions of that prefix only (``CheckAnswer.sessions_cited``); the check runs on
        their evidence together and is recorded in the one that showed most of the
        cited ids (the newest on a tie). No cited id shown in one: the check runs on the
        new, empty session ``new_session_id``. Another principal's session is never
        read, named or written to."""
        from lookup_knowledge.application.ports import AnswerFormat  # the checker, on first use

        fmt = answer_format or (AnswerFormat.TEXT if isinstance(answer, str) else "anthropic")
        with self._gate.call():
            owners = self.session_owners
            use_case: CheckAnswer = self._container.check_answer()
            sessions = use_case.sessions_cited(
                answer,
                session_prefix,
                lambda session: owners.owns(session, principal),
                answer_format=fmt,
            )
            session_id = sessions[0] if sessions else new_session_id
            view = None
            if scope is not None:
                from lookup_knowledge.application.answer_check import OwnedView

                view = OwnedView(
                    owns_session=bool(sessions),
                    owns=lambda other: owners.owns(other, scope.principal),
                )
            check: AnswerCheck = use_case.execute(
                session_id, answer, answer_format=fmt, view=view, linked_sessions=sessions
            )
        return check

    async def acheck_answer_of_calls(
        self,
        answer: str | Sequence[Any] | Mapping[str, Any] | Any,
        *,
        session_prefix: str,
        new_session_id: str,
        principal: Principal | None,
        scope: CallerScope | None = None,
    ) -> AnswerCheck:
        """``check_answer_of_calls`` for asyncio hosts: runs on the app's worker pool."""
        return await self._off_loop(
            self.check_answer_of_calls,
            answer,
            session_prefix=session_prefix,
            new_session_id=new_session_id,
            principal=principal,
            scope=scope,
        )

    async def acheck_answer(
        self,
        session_id: str,
        answer: str | Sequence[Any] | Mapping[str, Any] | Any,
        *,
        step_id: str | None = None,
        answer_format: AnswerFormat | str | None = None,
        persist: bool = True,
        scope: CallerScope | None = None,
    ) -> AnswerCheck:
        """``check_answer`` for asyncio hosts: runs on the app's worker pool."""
        return await self._off_loop(
            self.check_answer,
            session_id,
            answer,
            step_id=step_id,
            answer_format=answer_format,
            persist=persist,
            scope=scope,
        )

    @property
    def audit_trail(self) -> AuditTrail:
        """The tamper-evident trail: verify-log, evidence bundles, prune."""
        trail: AuditTrail = self._container.audit_trail()
        return trail

    @property
    def answer_checks(self) -> AnswerCheckStore:
        """Recorded answer checks (by session and time)."""
        store: AnswerCheckStore = self._container.answer_checks()
        return store

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """Wait until journalled audit records (of a session) are in the database."""
        return self.recorder.flush(session_id, timeout_s)

    # ------------------------------------------------------------------ eval, replay

    def eval_runner(self, measures: tuple[str, ...] | None = None) -> RunEval:
        """The Eval harness on this app's knowledge store, lookup and audit store
        (``measures``: default ``MEASURES``; imported here: a lookup never needs it)."""
        from lookup_knowledge.application.evaluation import MEASURES

        self._gate.check_open()
        runner: RunEval = self._container.run_eval(measures=measures or MEASURES)
        return runner

    def replayer(self) -> Replay:
        """Replay of logged queries under another configuration, on this app."""
        self._gate.check_open()
        replay: Replay = self._container.replay()
        return replay

    def seal_knowledge_store(self) -> None:
        """Make everything written to the knowledge store searchable at full speed
        (Milvus: flush). Ingest seals what it writes; a collection left by an
        interrupted run may not be sealed."""
        with self._gate.call():
            self._container.store().seal()

    # ------------------------------------------------------------------ lifecycle

    def close(self, timeout_s: float = 60.0) -> None:
        """Refuse new calls, wait for those in flight, then close every resource."""
        if not self._gate.close(timeout_s):
            return
        self._executor.shutdown(wait=True)
        self._container.shutdown_resources()

    async def aclose(self, timeout_s: float = 60.0) -> None:
        """``close`` without blocking the event loop (waits for calls in flight)."""
        await asyncio.to_thread(self.close, timeout_s)

    async def __aenter__(self) -> LookupApp:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _off_loop(
        self, call: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> Awaitable[_T]:
        """``call(*args, **kwargs)`` on the app's worker pool: every ``a*`` method."""
        self._gate.check_open()
        return asyncio.get_running_loop().run_in_executor(
            self._executor, partial(call, *args, **kwargs)
        )

    def __enter__(self) -> LookupApp:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def create_app(
    settings: Settings | None = None,
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, object] | None = None,
    container: Container | None = None,
    max_async_workers: int = 8,
    eager: bool = True,
) -> LookupApp:
    """Build an app from settings (or load them: defaults < file < env < ``overrides``).

    Pass ``container`` (with providers overridden) to swap adapters in tests or hosts.
    ``eager`` (the default) starts what a lookup needs now, so a bad configuration or
    an unreachable store fails here; ``eager=False`` leaves the knowledge search and the
    embedder to the first call that needs them (a tool that only reads the audit store
    never loads the Milvus client or the model runtime).
    """
    if settings is None:
        settings = load_settings(config_file=config_file, overrides=overrides).settings
    if container is None:
        container = Container(settings=settings)
    else:
        container.settings.override(settings)
    if not eager:
        return LookupApp(container, max_async_workers=max_async_workers)
    try:
        # Resolving the use case starts exactly the resources the configuration selects
        # (init_resources() would also start those of unselected Selector branches).
        lookup: LookupKnowledge = container.lookup()
    except BaseException:
        container.shutdown_resources()
        raise
    return LookupApp(container, lookup, max_async_workers=max_async_workers)
