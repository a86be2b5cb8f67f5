"""Named eval configurations, each a set of settings overrides (the ``--set`` keys).

A configuration name is one atom (``sparse``, ``cap-1``) or atoms joined by ``+``
(``hybrid+cap-1+rerank-off``; later atoms win). A preset names a group of
configurations compared side by side (``modes`` = dense, sparse, hybrid). Because every
atom is plain settings keys, ``eval replay --set ...`` can reproduce any of them.

Every configuration of an eval also gets the *eval depth* (``depth_overrides``): the
deepest cutoff of the measures (20 for Recall@20) as ``rag.return-n`` and projection
budgets that let that many blocks through, so that the metrics measure ranking, not
the agent-facing budget of 5 blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from lookup_knowledge.domain.errors import InvalidInputError

ATOMS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {
        "default": {},
        "dense": {"rag.search-mode": "dense"},
        "sparse": {"rag.search-mode": "sparse"},
        "hybrid": {"rag.search-mode": "hybrid"},
        "cap-1": {"rag.max-chunks-per-document": 1},
        "cap-2": {"rag.max-chunks-per-document": 2},
        "cap-3": {"rag.max-chunks-per-document": 3},
        "cap-off": {"rag.max-chunks-per-document": 0},
        "grouping-on": {"rag.engine-grouping": True},
        "grouping-off": {"rag.engine-grouping": False},
        "rerank-on": {"rag.rerank.enabled": True},
        "rerank-off": {"rag.rerank.enabled": False},
        "late-on": {"rag.late-materialisation": True},
        "late-off": {"rag.late-materialisation": False},
    }
)

PRESETS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "modes": ("dense", "sparse", "hybrid"),
        "caps": ("cap-1", "cap-2", "cap-off"),
        "grouping": ("grouping-off", "grouping-on"),
        "rerank": ("rerank-on", "rerank-off"),
    }
)

DEFAULT_PRESET = "modes"
#: Characters the product lets an excerpt have (rag.projection.max-excerpt-chars default).
_EXCERPT_CHARS = 1200


def configuration_overrides(name: str) -> dict[str, object]:
    """The settings overrides of a configuration name (atoms joined by ``+``)."""
    if not name or not name.strip():
        raise InvalidInputError("a configuration name must not be empty")
    merged: dict[str, object] = {}
    for atom in name.split("+"):
        if atom not in ATOMS:
            raise InvalidInputError(
                f"unknown configuration {atom!r}; known: {', '.join(ATOMS)} "
                "(join several with +, e.g. hybrid+cap-1)"
            )
        merged.update(ATOMS[atom])
    return merged


def expand(configs: Sequence[str], presets: Sequence[str]) -> list[str]:
    """Configuration names from ``--config`` values and comma-separated ``--preset``
    values, in order, without repeats; the default preset when both are empty."""
    names: list[str] = []
    for value in presets:
        for preset in (p.strip() for p in value.split(",")):
            if not preset:
                continue
            if preset not in PRESETS:
                raise InvalidInputError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
            names.extend(PRESETS[preset])
    names.extend(c.strip() for c in configs)
    if not names:
        names = list(PRESETS[DEFAULT_PRESET])
    unique = list(dict.fromkeys(names))
    for name in unique:
        configuration_overrides(name)  # validate early, before any ingest
    return unique


def depth_overrides(return_n: int, retrieve_k: int) -> dict[str, object]:
    """Widths and budgets for an eval at depth ``return_n``."""
    if return_n < 1 or retrieve_k < return_n:
        raise InvalidInputError("the eval needs 1 <= return-n <= retrieve-k")
    return {
        "rag.return-n": return_n,
        "rag.retrieve-k": retrieve_k,
        "rag.projection.max-blocks": return_n,
        "rag.projection.max-excerpt-chars": _EXCERPT_CHARS,
        "rag.projection.max-total-chars": return_n * _EXCERPT_CHARS,
    }


def parse_set_options(values: Sequence[str]) -> dict[str, object]:
    """``["rag.max-chunks-per-document=1", ...]`` -> overrides (values stay text; the
    settings model converts and validates them)."""
    overrides: dict[str, object] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"--set expects key=value, got {value!r}")
        overrides[key.strip()] = raw.strip()
    return overrides


def as_set_options(overrides: Mapping[str, object]) -> list[str]:
    """The inverse of ``parse_set_options`` (for a printed replay command)."""
    out: list[str] = []
    for key, value in overrides.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append(f"{key}={text}")
    return out
