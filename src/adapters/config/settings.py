"""The one validated settings model: every key the product reads, its default and its rule.

User-facing keys are Spring-style dotted kebab names (``rag.retrieve-k``): a field's key
is its name with ``_`` -> ``-`` under its section's key. ``load_settings`` layers the
sources (defaults < config file < environment < overrides) and validates the result with
this model. ``Settings(...)`` built in code validates exactly what it is given: nothing is
read from the environment behind the caller's back.

Rules that span several keys come from the domain objects (``RetrievalSettings`` for
return-n <= retrieve-k, ...) or are checked here, and raise ``ConfigurationError`` naming
the key, so one message says what to fix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lookup_knowledge.adapters.config import files, mapping
from lookup_knowledge.adapters.config.fields import (
    HttpUrl,
    Keywords,
    Number,
    OptionalHttpUrl,
    OptionalPath,
    OptionalSecret,
    OptionalText,
    OptionalWhole,
    Whole,
    absolute_path,
    kebab,
    split_keywords,
)
from lookup_knowledge.adapters.config.files import check_data_dir
from lookup_knowledge.adapters.config.network import is_loopback
from lookup_knowledge.application.lookup import LookupConfig, PayloadProfile
from lookup_knowledge.application.ports import JudgeMode
from lookup_knowledge.domain.access import AccessMode, Principal
from lookup_knowledge.domain.citation_marks import DEFAULT_CITATION_PATTERN
from lookup_knowledge.domain.errors import ConfigurationError, InvalidInputError
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.redaction import mask_url
from lookup_knowledge.domain.relevance import RelevanceCalibration
from lookup_knowledge.domain.rerank import RerankWeights
from lookup_knowledge.domain.reranking import RerankerSettings
from lookup_knowledge.domain.settings import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    MAX_CHUNKS_PER_DOCUMENT_BOUND,
    MAX_RETRIEVE_K,
    MAX_RETURN_N,
    RetrievalSettings,
)

if TYPE_CHECKING:
    from lookup_knowledge.application.answer_check import AnswerCheckSettings

DEFAULT_DATA_DIR = "./.lookup-knowledge"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SearchBackend(StrEnum):
    MILVUS = "milvus"
    MEMORY = "memory"


class AuditDurability(StrEnum):
    FSYNC = "fsync"
    PROCESS = "process"
    DATABASE = "database"


class EmbedderProvider(StrEnum):
    ONNX_MINILM = "onnx-minilm"
    OPENAI = "openai"
    HASHING = "hashing"
    NONE = "none"


def _shown(value: object) -> object:
    return mask_url(value) if isinstance(value, str) and "://" in value else value


class _Masked(BaseModel):
    """``repr`` and every dump mask the password of any URL value (``audit.database-url``,
    ``embedder.openai.base-url``, ``milvus.uri``); the properties the adapters read keep
    the real value. Secret keys are ``SecretStr`` and mask themselves."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            yield name, _shown(value)

    @model_serializer(mode="wrap")
    def _masked_dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            return {key: _shown(value) for key, value in data.items()}
        return data


class _Section(_Masked):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=kebab,
        validate_by_name=True,
        validate_by_alias=True,
        allow_inf_nan=False,
    )


# --- rag.* ------------------------------------------------------------------------------


class HybridSettings(_Section):
    rrf_k: Whole = Field(
        default=60,
        ge=0,
        description="RRF constant k for hybrid fusion: each list adds 1/(k + rank).",
    )
    bm25_only_when_unreadable: bool = Field(
        default=True,
        description=(
            "Answer a hybrid lookup from BM25 alone when the embedder cannot read the "
            "query's language (the bundled MiniLM reads English: a question fewer than half "
            "of whose words are English, a Chinese character counting as half a word); its dense list would rank documents by script, not topic."
        ),
    )


class AnalysisLanguage(StrEnum):
    ENGLISH = "english"
    NONE = "none"


class TextAnalysisSettings(_Section):
    language: AnalysisLanguage = Field(
        default=AnalysisLanguage.ENGLISH,
        description=(
            "BM25 text analysis of documents and queries: english (Snowball stemmer, "
            "stop words) or none; Chinese is segmented by jieba either way. A change "
            "needs a re-ingest."
        ),
    )
    stemming: bool = Field(default=True, description="Stem words (Snowball) for BM25.")
    stop_words: bool = Field(
        default=True, description="Drop English (Lucene) and Chinese stop words for BM25."
    )
    chinese_query_glosses: int = Field(
        default=3,
        ge=0,
        le=5,
        description=(
            "English senses (CC-CEDICT) added to a BM25 query per Chinese word of it, so "
            "a question asked in Chinese finds English documents; 0 = off. Query side "
            "only: no re-ingest."
        ),
    )


