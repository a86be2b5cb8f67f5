"""Adapters for the answer checker: a Snowball stemmer, the knowledge store's current
chunk text, and an optional claim judge: an OpenAI-compatible chat endpoint or an NLI
classifier served by Text Embeddings Inference."""

from lookup_knowledge.adapters.answer_check.chunk_text import SearchChunkText
from lookup_knowledge.adapters.answer_check.judge import OpenAICompatibleClaimJudge
from lookup_knowledge.adapters.answer_check.nli_judge import TeiNliClaimJudge
from lookup_knowledge.adapters.answer_check.stemming import SnowballStemmer

__all__ = ["OpenAICompatibleClaimJudge", "SearchChunkText", "SnowballStemmer", "TeiNliClaimJudge"]
