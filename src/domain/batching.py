"""Embed batches bounded by the tokens they feed the model, not only by their count.

A transformer's working memory for one batch grows with ``texts x padded length`` (and
its attention with the square of the length), so a batch of 32 texts at the model's full
window costs many times what 32 short texts do. Grouping length-sorted texts under a
budget of padded tokens keeps the peak flat whatever the corpus looks like, and still
packs many short texts into one call.
"""

from __future__ import annotations

from collections.abc import Sequence


def token_bounded_batches(
    lengths: Sequence[int], *, max_count: int, max_tokens: int
) -> list[list[int]]:
    """Consecutive runs of the indices ``0..len(lengths)-1``, in order, such that each run
    has at most ``max_count`` items and ``len(run) * max(lengths in run) <= max_tokens``
    (the padded size of the batch). A single text longer than the budget is a batch of
    its own: it cannot be split here. Meant for lengths sorted ascending, where the
    newest text is the longest and so the budget check is one multiplication."""
    if max_count < 1:
        raise ValueError("max_count must be >= 1")
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    batches: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for index, length in enumerate(lengths):
        width = max(widest, length)
        if current and (len(current) >= max_count or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current, width = [], length
        current.append(index)
        widest = width
    if current:
        batches.append(current)
    return batches