_MIN_RELEVANCE_FIT = (
    "the 3rd percentile of the best relevance of the pooled answerable train/dev "
    "questions in this mode; rag.min-relevance, when set, overrides it."
)


class RelevanceSettings(_Section):
    min_dense: Number = Field(
        default=RetrievalSettings().min_relevance_dense,
        ge=0,
        le=1,
        description="Dense mode: relevance the best hit must reach to find evidence; "
        + _MIN_RELEVANCE_FIT,
    )
    min_sparse: Number = Field(
        default=RetrievalSettings().min_relevance_sparse,
        ge=0,
        le=1,
        description="Sparse mode: relevance the best hit must reach to find evidence; "
        + _MIN_RELEVANCE_FIT,
    )
    min_hybrid: Number = Field(
        default=RetrievalSettings().min_relevance_hybrid,
        ge=0,
        le=1,
        description="Hybrid mode: relevance the best hit must reach to find evidence; "
        + _MIN_RELEVANCE_FIT,
    )
    bm25_saturation: Number = Field(
        default=10.0,
        gt=0,
        description=(
            "Where the engine gives no BM25 statistics (a Milvus server): BM25 score s "
            "maps to relevance |s| / (|s| + saturation)."
        ),
    )
    min_share_of_best: Number = Field(
        default=RelevanceCalibration().min_share_of_best,
        ge=0,
        le=1,
        description=(
            "A block whose relevance is below this share of the best block's is not "
            "returned (no padding to reach return-n); 0 = off."
        ),
    )


_RERANK_DEFAULTS = RerankWeights()


class RerankWeightSettings(_Section):
    relevance: Number = Field(
        default=_RERANK_DEFAULTS.relevance,
        ge=0,
        description="Weight of the normalised search relevance in the final score.",
    )
    domain_match: Number = Field(
        default=_RERANK_DEFAULTS.domain_match,
        ge=0,
        description="Bonus when the chunk's category is one of the query's domains.",
    )
    entity_match: Number = Field(
        default=_RERANK_DEFAULTS.entity_match,
        ge=0,
        description="Bonus times the share of query entities found in the chunk.",
    )
    keyword_match: Number = Field(
        default=_RERANK_DEFAULTS.keyword_match,
        ge=0,
        description="Bonus times the share of query keywords found in the chunk.",
    )
    hint_alignment: Number = Field(
        default=_RERANK_DEFAULTS.hint_alignment,
        ge=0,
        description="Bonus when a query keyword or entity is in the title or breadcrumb.",
    )


def _default_source_type_weights() -> dict[str, float]:
    return {"runbook": 0.03, "faq": 0.02}


class RerankerProvider(StrEnum):
    NONE = "none"
    TEI = "tei"
    COHERE = "cohere"


_RERANKER_DEFAULTS = RerankerSettings()


class RerankSettings(_Section):
    enabled: bool = Field(
        default=True,
        description="Rule-based rerank; false ranks by search relevance alone.",
    )
    weights: RerankWeightSettings = Field(default_factory=RerankWeightSettings)
    source_type: dict[str, Number] = Field(
        default_factory=_default_source_type_weights,
        description="Bonus per document source type (negative values demote).",
    )
    provider: RerankerProvider = Field(
        default=RerankerProvider.NONE,
        description="Optional cross-encoder reranker over HTTP: none; tei: Text Embeddings "
        "Inference (POST {url}/rerank); cohere: the Cohere-compatible POST {url}/v2/rerank "
        "(vLLM, Infinity, Cohere). Nothing is downloaded: you run the server.",
    )
    url: OptionalHttpUrl = Field(
        default=None, description="The reranker server's base URL (required with a provider)."
    )
    model: OptionalText = Field(
        default=None,
        description="Model name sent to a cohere-compatible server (tei: traced).",
    )
    api_key: OptionalSecret = Field(
        default=None, description="API key (secret); unset falls back to RERANK_API_KEY."
    )
    timeout_s: Number = Field(
        default=10.0, gt=0, description="Timeout of one reranker call (then answered without)."
    )
    max_retries: Whole = Field(default=1, ge=0, description="Retries of a failed reranker call.")
    top_k: Whole = Field(
        default=_RERANKER_DEFAULTS.top_k,
        ge=1,
        description="Candidates (in search order) whose texts the reranker scores; the "
        "others are not returned when it answered.",
    )
    weight: Number = Field(
        default=_RERANKER_DEFAULTS.weight,
        ge=0,
        le=1,
        description="Share of the reranker in the pooled relevance (log-odds); 0 keeps the "
        "calibrated relevance, 1 trusts the reranker alone.",
    )
    logits: bool = Field(
        default=_RERANKER_DEFAULTS.logits,
        description="The server returns raw logits (tei: asked with raw_scores); a sigmoid "
        "turns them into [0, 1].",
    )

    @model_validator(mode="after")
    def _url_with_provider(self) -> RerankSettings:
        if self.provider is not RerankerProvider.NONE and self.url is None:
            raise ValueError(
                f"rag.rerank.url is required with rag.rerank.provider={self.provider.value}"
            )
        if self.provider is RerankerProvider.COHERE and not self.model:
            raise ValueError("rag.rerank.model is required with rag.rerank.provider=cohere")
        return self


