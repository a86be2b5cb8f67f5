"""Text analysis adapters: the ``TextAnalyzer`` port over Snowball stemming and jieba."""

from __future__ import annotations

from lookup_knowledge.adapters.text.analysis import (
    ENGLISH_STOP_WORDS,
    SnowballJiebaAnalyzer,
)

__all__ = ["ENGLISH_STOP_WORDS", "SnowballJiebaAnalyzer"]
