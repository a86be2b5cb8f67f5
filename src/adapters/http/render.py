"""Jinja2 templates shipped in the package, rendered with every value escaped.

Autoescaping covers HTML; ``visible`` (the environment's ``finalize``) also shows control
characters (ESC, NUL, ...) and bidirectional overrides as ``\\xNN`` / ``\\uNNNN`` text,
so a stored string can neither inject markup nor hide or reorder what an auditor reads.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]"
)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(value: Any) -> Any:
    """What a page shows for a value: ``None`` as a dash (never Python's ``None``),
    control and bidirectional characters as escapes."""
    if value is None:
        return "–"
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return _INVISIBLE.sub(_escape_char, value)


def when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def number(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pathpart(value: str) -> str:
    """One URL path segment: every reserved character percent-encoded, "/" too."""
    return quote(str(value), safe="")


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("lookup_knowledge.adapters.http", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=visible,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["number"] = number
    env.filters["pretty_json"] = pretty_json
    env.filters["pathpart"] = pathpart
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
