"""The configuration sources, each read into a flat layer of key path -> (value, source).

A layer holds only the keys a source sets. Map entries (``rag.domains.database``) are
separate keys, so layers merge entry by entry. Every key a source names must be a key of
the model: a typo is an error that suggests the closest key, never silently ignored.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lookup_knowledge.adapters.config.keys import (
    ENV_PREFIX,
    RESERVED_ENV,
    KeyPath,
    dotted,
    key_schema,
)
from lookup_knowledge.adapters.config.properties import PropertiesSyntaxError, parse_properties
from lookup_knowledge.adapters.config.redaction import mask_value
from lookup_knowledge.domain.errors import ConfigurationError

DEFAULT_SOURCE = "default"
OVERRIDE_SOURCE = "override"
CONFIG_SUFFIXES = (".yaml", ".yml", ".toml", ".properties", ".json")
_DOMAINS_FILE: KeyPath = ("rag", "domains-file")


@dataclass(frozen=True, slots=True)
class Assignment:
    value: object
    source: str  # "default" | "file:<path>" | "env:<VAR>" | "override"


Layer = dict[KeyPath, Assignment]


def file_source(path: Path) -> str:
    return f"file:{path}"


def env_source(variable: str) -> str:
    return f"env:{variable}"


def _unknown_key(key: str, value: object, source: str) -> ConfigurationError:
    hint = key_schema().suggest(key)
    rule = f"is not a known setting (in {source})"
    if hint is not None:
        rule += f"; did you mean {hint}?"
    return ConfigurationError(key, mask_value(key, value), rule)


def _not_a_value(path: KeyPath, value: object, source: str) -> ConfigurationError:
    children = sorted(k.name for k in key_schema().keys if k.path[: len(path)] == path)[:3]
    return ConfigurationError(
        dotted(path),
        value,
        f"is a group of settings, not a value (set its keys, e.g. {', '.join(children)}; "
        f"in {source})",
    )


def _map_entries(layer: Layer, path: KeyPath, value: object, source: str) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            dotted(path), value, f"must be a map of name -> value (in {source})"
        )
    for name, entry in value.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(
                f"{dotted(path)}.{name}", entry, f"needs a non-blank name (in {source})"
            )
        layer[(*path, name.strip())] = Assignment(entry, source)


def flatten_into(layer: Layer, data: Mapping[Any, Any], source: str, prefix: KeyPath = ()) -> Layer:
    """Nested and dotted keys alike (``{"rag": {"retrieve-k": 3}}``, ``{"rag.retrieve-k":
    3}``) into flat key paths. ``_`` in a key segment reads as ``-``; map entry names are
    kept as written."""
    schema = key_schema()
    for raw_key, value in data.items():
        written = f"{dotted(prefix)}.{raw_key}" if prefix else str(raw_key)
        if not isinstance(raw_key, str):
            raise _unknown_key(written, value, source)
        segments = [segment.strip() for segment in raw_key.split(".")]
        if not all(segments):
            raise _unknown_key(written, value, source)
        path = prefix
        for index, segment in enumerate(segments):
            if schema.is_map(path):
                layer[(*path, ".".join(segments[index:]))] = Assignment(value, source)
                break
            candidate = schema.current((*path, segment.replace("_", "-")))
            if schema.is_leaf(candidate) and index == len(segments) - 1:
                layer[candidate] = Assignment(value, source)
                break
            if schema.is_section(candidate) or schema.is_map(candidate):
                path = candidate
                continue
            raise _unknown_key(written, value, source)
        else:  # every segment named a section or a map: the value holds its keys
            if schema.is_map(path):
                _map_entries(layer, path, value, source)
            elif isinstance(value, Mapping):
                flatten_into(layer, value, source, path)
            else:
                raise _not_a_value(path, value, source)
    return layer


def overrides_layer(overrides: Mapping[str, object]) -> Layer:
    return flatten_into({}, overrides, OVERRIDE_SOURCE)


# --- config file ------------------------------------------------------------------------


def _parse_file(path: Path, text: str) -> object:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(text)
    if suffix == ".toml":
        return tomllib.loads(text)
    if suffix == ".json":
        return json.loads(text)
    return parse_properties(text)


_TOO_DEEP = "nests too deeply to be a configuration (at most a few levels of sections)"
_MAX_DEPTH = 32


def _one_line(error: Exception) -> str:
    """A parser's complaint on one line, with the line (and column) where it is."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        problem = error.problem or error.context or "invalid YAML"
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if isinstance(error, json.JSONDecodeError):
        return f"line {error.lineno}, column {error.colno}: {error.msg}"
    return " ".join(str(error).split())


