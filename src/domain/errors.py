"""The project's one error hierarchy. Every error carries a stable machine code.

Adapters translate driver errors into these (``raise SearchUnavailable(...) from e``), so
callers never see a driver's exception type.
"""

from __future__ import annotations

from lookup_knowledge.domain.redaction import mask_secrets


class LookupKnowledgeError(Exception):
    """Base of every error this package raises on purpose.

    The message is masked where it is made (``mask_secrets``): a password in a URL never
    reaches stderr, the tool JSON or the audit record, whoever formatted the message."""

    code = "lookup_knowledge_error"

    def __init__(self, message: str) -> None:
        message = mask_secrets(str(message))
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigurationError(LookupKnowledgeError):
    """A configuration value breaks a rule; names the key, the value and the rule."""

    code = "configuration_error"

    def __init__(self, key: str, value: object, rule: str) -> None:
        # "key=None" would read as a value (and "token=None" is masked as a secret).
        shown = f"{key} (not set)" if value is None else f"{key}={value!r}"
        super().__init__(f"invalid configuration {shown}: {rule}")
        self.key = key
        self.value = value
        self.rule = rule


class ExtraNotInstalled(ConfigurationError):
    """A feature needs an optional extra that is not installed; names the pip command that installs it.

    ``extra`` is the extra's name (``postgres``, ``mcp``, ``server``, ``eval``,
    ``frameworks``), ``feature`` what needed it, ``missing`` the module not found."""

    code = "extra_not_installed"

    def __init__(self, extra: str, feature: str, missing: str) -> None:
        command = f"pip install 'lookup-knowledge[{extra}]'"
        LookupKnowledgeError.__init__(
            self, f"{feature} needs the {extra!r} extra ({missing} is not installed): {command}"
        )
        self.key = "extra"
        self.value = extra
        self.rule = command
        self.extra = extra
        self.feature = feature
        self.missing = missing


class InvalidInputError(LookupKnowledgeError):
    """A caller passed input that cannot be processed (empty query, bad id, ...)."""

    code = "invalid_input"


class AccessDenied(LookupKnowledgeError):
    """The caller may not do this: name a principal its credential does not grant, or
    act on an audit session another principal owns."""

    code = "forbidden"


class SearchError(LookupKnowledgeError):
    """The knowledge search failed."""

    code = "search_error"


class SearchUnavailable(SearchError):
    """The search backend cannot be reached (down, closed, or the collection missing)."""

    code = "search_unavailable"


class SearchStoreInUse(SearchUnavailable):
    """An embedded store (a Milvus Lite file) is held by another process."""

    code = "search_store_in_use"


class SearchTimeout(SearchError):
    """A search call ran out of time (milvus.timeout-s)."""

    code = "search_timeout"


class SearchBadRequest(SearchError):
    """The backend refused the request as malformed (a filter, a field, a size)."""

    code = "search_bad_request"


class UnsupportedSearchMode(SearchError):
    """The search backend lacks a capability (BM25, hybrid, grouping) the request needs."""

    code = "unsupported_search_mode"


class SchemaMismatch(SearchError):
    """An existing collection does not match what this configuration expects."""

    code = "schema_mismatch"


class EmbeddingError(LookupKnowledgeError):
    """The embedder failed (an API that refused or did not answer, a bad vector)."""

    code = "embedding_error"


class IngestError(LookupKnowledgeError):
    """Documents could not be read or written to the knowledge store."""

    code = "ingest_error"


class IngestConflict(IngestError):
    """An ingest would replace documents that another ingest source owns; nothing was
    written. Choose another source name (or doc_id), or ingest from the owning source."""

    code = "ingest_conflict"

    def __init__(self, message: str, conflicts: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        #: (doc_id, owning source) pairs.
        self.conflicts = conflicts


class AuditError(LookupKnowledgeError):
    """The audit store failed (a storage error, records still pending in the journal)."""

    code = "audit_error"


class AuditUnavailable(AuditError):
    """The audit database cannot be reached; records are kept in the journal meanwhile."""

    code = "audit_unavailable"


class AuditNotRecorded(AuditUnavailable):
    """A lookup's record was not committed where it must be before the lookup returns
    (``audit.durability=database``): the lookup is not answered."""

    code = "audit_not_recorded"


class JudgeError(LookupKnowledgeError):
    """An optional claim judge (NLI / LLM over HTTP) could not give an opinion."""

    code = "judge_error"


class RerankerError(LookupKnowledgeError):
    """The optional reranker (a cross-encoder served over HTTP) gave no usable scores.
    The lookup is answered without it: this error is traced, never returned."""

    code = "reranker_error"


class NotFoundError(LookupKnowledgeError):
    """An invocation id (or other named record) that the store does not hold."""

    code = "not_found"


class InternalError(LookupKnowledgeError):
    """An unexpected failure inside an adapter; reported, never raised into the agent."""

    code = "internal_error"
