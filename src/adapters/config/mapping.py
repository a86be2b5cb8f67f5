"""The mapping of the settings onto what the application is given: ``LookupConfig`` for
the lookup, ``AnswerCheckSettings`` for CheckAnswer (the domain values they hold)."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from lookup_knowledge.application.lookup import LookupConfig
from lookup_knowledge.domain.projection import ProjectionBudgets
from lookup_knowledge.domain.quality import QualityThresholds
from lookup_knowledge.domain.relevance import RelevanceCalibration
from lookup_knowledge.domain.rerank import RerankWeights
from lookup_knowledge.domain.reranking import RerankerSettings

if TYPE_CHECKING:
    from lookup_knowledge.adapters.config.settings import Settings
    from lookup_knowledge.application.answer_check import AnswerCheckSettings


def to_lookup_config(settings: Settings) -> LookupConfig:
    rag = settings.rag
    weights = rag.rerank.weights
    return LookupConfig(
        retrieval=rag.retrieval_settings(),
        mode=rag.search_mode,
        engine_grouping=rag.engine_grouping,
        late_materialisation=rag.late_materialisation,
        bm25_only_when_unreadable=rag.hybrid.bm25_only_when_unreadable,
        rerank=RerankWeights(
            enabled=rag.rerank.enabled,
            relevance=weights.relevance,
            domain_match=weights.domain_match,
            entity_match=weights.entity_match,
            keyword_match=weights.keyword_match,
            hint_alignment=weights.hint_alignment,
            source_type=MappingProxyType(dict(rag.rerank.source_type)),
        ),
        reranker=RerankerSettings(
            provider=rag.rerank.provider.value,
            top_k=rag.rerank.top_k,
            weight=rag.rerank.weight,
            logits=rag.rerank.logits,
        ),
        calibration=RelevanceCalibration(
            bm25_saturation=rag.relevance.bm25_saturation,
            rrf_k=rag.hybrid.rrf_k,
            min_share_of_best=rag.relevance.min_share_of_best,
        ),
        context_char_budget=rag.context.char_budget,
        context_min_excerpt_chars=rag.context.min_excerpt_chars,
        projection=ProjectionBudgets(
            max_blocks=rag.projection.max_blocks,
            max_excerpt_chars=rag.projection.max_excerpt_chars,
            max_total_chars=rag.projection.max_total_chars,
            min_excerpt_chars=rag.context.min_excerpt_chars,
        ),
        quality=QualityThresholds(medium=rag.quality.medium, high=rag.quality.high),
        payload_profile=rag.payload.profile,
        access_mode=settings.access.mode,
    )


def to_answer_check_settings(settings: Settings) -> AnswerCheckSettings:
    # imported here: a lookup, which never checks an answer, should not import the checker
    from lookup_knowledge.application.answer_check import AnswerCheckSettings
    from lookup_knowledge.domain.answer_check import CheckThresholds

    check = settings.audit.check
    return AnswerCheckSettings(
        thresholds=CheckThresholds(
            min_coverage=check.min_coverage,
            min_cosine=check.min_cosine,
            min_coverage_with_cosine=check.min_coverage_with_cosine,
        ),
        citation_pattern=check.citation_pattern,
        judge_mode=check.judge.mode,
    )
