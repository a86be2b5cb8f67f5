"""What ``config show`` prints and what the configuration reference documents."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path

from pydantic import SecretStr

from lookup_knowledge.adapters.config.keys import SettingKey, key_schema
from lookup_knowledge.adapters.config.loading import LoadedSettings
from lookup_knowledge.adapters.config.redaction import mask_value
from lookup_knowledge.adapters.config.settings import DEFAULT_DATA_DIR, Settings
from lookup_knowledge.adapters.config.sources import DEFAULT_SOURCE
from lookup_knowledge.domain.settings import DEFAULT_RETRIEVE_K, DEFAULT_RETURN_N

UNSET = "(unset)"
NO_ENTRIES = "(none)"


def format_value(value: object) -> str:
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, SecretStr):
        return str(value)  # pydantic's own mask
    if isinstance(value, list | tuple):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _attribute(settings: Settings, key: SettingKey) -> object:
    value: object = settings
    for attr in key.attrs:
        value = getattr(value, attr)
    return value


def _effective(settings: Settings, key: SettingKey) -> object:
    """The value in use, with defaults that derive from other keys filled in."""
    derived: Mapping[str, object] = {
        "rag.retrieve-k": settings.retrieval.retrieve_k,
        "rag.return-n": settings.retrieval.return_n,
        "milvus.uri": settings.milvus_uri,
        "audit.database-url": settings.audit_database_url,
        "audit.journal-dir": settings.audit_journal_dir,
    }
    if key.name in derived:
        return derived[key.name]
    return _attribute(settings, key)


def _width_source(loaded: LoadedSettings, key: str, value: object, default: int) -> str:
    sources = loaded.sources
    source = sources.get(key, DEFAULT_SOURCE)
    if source != DEFAULT_SOURCE:
        return source
    legacy = sources.get("rag.top-k", DEFAULT_SOURCE)
    rag = loaded.settings.rag
    # rag.top-k counts only when neither width is set (RetrievalSettings.resolve).
    top_k_used = rag.top_k is not None and rag.retrieve_k is None and rag.return_n is None
    if top_k_used and legacy != DEFAULT_SOURCE:
        return f"{legacy} via rag.top-k"
    return "derived" if value != default else DEFAULT_SOURCE


def describe_settings(loaded: LoadedSettings) -> list[tuple[str, str, str]]:
    """(dotted key, value with secrets masked, source) per key, in reference order.

    Map keys list one row per entry (``rag.domains.database``), or one ``(none)`` row.
    """
    settings, sources = loaded.settings, loaded.sources
    rows: list[tuple[str, str, str]] = []
    for key in key_schema().keys:
        source = sources.get(key.name, DEFAULT_SOURCE)
        value = _effective(settings, key)
        if key.kind == "map" and isinstance(value, Mapping):
            if not value:
                rows.append((key.name, NO_ENTRIES, source))
            for name, entry in value.items():
                entry_key = f"{key.name}.{name}"
                rows.append((entry_key, format_value(entry), sources.get(entry_key, source)))
            continue
        if key.name == "rag.retrieve-k":
            source = _width_source(loaded, key.name, value, DEFAULT_RETRIEVE_K)
        elif key.name == "rag.return-n":
            source = _width_source(loaded, key.name, value, DEFAULT_RETURN_N)
        rows.append((key.name, format_value(mask_value(key.name, value)), source))
    return rows


# --- the configuration reference --------------------------------------------------------

_DEFAULT_TEXT = {
    "data-dir": DEFAULT_DATA_DIR,
    "rag.retrieve-k": str(DEFAULT_RETRIEVE_K),
    "rag.return-n": str(DEFAULT_RETURN_N),
    "milvus.uri": "<data-dir>/milvus.db",
    "audit.database-url": "sqlite:///<data-dir>/audit.db",
    "audit.journal-dir": "<data-dir>/audit-journal",
    "audit.signing-key": "<data-dir>/audit-signing-key.pem",
    "embedder.openai.api-key": "$OPENAI_API_KEY",
    "audit.check.judge.api-key": "$OPENAI_API_KEY",
    "rag.rerank.api-key": "$RERANK_API_KEY",
}


def _default_text(key: SettingKey) -> str:
    if key.name in _DEFAULT_TEXT:
        return _DEFAULT_TEXT[key.name]
    default = key.default()
    if isinstance(default, Mapping):
        if not default:
            return NO_ENTRIES
        return ", ".join(f"{name}: {format_value(v)}" for name, v in default.items())
    return format_value(default)


def reference_rows() -> list[tuple[str, str, str, str]]:
    """(key, default, environment variable, meaning) for every key."""
    rows: list[tuple[str, str, str, str]] = []
    for key in key_schema().keys:
        env = key.env_var + ("__<NAME>" if key.kind == "map" else "")
        rows.append((key.name, _default_text(key), env, key.field.description or ""))
    return rows


def reference_markdown() -> str:
    """The reference table as Markdown (docs/configuration.md embeds it verbatim)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    def prose(text: str) -> str:
        return cell(text).replace("<", "&lt;").replace(">", "&gt;")

    lines = [
        "| Key | Default | Environment variable | Meaning |",
        "| --- | --- | --- | --- |",
    ]
    for name, default, env, meaning in reference_rows():
        lines.append(f"| `{name}` | `{cell(default)}` | `{env}` | {prose(meaning)} |")
    return "\n".join(lines) + "\n"