class ContextSettings(_Section):
    char_budget: Whole = Field(
        default=4000, ge=1, description="Most characters in the packed context text."
    )
    min_excerpt_chars: Whole = Field(
        default=80,
        ge=1,
        description=(
            "Smallest excerpt worth shortening a block to, in the context pack and "
            "in the agent projection."
        ),
    )


class ProjectionSettings(_Section):
    max_blocks: Whole = Field(
        default=5, ge=1, description="Most evidence blocks the agent receives."
    )
    max_excerpt_chars: Whole = Field(
        default=1200, ge=1, description="Most characters of one block's excerpt."
    )
    max_total_chars: Whole = Field(
        default=6000, ge=1, description="Most characters of all excerpts together."
    )


class PayloadSettings(_Section):
    profile: PayloadProfile = Field(
        default=PayloadProfile.AGENT,
        description=(
            "agent: each excerpt once, compact traces, no id that is not a returned block; "
            "full: every trace in the tool JSON (debugging)."
        ),
    )


class QualitySettings(_Section):
    medium: Number = Field(
        default=0.4,
        ge=0,
        le=1,
        description="Best relevance at or above which the relevance level is medium.",
    )
    high: Number = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Best relevance at or above which the relevance level is high.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> QualitySettings:
        if self.medium > self.high:
            raise ConfigurationError(
                "rag.quality.medium", self.medium, f"must be <= rag.quality.high ({self.high})"
            )
        return self


