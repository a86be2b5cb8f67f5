"""YAML front matter: ``---`` on the first line, a mapping, ``---`` (or ``...``)."""

from __future__ import annotations

from typing import Any

import yaml

from lookup_knowledge.domain.errors import InvalidInputError


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(metadata, body). No front matter -> ({}, text). Invalid -> ``InvalidInputError``."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].rstrip("\r\n").rstrip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n").rstrip() in ("---", "..."):
            raw = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            try:
                data = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError as error:
                raise InvalidInputError(f"invalid front matter: {error}") from error
            if data is None:
                data = {}
            if not isinstance(data, dict):
                raise InvalidInputError("front matter must be a mapping of keys to values")
            return {str(k): v for k, v in data.items()}, body
    return {}, text  # an opening rule without a closing one is just a horizontal rule


def meta_text(meta: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` that holds a scalar, as stripped text."""
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            text = str(value).strip()
            if text:
                return text
    return None
