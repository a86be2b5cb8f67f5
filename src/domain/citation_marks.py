"""How an answer marks a citation: the pattern the answer checker reads evidence ids with,
by default ``[id]`` or ``【id】`` (several ids split by commas or semicolons), and not a
markdown link's ``[text](url)``. Its own module, so configuration can name the default
without importing the answer checker (a lookup never runs it)."""

from __future__ import annotations

DEFAULT_CITATION_PATTERN = r"[\[【][ \t]*([^\[\]【】\n]+?)[ \t]*[\]】](?!\()"