class RagSettings(_Section):
    retrieve_k: OptionalWhole = Field(
        default=None,
        ge=1,
        le=MAX_RETRIEVE_K,
        description="Recall width asked of the search engine.",
    )
    return_n: OptionalWhole = Field(
        default=None,
        ge=1,
        le=MAX_RETURN_N,
        description="Most evidence blocks after post-processing; at most rag.retrieve-k.",
    )
    top_k: OptionalWhole = Field(
        default=None,
        ge=1,
        le=MAX_RETURN_N,
        description="Legacy: used for both widths only when neither of them is set.",
    )
    max_chunks_per_document: Whole = Field(
        default=DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
        ge=0,
        le=MAX_CHUNKS_PER_DOCUMENT_BOUND,
        description="Most blocks from one document (0 = no cap).",
    )
    min_relevance: Number | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "Calibrated relevance the best hit must reach for a lookup to find evidence "
            "(below it: no_evidence), in every mode; unset = the mode's own "
            "(rag.relevance.min-dense, min-sparse, min-hybrid)."
        ),
    )
    search_mode: SearchMode = Field(
        default=SearchMode.HYBRID,
        description=(
            "hybrid (RRF of dense and BM25; best on every eval, see benchmarks/README.md), "
            "dense or sparse (BM25). Milvus servers before 2.5 have no BM25: use dense."
        ),
    )
    engine_grouping: bool = Field(
        default=False,
        description="Let Milvus group hits per document instead of capping afterwards.",
    )
    late_materialisation: bool = Field(
        default=False,
        description=(
            "Fetch chunk text only for the blocks that are returned (a second round trip; "
            "measured no faster at 100k chunks, see benchmarks/README.md)."
        ),
    )
    hybrid: HybridSettings = Field(default_factory=HybridSettings)
    text_analysis: TextAnalysisSettings = Field(default_factory=TextAnalysisSettings)
    relevance: RelevanceSettings = Field(default_factory=RelevanceSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    projection: ProjectionSettings = Field(default_factory=ProjectionSettings)
    quality: QualitySettings = Field(default_factory=QualitySettings)
    payload: PayloadSettings = Field(default_factory=PayloadSettings)
    domains: dict[str, Keywords] = Field(
        default_factory=dict,
        description="Domain dictionary: category -> keywords (a list or comma-separated).",
    )
    domains_file: OptionalPath = Field(
        default=None,
        description=(
            "YAML file with more category -> keywords entries; a relative path set in "
            "the config file is relative to that file's folder."
        ),
    )

    @field_validator("domains")
    @classmethod
    def _named_categories(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for category in value:
            if not category.strip():
                raise ValueError("category names must not be blank")
        return value

    @field_validator("domains_file")
    @classmethod
    def _absolute_domains_file(cls, value: Path | None) -> Path | None:
        return None if value is None else absolute_path(value)

    @model_validator(mode="after")
    def _consistent_widths(self) -> RagSettings:
        self.retrieval_settings()  # raises ConfigurationError naming the key
        return self

    def retrieval_settings(self) -> RetrievalSettings:
        """The widths after the legacy ``rag.top-k`` fallback, validated by the domain."""
        return RetrievalSettings.resolve(
            retrieve_k=self.retrieve_k,
            return_n=self.return_n,
            top_k=self.top_k,
            max_chunks_per_document=self.max_chunks_per_document,
            min_relevance=self.min_relevance,
            min_relevance_dense=self.relevance.min_dense,
            min_relevance_sparse=self.relevance.min_sparse,
            min_relevance_hybrid=self.relevance.min_hybrid,
        )


# --- search, milvus ---------------------------------------------------------------------


class SearchSettings(_Section):
    backend: SearchBackend = Field(
        default=SearchBackend.MILVUS,
        description="milvus (Milvus Lite file or server) or memory (in-process, for tests).",
    )


_MILVUS_URI_RULE = "must be a local file path ending in .db or an http(s)://host:port URL"


class MilvusIndexSettings(_Section):
    type: str = Field(
        default="HNSW",
        pattern=r"^(HNSW|FLAT|AUTOINDEX|IVF_FLAT)$",
        description="Dense index of a new collection: HNSW, FLAT (exact), AUTOINDEX or IVF_FLAT.",
    )
    m: Whole = Field(default=16, ge=2, le=128, description="HNSW graph degree M (new collections).")
    ef_construction: Whole = Field(
        default=200, ge=8, le=4096, description="HNSW build depth efConstruction (new collections)."
    )


class MilvusSettings(_Section):
    uri: OptionalText = Field(
        default=None,
        description="Milvus Lite file (a path ending in .db) or a server's http(s)://host:port.",
    )
    token: OptionalSecret = Field(
        default=None, description="Milvus token, user:password or API key (secret)."
    )
    db_name: OptionalText = Field(default=None, description="Milvus database name.")
    collection: str = Field(
        default="knowledge", min_length=1, description="Collection holding the chunks."
    )
    timeout_s: Number = Field(default=10.0, gt=0, description="Timeout of one Milvus call.")
    index: MilvusIndexSettings = Field(default_factory=MilvusIndexSettings)
    search_ef: Whole = Field(
        default=256,
        ge=1,
        le=32768,
        description=(
            "HNSW search depth ef (at least the number of hits asked for). On a Milvus "
            "Lite file it matters only past 2,097,152 visible rows: below, the dense "
            "index beside the file answers exactly."
        ),
    )

    @field_validator("uri")
    @classmethod
    def _known_uri(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "://" in value:
            scheme, _, rest = value.partition("://")
            host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
            if scheme.lower() not in ("http", "https") or not host or host.startswith(":"):
                raise ValueError(_MILVUS_URI_RULE)
            return value
        if not value.endswith(".db"):
            raise ValueError(_MILVUS_URI_RULE)
        return str(absolute_path(Path(value)))


# --- embedder ---------------------------------------------------------------------------


class OpenAIEmbedderSettings(_Section):
    base_url: HttpUrl = Field(
        default="https://api.openai.com/v1",
        description="OpenAI-compatible embeddings API base URL.",
    )
    model: str = Field(
        default="text-embedding-3-small", min_length=1, description="Embedding model name."
    )
    api_key: OptionalSecret = Field(
        default=None, description="API key (secret); unset falls back to OPENAI_API_KEY."
    )
    dimension: OptionalWhole = Field(
        default=None, ge=1, description="Requested vector size (unset = the model's own)."
    )
    timeout_s: Number = Field(default=30.0, gt=0, description="Timeout of one API call.")
    max_retries: Whole = Field(default=3, ge=0, description="Retries of a failed call.")


class HashingEmbedderSettings(_Section):
    dimension: Whole = Field(default=384, ge=1, description="Vector size of the hashing embedder.")


class EmbedderSettings(_Section):
    provider: EmbedderProvider = Field(
        default=EmbedderProvider.ONNX_MINILM,
        description="onnx-minilm (bundled), openai, hashing (tests) or none (sparse only).",
    )
    batch_size: Whole = Field(default=32, ge=1, description="Texts embedded per call.")
    max_batch_tokens: Whole = Field(
        default=1024,
        ge=1,
        description="onnx-minilm: padded tokens per call (texts x the longest), which bounds "
        "the memory a call needs; a text over it is embedded alone.",
    )
    threads: Whole = Field(
        default=0,
        ge=0,
        description="onnx-minilm intra-op threads; 0: the usable cores less one (at least "
        "one), leaving a core to the search that follows an embed.",
    )
    openai: OpenAIEmbedderSettings = Field(default_factory=OpenAIEmbedderSettings)
    hashing: HashingEmbedderSettings = Field(default_factory=HashingEmbedderSettings)


# --- audit, ingest, log -----------------------------------------------------------------


class JudgeProvider(StrEnum):
    NONE = "none"
    OPENAI = "openai"
    TEI = "tei"


class ClaimJudgeSettings(_Section):
    provider: JudgeProvider = Field(
        default=JudgeProvider.NONE,
        description="none; openai: an OpenAI-compatible chat endpoint asked for an "
        "entailed/contradicted/neutral opinion per claim; tei: an NLI classifier served by "
        "Text Embeddings Inference (POST {base-url}/predict). It sees the claim and its "
        "aligned span (about 512 tokens).",
    )
    mode: JudgeMode = Field(
        default=JudgeMode.SIGNAL,
        description="signal: the opinion is recorded beside the verdict; veto: a "
        "contradicted or neutral opinion also turns a supported claim into "
        "contradicted or unsupported, with the judge's reason.",
    )
    base_url: HttpUrl = Field(
        default="http://127.0.0.1:8000/v1",
        description="Chat completions API base URL (openai), or the TEI server's (tei).",
    )
    model: str = Field(default="judge", min_length=1, description="Chat model name.")
    api_key: OptionalSecret = Field(
        default=None, description="API key (secret); unset falls back to OPENAI_API_KEY."
    )
    timeout_s: Number = Field(default=30.0, gt=0, description="Timeout of one judge call.")


class AnswerCheckConfig(_Section):
    min_coverage: Number = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of a claim's content words (stemmed) the cited text must contain.",
    )
    min_cosine: Number = Field(
        default=0.8,
        ge=0,
        le=1,
        description="With use-embedder: claim-to-block cosine that supports a claim whose "
        "coverage is at least min-coverage-with-cosine.",
    )
    min_coverage_with_cosine: Number = Field(
        default=0.3, ge=0, le=1, description="Coverage floor when the cosine supports a claim."
    )
    use_embedder: bool = Field(
        default=False, description="Also score claims by cosine with the configured embedder."
    )
    citation_pattern: str = Field(
        default=DEFAULT_CITATION_PATTERN,
        min_length=1,
        description="Regex of a citation in an answer; its first group lists document ids "
        "separated by , or ;.",
    )
    stemmer_language: str = Field(
        default="english", min_length=1, description="Snowball stemmer for lexical coverage."
    )
    judge: ClaimJudgeSettings = Field(default_factory=ClaimJudgeSettings)

    @field_validator("citation_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"must be a regular expression ({error})") from None
        return value


class AuditSettings(_Section):
    enabled: bool = Field(default=True, description="Record every lookup in the audit store.")
    database_url: OptionalText = Field(
        default=None,
        description="SQLAlchemy URL of the audit database (SQLite or PostgreSQL); password masked.",
    )
    journal_dir: OptionalPath = Field(
        default=None,
        description="Folder of the local audit journal: every record is written there "
        "before the lookup returns and moved into the database in the background; it "
        "also keeps records while the database is unreachable (audit.spool-dir, its "
        "old name, is still read).",
    )
    durability: AuditDurability = Field(
        default=AuditDurability.FSYNC,
        description="How durable a record is when the lookup returns: fsync (in the "
        "local journal, on disk: survives a crash of the machine), process (handed to "
        "the operating system, no fsync: survives the process being killed, not a power "
        "cut) or database (committed in the audit database; a lookup whose record "
        "cannot be committed is not answered: for replicas without a persistent disk).",
    )
    adopt_unbound_journals: bool = Field(
        default=False,
        description="Move journal records written before journals named their database "
        "(older versions) into this database; off: they are left and reported.",
    )
    auto_migrate: bool = Field(default=True, description="Upgrade the audit schema on start-up.")
    keep_shown_text: bool = Field(
        default=True,
        description="Keep the exact text each block showed the agent (false: only its hash; "
        "the answer checker then re-reads the block and compares hashes).",
    )
    check: AnswerCheckConfig = Field(default_factory=AnswerCheckConfig)
    # --- the tamper-evident trail (docs/audit.md) ---
    signing_key: OptionalPath = Field(
        default=None,
        description="Ed25519 private key (PEM) that signs the audit trail's checkpoints; "
        "created (0600) when first needed if missing. `audit public-key` prints its public key.",
    )
    checkpoint_every: Whole = Field(
        default=1000, ge=1, description="Sign a checkpoint of the audit trail every N records."
    )
    checkpoint_interval_s: Number = Field(
        default=60.0,
        gt=0,
        description="Sign a checkpoint at most this many seconds after a record not yet "
        "signed (one is also signed on flush and when the recorder closes).",
    )
    checkpoint_file: OptionalPath = Field(
        default=None,
        description="Also append each checkpoint as a JSON line to this file, for a "
        "witness outside the database ('-': standard output).",
    )

    @field_validator("database_url")
    @classmethod
    def _sqlalchemy_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(value)
        except (ArgumentError, ValueError):  # ValueError: e.g. a port that is not a number
            raise ValueError(
                "must be a SQLAlchemy database URL such as sqlite:////path/audit.db "
                "or postgresql+psycopg://user:password@host/db"
            ) from None
        return value

    @field_validator("journal_dir")
    @classmethod
    def _absolute_journal_dir(cls, value: Path | None) -> Path | None:
        return None if value is None else absolute_path(value)


class IngestSettings(_Section):
    chunk_size: Whole = Field(
        default=256,
        ge=32,
        le=8192,
        description=(
            "Most tokens per chunk (the embedder's tokenizer); never more than fits the "
            "embedder's window with the heading path."
        ),
    )
    chunk_overlap: Whole = Field(
        default=32, ge=0, description="Tokens shared by neighbouring chunks (< half a chunk)."
    )
    batch_size: Whole = Field(default=64, ge=1, description="Chunks written per batch.")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IngestSettings:
        if self.chunk_overlap >= self.chunk_size // 2:
            raise ConfigurationError(
                "ingest.chunk-overlap",
                self.chunk_overlap,
                f"must be < half of ingest.chunk-size ({self.chunk_size})",
            )
        return self


class AgentPrincipalSettings(_Section):
    """One agent bearer token's entry (``server.principals``, keyed by sha256 of the
    token): the principal its calls are made for, or ``trusted-host`` (a host allowed to
    name the principal of each call itself)."""

    tenant: str | None = Field(default=None, min_length=1, description="The principal's tenant.")
    user: str = Field(default="", description="The principal's user id (recorded).")
    groups: Keywords = Field(default_factory=list, description="The principal's groups.")
    trusted_host: bool = Field(
        default=False,
        description=(
            "The token belongs to a host that authenticates its own users and may name "
            "the principal of a call (REST body `principal`, MCP `_meta`); without it a "
            "principal in a request is refused (403)."
        ),
    )

    @model_validator(mode="after")
    def _valid_principal(self) -> AgentPrincipalSettings:
        if self.tenant is None and not self.trusted_host:
            raise ValueError("a token's entry needs a tenant (or trusted-host: true)")
        if self.tenant is None and (self.user or self.groups):
            raise ValueError("user and groups need a tenant")
        self.principal()
        return self

    def principal(self) -> Principal | None:
        if self.tenant is None:
            return None
        try:
            return Principal(self.tenant, self.user, frozenset(self.groups))
        except InvalidInputError as error:
            raise ValueError(error.message) from None


#: The name the entries had when only MCP read them (``mcp.principals``).
McpPrincipalSettings = AgentPrincipalSettings


def _check_digests(key: str, principals: Mapping[str, object]) -> None:
    for digest in principals:
        if not _SHA256_HEX.fullmatch(digest):
            raise ValueError(f"{key} keys must be sha256 hex digests, not {digest!r}")


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class AccessSettings(_Section):
    mode: AccessMode = Field(
        default=AccessMode.OFF,
        description=(
            "off: every lookup sees every document (single tenant); enforced: a lookup sees "
            "public documents and those of its principal's tenant and groups only."
        ),
    )


class McpSettings(_Section):
    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address `mcp --transport http` binds (loopback unless a token is set).",
    )
    port: Whole = Field(default=8765, ge=1, le=65535, description="Port of the MCP HTTP server.")
    token: OptionalSecret = Field(
        default=None,
        description="Bearer token MCP HTTP clients must send; required off loopback (secret).",
    )
    tenant: str | None = Field(
        default=None,
        description="Tenant of the principal MCP lookups are made for (stdio; HTTP with mcp.token).",
    )
    user: str | None = Field(default=None, description="User id of that principal (recorded).")
    groups: Keywords | None = Field(
        default=None, description="Groups of that principal (a list or comma-separated)."
    )
    principals: dict[str, AgentPrincipalSettings] = Field(
        default_factory=dict,
        description=(
            "Deprecated alias of server.principals (still read, merged into it): sha256 "
            "(hex) of a bearer token -> the principal its calls are for."
        ),
    )

    @model_validator(mode="after")
    def _valid_principals(self) -> McpSettings:
        _check_digests("mcp.principals", self.principals)
        self.principal()
        return self

    def principal(self) -> Principal | None:
        """The configured principal of stdio (and mcp.token) lookups, or None."""
        if self.tenant is None:
            if self.user or self.groups:
                raise ValueError("mcp.user and mcp.groups need mcp.tenant")
            return None
        try:
            return Principal(self.tenant, self.user or "", frozenset(self.groups or ()))
        except InvalidInputError as error:
            raise ValueError(error.message) from None

    def principals_by_token_hash(self) -> dict[str, Principal]:
        return {
            digest: principal
            for digest, p in self.principals.items()
            if (principal := p.principal()) is not None
        }


class LogSettings(_Section):
    level: str = Field(default="INFO", description="DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    json_: bool = Field(default=False, alias="json", description="One JSON object per log line.")

    @field_validator("level", mode="before")
    @classmethod
    def _known_level(cls, value: object) -> object:
        if isinstance(value, str):
            level = value.strip().upper()
            if level in LOG_LEVELS:
                return level
        raise ValueError("must be one of " + ", ".join(LOG_LEVELS))


# --- server.* ----------------------------------------------------------------------------


class ServerSettings(_Section):
    host: str = Field(
        default="127.0.0.1",
        description="Address `serve` binds; anything but loopback needs both tokens.",
    )
    port: Whole = Field(default=8787, ge=0, le=65535, description="TCP port of `serve`.")
    auditor_token: OptionalSecret = Field(
        default=None,
        description="Bearer token of the read-only auditor scope: console and audit reads (secret).",
    )
    agent_token: OptionalSecret = Field(
        default=None,
        description="Bearer token of the agent scope: lookup, verify, check-answer, /mcp (secret); under access.mode=enforced it must be listed in server.principals.",
    )
    cors_origins: OptionalText = Field(
        default=None,
        description="Origins allowed by CORS, comma-separated; unset: CORS off.",
    )
    max_request_bytes: Whole = Field(
        default=1_048_576, ge=1024, description="Largest request body accepted (bytes)."
    )
    principals: dict[str, AgentPrincipalSettings] = Field(
        default_factory=dict,
        description=(
            "Agent bearer tokens of REST (/v1) and MCP (/mcp, mcp --transport http): "
            "sha256 (hex) of a token -> {tenant, user, groups} its calls are made for, or "
            "{trusted-host: true} for a host that names the principal of each call."
        ),
    )
    allowed_hosts: OptionalText = Field(
        default=None,
        description="Host names `serve` answers to besides the loopback names and the "
        "bind address, comma-separated (*.example.com: any subdomain; *: any name); "
        "a request for another name gets 421 (DNS rebinding).",
    )
    behind_https: bool = Field(
        default=False,
        description="`serve` sits behind an HTTPS proxy: the console's session cookie "
        "is marked Secure.",
    )
    console_session_hours: Number = Field(
        default=12.0, gt=0, le=24 * 30, description="How long a console sign-in lasts."
    )
    readiness_timeout_s: Number = Field(
        default=1.5,
        gt=0,
        le=60,
        description="Longest each /readyz check (search, audit store, journal) may take; "
        "one that has not answered by then is reported failing.",
    )
    login_attempts_per_minute: Whole = Field(
        default=10,
        ge=1,
        description="Failed console sign-ins one client may make per minute; more get 429.",
    )

    @property
    def cors_origin_list(self) -> list[str]:
        origins = split_keywords(self.cors_origins or "")
        return [str(o) for o in origins] if isinstance(origins, list) else []

    @property
    def allowed_host_list(self) -> list[str]:
        hosts = split_keywords(self.allowed_hosts or "")
        return [str(h) for h in hosts] if isinstance(hosts, list) else []

    @model_validator(mode="after")
    def _tokens_off_loopback(self) -> ServerSettings:
        _check_digests("server.principals", self.principals)
        if not is_loopback(self.host) and (
            self.auditor_token is None or (self.agent_token is None and not self.principals)
        ):
            raise ConfigurationError(
                "server.host",
                self.host,
                "a bind other than loopback needs server.auditor-token and server.agent-token "
                "(or agent tokens in server.principals)",
            )
        if (
            self.auditor_token is not None
            and self.agent_token is not None
            and self.auditor_token.get_secret_value() == self.agent_token.get_secret_value()
        ):
            raise ConfigurationError(
                "server.agent-token", "***", "must differ from server.auditor-token"
            )
        return self


# --- the root ---------------------------------------------------------------------------


class Settings(_Masked, BaseSettings):
    """The effective configuration. Build it with ``load_settings`` to read the sources."""

    model_config = SettingsConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=kebab,
        validate_by_name=True,
        validate_by_alias=True,
        allow_inf_nan=False,
    )

    data_dir: Path = Field(
        default=Path(DEFAULT_DATA_DIR),
        validate_default=True,
        description="Folder of the embedded Milvus Lite file, audit database and journal "
        "(absolute against the working directory at load time).",
    )
    rag: RagSettings = Field(default_factory=RagSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    milvus: MilvusSettings = Field(default_factory=MilvusSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings layers file, environment and overrides itself, so it can say
        # where each value came from and reject unknown keys; the model validates only.
        return (init_settings,)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _named_data_dir(cls, value: object) -> object:
        if isinstance(value, str | Path) and not str(value).strip():
            # Path("") is the working directory: never what an empty setting meant.
            raise ConfigurationError("data-dir", str(value), "must not be empty")
        return value

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: Path) -> Path:
        path = absolute_path(value)
        check_data_dir(path)
        return path

    @model_validator(mode="after")
    def _embedder_fits_mode(self) -> Settings:
        if (
            self.embedder.provider is EmbedderProvider.NONE
            and self.rag.search_mode.needs_query_vector
        ):
            raise ConfigurationError(
                "embedder.provider",
                self.embedder.provider.value,
                f"cannot serve rag.search-mode={self.rag.search_mode.value} "
                "(it embeds the query); use rag.search-mode=sparse or an embedder",
            )
        return self

    @model_validator(mode="after")
    def _one_principal_per_token(self) -> Settings:
        for digest, entry in self.mcp.principals.items():
            other = self.server.principals.get(digest)
            if other is not None and other != entry:
                raise ConfigurationError(
                    "server.principals",
                    digest,
                    "the token is also in mcp.principals (the deprecated name) with "
                    "another principal; keep one entry, in server.principals",
                )
        return self

    def agent_principals(self) -> dict[str, AgentPrincipalSettings]:
        """Agent tokens by sha256 digest: ``server.principals`` with the deprecated
        ``mcp.principals`` merged in (one map for REST and MCP)."""
        return {**self.mcp.principals, **self.server.principals}

    def check_mcp_token(self) -> None:
        """At start-up of ``mcp --transport http``: under ``access.mode=enforced``
        ``mcp.token`` must map to a principal (``mcp.tenant``, or an entry of
        ``server.principals``); ``ConfigurationError`` otherwise. (``serve`` checks
        ``server.agent-token`` alike, in ``create_http_app``.)"""
        if self.access.mode is not AccessMode.ENFORCED or self.mcp.token is None:
            return
        if self.mcp.tenant is not None:
            return
        token = self.mcp.token.get_secret_value().encode("utf-8")
        if hashlib.sha256(token).hexdigest() not in self.agent_principals():
            raise ConfigurationError(
                "mcp.token",
                "***",
                "under access.mode=enforced every agent token must map to a principal: "
                "add sha256(token) to server.principals as {tenant, user, groups} (or "
                "trusted-host: true for a host that names the principal of each call), "
                "or set mcp.tenant",
            )

    # --- resolved values ----------------------------------------------------------------

    @property
    def retrieval(self) -> RetrievalSettings:
        """Widths after the legacy ``rag.top-k`` fallback."""
        return self.rag.retrieval_settings()

    @property
    def milvus_uri(self) -> str:
        return self.milvus.uri or str(self.data_dir / "milvus.db")

    @property
    def embedded_search(self) -> bool:
        """The knowledge search runs in this process (a Milvus Lite file, or memory), so
        opening it costs local work, not a connection that may wait out a timeout."""
        # milvus.uri is a .db path or an http(s) server URL (``_known_uri``).
        return self.search.backend.value == "memory" or "://" not in self.milvus_uri

    @property
    def milvus_token(self) -> str | None:
        token = self.milvus.token
        return None if token is None else token.get_secret_value()

    @property
    def mcp_token(self) -> str | None:
        token = self.mcp.token
        return None if token is None else token.get_secret_value()

    @property
    def openai_api_key(self) -> str | None:
        key = self.embedder.openai.api_key
        return None if key is None else key.get_secret_value()

    @property
    def rerank_api_key(self) -> str | None:
        key = self.rag.rerank.api_key
        return None if key is None else key.get_secret_value()

    @property
    def audit_database_url(self) -> str:
        return self.audit.database_url or f"sqlite:///{self.data_dir / 'audit.db'}"

    @property
    def audit_journal_dir(self) -> Path:
        return files.audit_journal_dir(self)

    @property
    def domains_file(self) -> Path | None:
        return self.rag.domains_file

    # --- what the application gets ------------------------------------------------------

    def to_lookup_config(self) -> LookupConfig:
        return mapping.to_lookup_config(self)

    def to_answer_check_settings(self) -> AnswerCheckSettings:
        return mapping.to_answer_check_settings(self)

    @property
    def judge_api_key(self) -> str | None:
        key = self.audit.check.judge.api_key
        return None if key is None else key.get_secret_value()

    def domain_dictionary(self) -> dict[str, list[str]]:
        return files.domain_dictionary(self)
