from __future__ import annotations

import pytest

from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.model import EvidenceCandidate, QueryHints
from lookup_knowledge.domain.query_understanding import (
    DomainDictionary,
    analyse_query,
    extract_entities,
    keyword_in,
)
from lookup_knowledge.domain.relevance import ScoreKind
from lookup_knowledge.domain.rerank import RerankWeights, score_candidate


def cand(**kw: object) -> EvidenceCandidate:
    return EvidenceCandidate(
        identity=EvidenceIdentity("d#chunk-0", "d", 0),
        original_rank=1,
        raw_score=0.5,
        score_kind=ScoreKind.COSINE,
        relevance=0.5,
        **kw,  # type: ignore[arg-type]
    )


HINTS = QueryHints(
    query="postgres PG-53300 too many connections",
    domains=("database",),
    matched_keywords=("postgres",),
    entities=("PG-53300",),
    filter_candidate="database",
)


def test_every_bonus_is_explained_with_its_weight() -> None:
    weights = RerankWeights(source_type={"runbook": 0.03})
    c = cand(
        content="On PG-53300 restart pgbouncer",
        title="Postgres pool",
        category="database",
        source_type="runbook",
    )
    ranked = score_candidate(c, HINTS, weights)
    rules = {a.rule: a for a in ranked.adjustments}
    assert set(rules) == {
        "relevance",
        "domain_match",
        "entity_match",
        "keyword_match",
        "source_type",
        "hint_alignment",
    }
    assert rules["domain_match"].weight == weights.domain_match
    assert rules["source_type"].contribution == 0.03
    assert ranked.final_score == pytest.approx(sum(a.contribution for a in ranked.adjustments))
    assert ranked.final_score == pytest.approx(0.5 + 0.10 + 0.15 + 0.10 + 0.03 + 0.05)


def test_no_match_no_bonus() -> None:
    ranked = score_candidate(cand(content="unrelated", category="network"), HINTS, RerankWeights())
    assert [a.rule for a in ranked.adjustments] == ["relevance"]
    assert ranked.final_score == pytest.approx(0.5)


def test_disabled_rerank_is_relevance_only() -> None:
    c = cand(content="PG-53300 postgres", category="database")
    ranked = score_candidate(c, HINTS, RerankWeights(enabled=False))
    assert ranked.final_score == pytest.approx(0.5)


def test_a_bonus_can_reorder() -> None:
    weak_on_topic = score_candidate(
        cand(content="PG-53300 explained", category="database"), HINTS, RerankWeights()
    )
    strong_off_topic = EvidenceCandidate(
        identity=EvidenceIdentity("x#chunk-0", "x", 0),
        original_rank=2,
        raw_score=0.6,
        score_kind=ScoreKind.COSINE,
        relevance=0.6,
        content="other",
    )
    assert (
        weak_on_topic.final_score
        > score_candidate(strong_off_topic, HINTS, RerankWeights()).final_score
    )


def test_weights_validate() -> None:
    with pytest.raises(ValueError, match="domain_match"):
        RerankWeights(domain_match=-1)


# ------------------------------------------------------------------ L0


def test_entities_in_english_and_chinese() -> None:
    text = (
        "数据库报错ORA-00942怎么办 pg-primary-01.db.northwind.internal 10.20.1.5:5432 "
        "v2.3.9 OPS-1423 INC0012345 retrieve_k getUserById() HTTP 503"
    )
    assert extract_entities(text) == (
        "ORA-00942",
        "pg-primary-01.db.northwind.internal",
        "10.20.1.5:5432",
        "v2.3.9",
        "OPS-1423",
        "INC0012345",
        "retrieve_k",
        "getUserById()",
        "HTTP 503",
    )


def test_plain_words_are_not_entities() -> None:
    assert extract_entities("how do I restart the service") == ()


def test_ascii_keywords_respect_word_boundaries_even_inside_chinese() -> None:
    assert keyword_in("db", "the db is down")
    assert not keyword_in("db", "feedback")
    assert keyword_in("PG", "连接pg失败")
    assert keyword_in("数据库", "数据库连接失败")


def test_filter_candidate_only_for_exactly_one_domain() -> None:
    d = DomainDictionary.from_mapping({"database": ["postgres", "数据库"], "network": ["dns"]})
    one = analyse_query("数据库连接池满了", d)
    assert one.domains == ("database",)
    assert one.filter_candidate == "database"
    two = analyse_query("postgres dns", d)
    assert set(two.domains) == {"database", "network"}
    assert two.filter_candidate is None
    none = analyse_query("hello", d)
    assert none.domains == ()
    assert none.filter_candidate is None


def test_category_name_counts_as_a_keyword() -> None:
    d = DomainDictionary.from_mapping({"network": []})
    assert analyse_query("network is slow", d).filter_candidate == "network"


def test_hints_reject_a_filter_outside_the_domains() -> None:
    with pytest.raises(ValueError):
        QueryHints(query="q", domains=("a",), filter_candidate="b")


def test_rerank_matches_like_l0_on_word_boundaries() -> None:
    hints = QueryHints(query="pg 10.0.0.1", matched_keywords=("pg",), entities=("10.0.0.1",))
    unrelated = cand(content="upgrade the frontend on host 10.0.0.15", title="Upgrades")
    assert [a.rule for a in score_candidate(unrelated, hints, RerankWeights()).adjustments] == [
        "relevance"
    ]
    related = cand(content="PG on 10.0.0.1 is the primary", title="PG primary")
    rules = {a.rule for a in score_candidate(related, hints, RerankWeights()).adjustments}
    assert {"entity_match", "keyword_match", "hint_alignment"} <= rules