def _depth(value: object, limit: int = _MAX_DEPTH) -> int:
    """How deep ``value`` nests, counted up to ``limit`` (without recursion)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if deepest >= limit:
            return deepest
        if isinstance(node, Mapping):
            stack.extend((child, level + 1) for child in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((child, level + 1) for child in node)
    return deepest


def file_layer(path: Path, origin: str) -> Layer:
    """Read a config file; ``origin`` names where its path came from (for errors)."""
    shown = str(path)
    suffix = path.suffix.lower()
    if suffix not in CONFIG_SUFFIXES:
        raise ConfigurationError(origin, shown, "must end in " + ", ".join(CONFIG_SUFFIXES))
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(origin, shown, "file not found") from None
    except OSError as e:
        raise ConfigurationError(origin, shown, f"cannot be read ({e.strerror})") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if suffix != ".properties":
            raise ConfigurationError(origin, shown, "must be UTF-8 text") from None
        text = raw.decode("latin-1")  # what java.util.Properties reads
    try:
        data = _parse_file(path, text)
    except (
        yaml.YAMLError,
        tomllib.TOMLDecodeError,
        json.JSONDecodeError,
        PropertiesSyntaxError,
        ValueError,  # a parser's own limits, e.g. an integer of more than 4300 digits
    ) as e:
        raise ConfigurationError(origin, shown, f"cannot be parsed: {_one_line(e)}") from e
    except RecursionError:
        raise ConfigurationError(origin, shown, _TOO_DEEP) from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigurationError(origin, shown, "must hold a mapping of keys to values")
    if _depth(data) >= _MAX_DEPTH:
        raise ConfigurationError(origin, shown, _TOO_DEEP)
    layer = flatten_into({}, data, file_source(path))
    domains_file = layer.get(_DOMAINS_FILE)
    if domains_file is not None and isinstance(domains_file.value, str | Path):
        # A path written in a config file is relative to that file, not to the caller.
        written = Path(domains_file.value).expanduser()
        if str(domains_file.value).strip() and not written.is_absolute():
            layer[_DOMAINS_FILE] = Assignment(path.parent / written, domains_file.source)
    return layer


# --- environment ------------------------------------------------------------------------


def _json_object(variable: str, raw: str, path: KeyPath) -> Mapping[str, object]:
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        data = None
    if isinstance(data, dict) and _depth(data) >= _MAX_DEPTH:
        raise ConfigurationError(variable, raw[:80], _TOO_DEEP)
    if not isinstance(data, dict):
        raise ConfigurationError(
            variable,
            raw,
            f"must be a JSON object: {dotted(path)} is a group of settings "
            f"(or set its keys one by one, e.g. {variable}__<NAME>)",
        )
    return data


def _unknown_variable(variable: str, raw: str) -> ConfigurationError:
    schema = key_schema()
    hint = schema.suggest_env(variable)
    rule = f"is not a known setting (variables under {ENV_PREFIX} are settings)"
    if hint is not None:
        key = next(k.name for k in schema.keys if k.env_var == hint)
        rule += f"; did you mean {hint} ({key})?"
        return ConfigurationError(variable, mask_value(key, raw), rule)
    return ConfigurationError(variable, mask_value(variable, raw), rule)


def environment_layer(environ: Mapping[str, str]) -> Layer:
    """``LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K=30`` -> ``rag.retrieve-k``.

    Map entries: ``LOOKUP_KNOWLEDGE_RAG__DOMAINS__DATABASE=postgres,pg`` (the entry name
    is lower-cased) or the whole map as JSON in ``LOOKUP_KNOWLEDGE_RAG__DOMAINS``.
    """
    schema = key_schema()
    layer: Layer = {}
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in RESERVED_ENV:
            continue
        raw, source = environ[variable], env_source(variable)
        segments = upper.removeprefix(ENV_PREFIX).split("__")
        path: KeyPath = ()
        for index, segment in enumerate(segments):
            if schema.is_map(path):
                entry = "__".join(segments[index:]).lower()
                layer[(*path, entry)] = Assignment(raw, source)
                break
            candidate = schema.current((*path, segment.lower().replace("_", "-")))
            if schema.is_leaf(candidate) and index == len(segments) - 1:
                layer[candidate] = Assignment(raw, source)
                break
            if schema.is_section(candidate) or schema.is_map(candidate):
                path = candidate
                continue
            raise _unknown_variable(variable, raw)
        else:
            data = _json_object(variable, raw, path)
            if schema.is_map(path):
                _map_entries(layer, path, data, source)
            else:
                flatten_into(layer, data, source, path)
    return layer


def default_map_entries() -> Layer:
    """Map defaults (``rag.rerank.source-type``) as entries, so a source that sets one
    entry keeps the others."""
    layer: Layer = {}
    for key in key_schema().keys:
        if key.kind == "map":
            default = key.default()
            if isinstance(default, Mapping):
                for name, value in default.items():
                    layer[(*key.path, str(name))] = Assignment(value, DEFAULT_SOURCE)
    return layer
