"""``load_settings``: defaults < config file < environment < overrides, validated once.

Every value keeps the name of the source that set it (``LoadedSettings.sources``), so
``config show`` can say where it came from and an error can say where to fix it. Any
invalid value fails here with one ``ConfigurationError`` naming the key, the value and the
rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lookup_knowledge.adapters.config.keys import CONFIG_FILE_ENV, KeyPath, dotted, key_schema
from lookup_knowledge.adapters.config.redaction import mask_value
from lookup_knowledge.adapters.config.settings import Settings
from lookup_knowledge.adapters.config.sources import (
    DEFAULT_SOURCE,
    OVERRIDE_SOURCE,
    Assignment,
    Layer,
    default_map_entries,
    env_source,
    environment_layer,
    file_layer,
    overrides_layer,
)
from lookup_knowledge.domain.errors import ConfigurationError

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
_OPENAI_API_KEY: KeyPath = ("embedder", "openai", "api-key")


@dataclass(frozen=True, slots=True)
class LoadedSettings:
    """The validated settings and, per dotted key, the source of its value: ``default``,
    ``file:<path>``, ``env:<VAR>`` or ``override``. Map entries have their own keys
    (``rag.domains.database``); the map's key carries the highest source among them."""

    settings: Settings
    sources: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None


def _config_file(
    config_file: str | Path | None, environ: Mapping[str, str]
) -> tuple[Path, str] | None:
    if config_file is not None and str(config_file).strip():
        return Path(os.path.abspath(Path(config_file).expanduser())), "config_file"
    from_env = environ.get(CONFIG_FILE_ENV, "").strip()
    if from_env:
        return Path(os.path.abspath(Path(from_env).expanduser())), CONFIG_FILE_ENV
    return None


def _rank(source: str) -> int:
    if source == OVERRIDE_SOURCE:
        return 3
    if source.startswith("env:"):
        return 2
    if source.startswith("file:"):
        return 1
    return 0


def _nested(merged: Layer) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path, assignment in merged.items():
        node = root
        for segment in path[:-1]:
            node = node.setdefault(segment, {})
        node[path[-1]] = assignment.value
    return root


def _sources(merged: Layer) -> dict[str, str]:
    schema = key_schema()
    sources = {key.name: DEFAULT_SOURCE for key in schema.keys}
    for path, assignment in merged.items():
        sources[dotted(path)] = assignment.source
        owner = schema.map_of(path)
        if owner is not None and _rank(assignment.source) > _rank(sources[owner.name]):
            sources[owner.name] = assignment.source
    return sources


def _where(key: str, sources: Mapping[str, str]) -> str:
    source = sources.get(key.split("[", 1)[0])
    return f" (set by {source})" if source and source != DEFAULT_SOURCE else ""


_RULES = {
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_too_short": "must not be empty",
    "dict_type": "must be a map of name -> value",
    "list_type": "must be a list (or comma-separated text)",
    "path_type": "must be a file path",
}


def _rule(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    bounds = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        sign, name = bounds[kind]
        return f"must be {sign} {ctx.get(name)}"
    if kind in ("enum", "literal_error"):
        return f"must be one of {ctx.get('expected')}"
    if kind in _RULES:
        return _RULES[kind]
    message = str(error.get("msg", "is invalid")).removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def _key_of(location: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for part in location:
        if isinstance(part, int) and parts:
            parts[-1] += f"[{part}]"
        else:
            parts.append(str(part))
    return ".".join(parts) or "settings"


def _translate(error: ValidationError, sources: Mapping[str, str]) -> ConfigurationError:
    problems = [(_key_of(e["loc"]), e.get("input"), _rule(e)) for e in error.errors()]
    key, value, rule = problems[0]
    others = list(dict.fromkeys(p[0] for p in problems[1:] if p[0] != key))
    rule += _where(key, sources)
    if others:
        rule += "; also invalid: " + ", ".join(others)
    return ConfigurationError(key, mask_value(key, value), rule)


def _with_source(error: ConfigurationError, sources: Mapping[str, str]) -> ConfigurationError:
    return ConfigurationError(
        error.key, mask_value(error.key, error.value), error.rule + _where(error.key, sources)
    )


def validate_layers(merged: Layer) -> tuple[Settings, dict[str, str]]:
    """Validate merged layers into ``Settings``; any problem -> one ``ConfigurationError``."""
    sources = _sources(merged)
    try:
        settings = Settings.model_validate(_nested(merged))
        settings.domain_dictionary()  # a missing or malformed domains file fails now
        settings.to_lookup_config()
    except ValidationError as e:
        raise _translate(e, sources) from e
    except ConfigurationError as e:
        raise _with_source(e, sources) from e
    return settings, sources


def load_settings(
    config_file: str | Path | None = None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadedSettings:
    """Read and validate the configuration.

    ``config_file`` (else ``$LOOKUP_KNOWLEDGE_CONFIG``): ``.yaml``/``.yml``, ``.toml``,
    ``.properties`` or ``.json``. ``environ`` defaults to ``os.environ``. ``overrides``
    take dotted keys (``{"rag.retrieve-k": 30}``) or nested dicts and win over all.
    Raises ``ConfigurationError`` naming the key, the value and the rule.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    merged: Layer = default_map_entries()
    located = _config_file(config_file, env)
    if located is not None:
        merged.update(file_layer(*located))
    merged.update(environment_layer(env))
    if overrides:
        merged.update(overrides_layer(overrides))
    current = merged.get(_OPENAI_API_KEY)
    unset = current is None or current.value is None or str(current.value).strip() == ""
    if unset and env.get(OPENAI_API_KEY_ENV, "").strip():
        merged[_OPENAI_API_KEY] = Assignment(
            env[OPENAI_API_KEY_ENV], env_source(OPENAI_API_KEY_ENV)
        )
    settings, sources = validate_layers(merged)
    return LoadedSettings(
        settings=settings,
        sources=sources,
        config_file=None if located is None else located[0],
    )
