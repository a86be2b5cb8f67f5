"""The dotted keys of the settings model, read off the model itself, and their env names.

A key is a *leaf* (one value: ``rag.retrieve-k``), a *map* (name -> value entries:
``rag.domains``, ``rag.rerank.source-type``) or a *section* that groups keys (``rag``,
``rag.rerank``). Environment variables follow one scheme: ``LOOKUP_KNOWLEDGE_`` + the key
with ``.`` -> ``__`` and ``-`` -> ``_``, upper-cased.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Literal, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lookup_knowledge.adapters.config.fields import kebab
from lookup_knowledge.adapters.config.settings import Settings

ENV_PREFIX = "LOOKUP_KNOWLEDGE_"
CONFIG_FILE_ENV = "LOOKUP_KNOWLEDGE_CONFIG"
# Variables under the prefix that are not settings keys.
RESERVED_ENV = frozenset({CONFIG_FILE_ENV})

KeyPath = tuple[str, ...]

# Keys read under their old names (a file, a variable or an override written for an
# older version keeps working): old path -> the key it sets now.
RENAMED: dict[KeyPath, KeyPath] = {("audit", "spool-dir"): ("audit", "journal-dir")}


def dotted(path: KeyPath) -> str:
    return ".".join(path)


def env_var_name(key: str) -> str:
    """``rag.retrieve-k`` -> ``LOOKUP_KNOWLEDGE_RAG__RETRIEVE_K``."""
    return ENV_PREFIX + key.replace(".", "__").replace("-", "_").upper()


@dataclass(frozen=True, slots=True)
class SettingKey:
    path: KeyPath  # user-facing segments, e.g. ("rag", "retrieve-k")
    attrs: tuple[str, ...]  # attribute names on the model, e.g. ("rag", "retrieve_k")
    kind: Literal["leaf", "map"]
    field: FieldInfo

    @property
    def name(self) -> str:
        return dotted(self.path)

    @property
    def env_var(self) -> str:
        return env_var_name(self.name)

    def default(self) -> object:
        value = self.field.get_default(call_default_factory=True)
        return value.value if isinstance(value, Enum) else value


class KeySchema:
    """Every key of the model in model order, and the sections that group them."""

    def __init__(self, keys: tuple[SettingKey, ...], sections: frozenset[KeyPath]) -> None:
        self.keys = keys
        self.sections = sections
        self._index = {k.path: k for k in keys}

    @staticmethod
    def current(path: KeyPath) -> KeyPath:
        """The path a key has now (``audit.spool-dir`` -> ``audit.journal-dir``)."""
        return RENAMED.get(path, path)

    def key(self, path: KeyPath) -> SettingKey | None:
        return self._index.get(path)

    def is_leaf(self, path: KeyPath) -> bool:
        found = self.key(path)
        return found is not None and found.kind == "leaf"

    def is_map(self, path: KeyPath) -> bool:
        found = self.key(path)
        return found is not None and found.kind == "map"

    def is_section(self, path: KeyPath) -> bool:
        return path in self.sections

    def map_of(self, path: KeyPath) -> SettingKey | None:
        """The map key an entry path belongs to (``rag.domains.db`` -> ``rag.domains``)."""
        for length in range(len(path) - 1, 0, -1):
            found = self.key(path[:length])
            if found is not None:
                return found if found.kind == "map" else None
        return None

    def names(self) -> list[str]:
        return [k.name for k in self.keys]

    def suggest(self, unknown: str) -> str | None:
        """The known key closest to a mistyped one, if any is close."""
        matches = difflib.get_close_matches(unknown, self.names(), n=1, cutoff=0.6)
        return matches[0] if matches else None

    def suggest_env(self, unknown: str) -> str | None:
        names = {k.env_var: k.name for k in self.keys}
        matches = difflib.get_close_matches(unknown.upper(), list(names), n=1, cutoff=0.6)
        return matches[0] if matches else None


def _walk(
    model: type[BaseModel],
    path: KeyPath,
    attrs: tuple[str, ...],
    keys: list[SettingKey],
    sections: set[KeyPath],
) -> None:
    for attr, info in model.model_fields.items():
        segment = info.alias or kebab(attr)
        here, names = (*path, segment), (*attrs, attr)
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            sections.add(here)
            _walk(annotation, here, names, keys, sections)
        elif get_origin(annotation) is dict:
            keys.append(SettingKey(here, names, "map", info))
        else:
            keys.append(SettingKey(here, names, "leaf", info))


@cache
def key_schema() -> KeySchema:
    keys: list[SettingKey] = []
    sections: set[KeyPath] = set()
    _walk(Settings, (), (), keys, sections)
    return KeySchema(tuple(keys), frozenset(sections))
