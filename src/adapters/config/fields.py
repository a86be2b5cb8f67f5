"""The field types of the settings model: whole numbers that refuse ``True``, optional
values that an empty setting leaves unset, http(s) URLs, comma-separated keyword lists."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, SecretStr

_WHOLE = "must be a whole number"
_NUMBER = "must be a number"


def kebab(name: str) -> str:
    """The key of a field: ``max_chunks_per_document`` -> ``max-chunks-per-document``."""
    return name.replace("_", "-")


def _blank_to_none(value: object) -> object:
    # An empty environment variable or ``key=`` line leaves an optional value unset.
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _whole(value: object) -> object:
    # pydantic takes True for 1; a switch where a count belongs is a mistake.
    if isinstance(value, bool):
        raise ValueError(_WHOLE)
    return value


def _number(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(_NUMBER)
    return value


def _optional_whole(value: object) -> object:
    return _whole(_blank_to_none(value))


def _optional_text(value: object) -> object:
    value = _blank_to_none(value)
    return value.strip() if isinstance(value, str) else value


def absolute_path(path: Path) -> Path:
    """Resolve against the working directory now, so a later chdir changes nothing."""
    return Path(os.path.abspath(path.expanduser()))


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise ValueError("must be an http(s):// URL")
    return value.rstrip("/")


Whole = Annotated[int, BeforeValidator(_whole)]
Number = Annotated[float, BeforeValidator(_number)]
OptionalWhole = Annotated[int | None, BeforeValidator(_optional_whole)]
OptionalText = Annotated[str | None, BeforeValidator(_optional_text)]
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_blank_to_none)]
OptionalPath = Annotated[Path | None, BeforeValidator(_blank_to_none)]
#: An http(s) API base URL, without a trailing slash.
HttpUrl = Annotated[str, AfterValidator(_http_url)]
OptionalHttpUrl = Annotated[HttpUrl | None, BeforeValidator(_blank_to_none)]


def split_keywords(value: object) -> object:
    """``"postgres, pg, 数据库"`` -> ``["postgres", "pg", "数据库"]``; lists pass through.

    Splits on ASCII and full-width commas, drops blanks and repeats, keeps the order.
    """
    if isinstance(value, str):
        items: list[object] = list(value.replace("，", ",").split(","))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return value  # let pydantic name the type error
    seen: list[object] = []
    for item in items:
        cleaned = item.strip() if isinstance(item, str) else item
        if cleaned == "" or cleaned in seen:
            continue
        seen.append(cleaned)
    return seen


Keywords = Annotated[list[str], BeforeValidator(split_keywords)]
