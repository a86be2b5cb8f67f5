"""What the ``agent`` payload may name: only the blocks it returns.

Every value in it shaped like an evidence id (``docId#chunk-N``, ``vector:…``,
``rank:N``) must be one of its own blocks' ``document_id``s: an id the agent was not
given is an invitation to cite something it never saw.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

EVIDENCE_ID = re.compile(r"[^\s\"'\[\](),]+#chunk-\d+|\bvector:[^\s\"'\[\](),]+|\brank:\d+")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def ids_named(payload: Mapping[str, Any]) -> set[str]:
    return {m.group(0) for s in _strings(payload) for m in EVIDENCE_ID.finditer(s)}


def assert_names_only_returned_blocks(payload: Mapping[str, Any]) -> None:
    returned = {b["document_id"] for b in payload["evidenceBlocks"]}
    stray = ids_named(payload) - returned
    assert not stray, f"the agent payload names ids it does not return: {sorted(stray)}"
