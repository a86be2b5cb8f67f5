"""The text an agent was shown, recovered from the knowledge base and checked against
the hash the audit store kept.

The audit row keeps the SHA-256 of the exact text shown and, in ``retrieval_details``,
its length. The Projector shows a chunk's text stripped and, when it is over budget,
cut to ``limit - 1`` characters plus an ellipsis; a block only in the context pack is
shown whole. So the shown text is one of a few candidates made from the chunk's current
text, and the hash says which, or that the chunk changed since.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class ShownText:
    text: str | None  # None: the knowledge base no longer holds the chunk
    verified: bool  # sha256(text) is the hash recorded when it was shown
    note: str


def recover_shown_text(
    current: str | None, content_hash: str, shown_chars: int | None
) -> ShownText:
    if current is None:
        return ShownText(None, False, "the knowledge base no longer holds this chunk")
    stripped = current.strip()
    candidates = [current, stripped]
    if shown_chars is not None and 0 < shown_chars < len(stripped):
        candidates.append(stripped[: max(shown_chars - len(ELLIPSIS), 0)] + ELLIPSIS)
    for text in candidates:
        if hashlib.sha256(text.encode("utf-8")).hexdigest() == content_hash:
            return ShownText(text, True, "exactly as shown (matches the recorded hash)")
    return ShownText(
        current,
        False,
        "the chunk's current text: it does not match the recorded hash (changed since shown)",
    )
